package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"corral"
	"corral/internal/api"
	"corral/internal/modeltest"
)

// Delegation end to end: real runs in real sandboxes, the scripted model
// telling each agent what to do by the role word in its instructions.

// roleOf finds the ROLE:<word> an agent's instructions put in the system
// prompt.
var roleWord = regexp.MustCompile(`ROLE:(\w+)`)

func roleOf(req modeltest.Request) string {
	for _, m := range req.Messages {
		if m.Role == "system" {
			if s := roleWord.FindStringSubmatch(m.Content); s != nil {
				return s[1]
			}
		}
	}
	return ""
}

// roles answers each request with the script of its agent's role.
func roles(scripts map[string]modeltest.Script) modeltest.Script {
	return func(req modeltest.Request) modeltest.Reply {
		if s := scripts[roleOf(req)]; s != nil {
			return s(req)
		}
		return modeltest.Text("no script for role " + roleOf(req))
	}
}

// roleAgent makes an agent of c's whose runs play role.
func (c *client) roleAgent(name, role string) string {
	c.e.t.Helper()
	id := c.createAgent(name)
	c.do("PATCH", "/api/agents/"+id, map[string]any{"instructions": "ROLE:" + role}).want(http.StatusOK)
	return id
}

func delegateCall(id, agentID, task string) modeltest.ToolCall {
	return modeltest.ToolCall{ID: id, Name: "delegate", Arguments: string(mustJSON(map[string]string{"agent_id": agentID, "task": task}))}
}

// targetOf reads "to <agent id>" from the run's message.
var targetWord = regexp.MustCompile(`to (agt_\w+)`)

func firstUser(req modeltest.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Content
		}
	}
	return ""
}

// delegator delegates once to the agent its message names, then answers
// with what the tool said.
func delegator(req modeltest.Request) modeltest.Reply {
	if res := req.LastToolResults(); len(res) > 0 {
		return modeltest.Text("delegation said: " + res[0].Content)
	}
	m := targetWord.FindStringSubmatch(firstUser(req))
	if m == nil {
		return modeltest.Text("no target")
	}
	return modeltest.Calls(delegateCall("d1", m[1], "please answer"))
}

func (c *client) tree(runID string) []api.RunView {
	c.e.t.Helper()
	var l api.List[api.RunView]
	c.do("GET", "/api/runs/"+runID+"/tree", nil).want(http.StatusOK).decode(&l)
	return l.Items
}

func (c *client) runsOf(agentID string) []api.RunView {
	c.e.t.Helper()
	var l api.List[api.RunView]
	c.do("GET", "/api/agents/"+agentID+"/runs", nil).want(http.StatusOK).decode(&l)
	return l.Items
}

// lastToolResult is the content of the last tool result the model got in
// a conversation of role.
func (e *env) lastToolResult(role string) string {
	out := ""
	for _, r := range e.model.Requests() {
		if roleOf(r) != role {
			continue
		}
		if res := r.LastToolResults(); len(res) > 0 {
			out = res[len(res)-1].Content
		}
	}
	return out
}

func TestDelegationAuthorization(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice, bob := e.signup("alice@example.com", "Alice"), e.signup("bob@example.com", "Bob")
	boss := alice.roleAgent("boss", "boss")
	bobs := bob.roleAgent("bob's private", "worker")
	e.answer(roles(map[string]modeltest.Script{
		"boss":   delegator,
		"worker": func(modeltest.Request) modeltest.Reply { return modeltest.Text("the worker's answer") },
	}))

	// Bob's private agent and a missing one: the same not-found, no run.
	var refusals []string
	for _, target := range []string{bobs, "agt_doesnotexist00000"} {
		run := alice.send(boss, "delegate to "+target)
		alice.waitRun(run.ID, "completed")
		refusals = append(refusals, e.lastToolResult("boss"))
		events := alice.trace(run.ID)
		if !hasEvent(events, "delegation_refused") || hasEvent(events, "delegated") {
			t.Errorf("delegating to %s: trace %v, want delegation_refused and no delegated", target, types(events))
		}
		if tree := alice.tree(run.ID); len(tree) != 1 {
			t.Errorf("delegating to %s: tree has %d runs, want the root alone", target, len(tree))
		}
	}
	if refusals[0] != refusals[1] || !strings.Contains(refusals[0], "not found") {
		t.Errorf("refusals differ or are not not-found:\n%q\n%q", refusals[0], refusals[1])
	}
	if runs := bob.runsOf(bobs); len(runs) != 0 {
		t.Fatalf("Bob's agent has %d runs, want none", len(runs))
	}

	// Bob grants Alice runner and she accepts his agent as a target: the
	// hop works, as Alice.
	bob.grant(bobs, alice.user.ID, "runner")
	alice.accept(bobs)
	run := alice.send(boss, "delegate to "+bobs)
	root := alice.waitRun(run.ID, "completed")
	if got := e.lastToolResult("boss"); !strings.Contains(got, "the worker's answer") || !strings.Contains(got, `"status":"completed"`) {
		t.Errorf("the boss was told %q, want the worker's completed answer", got)
	}
	tree := alice.tree(root.ID)
	if len(tree) != 2 {
		t.Fatalf("tree = %d runs, want root and child", len(tree))
	}
	child := tree[1]
	if child.ParentRunID == nil || *child.ParentRunID != root.ID || child.RootRunID != root.ID || child.Depth != 1 ||
		child.AgentID != bobs || child.TriggeredBy == nil || child.TriggeredBy.ID != alice.user.ID {
		t.Errorf("child = %+v, want Bob's agent at depth 1 under %s, triggered by Alice", child, root.ID)
	}
	if root.RootRunID != root.ID || root.Depth != 0 || root.ParentRunID != nil {
		t.Errorf("root = %+v, want its own root at depth 0 with no parent", root)
	}
	events := alice.trace(root.ID)
	if !hasEvent(events, "delegated") {
		t.Errorf("root's trace %v has no delegated event", types(events))
	}
	verify(t, root.ID, events)

	// Bob revokes: the next hop is refused as if the agent did not exist.
	bob.do("DELETE", "/api/agents/"+bobs+"/grants/"+alice.user.ID, nil).want(http.StatusNoContent)
	before := len(bob.runsOf(bobs))
	run = alice.send(boss, "delegate to "+bobs)
	alice.waitRun(run.ID, "completed")
	if got := e.lastToolResult("boss"); got != refusals[0] {
		t.Errorf("after the revocation the boss was told %q, want %q", got, refusals[0])
	}
	if n := len(bob.runsOf(bobs)); n != before {
		t.Errorf("Bob's agent has %d runs after the revoked hop, want %d", n, before)
	}
	// And a viewer of the root who may not view the child's agent does
	// not see it in the tree.
	carol := e.signup("carol@example.com", "Carol")
	alice.grant(boss, carol.user.ID, "viewer")
	if got := carol.tree(root.ID); len(got) != 1 {
		t.Errorf("Carol sees %d runs of the tree, want the root alone", len(got))
	}
	carol.do("GET", "/api/runs/"+child.ID, nil).want(http.StatusNotFound)
}

func hasEvent(events []api.TraceView, typ string) bool {
	for _, e := range events {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// capOf returns the caps of the tree's delegation_refused events.
func capsOf(events []api.TraceView) map[string]int {
	out := map[string]int{}
	for _, e := range events {
		if e.Type != "delegation_refused" {
			continue
		}
		var d struct {
			Cap string `json:"cap"`
		}
		json.Unmarshal(e.Data, &d)
		out[d.Cap]++
	}
	return out
}

func TestDelegationCaps(t *testing.T) {
	t.Run("depth", func(t *testing.T) {
		e := newEnv(t, envOptions{caps: corral.TreeCaps{Depth: 2}})
		alice := e.signup("alice@example.com", "Alice")
		// A ring of agents, each delegating to the next without end.
		var ring []string
		for i := range 5 {
			ring = append(ring, alice.roleAgent(fmt.Sprintf("r%d", i), fmt.Sprintf("ring%d", i)))
		}
		scripts := map[string]modeltest.Script{}
		for i := range ring {
			next := ring[(i+1)%len(ring)]
			scripts[fmt.Sprintf("ring%d", i)] = func(req modeltest.Request) modeltest.Reply {
				if res := req.LastToolResults(); len(res) > 0 {
					return modeltest.Text("done")
				}
				return modeltest.Calls(delegateCall("d", next, "go on"))
			}
		}
		e.answer(roles(scripts))
		root := alice.send(ring[0], "start")
		alice.waitRun(root.ID, "completed")
		tree := alice.tree(root.ID)
		if len(tree) != 3 {
			t.Fatalf("tree has %d runs, want 3 (depths 0, 1, 2)", len(tree))
		}
		deepest := tree[2]
		if deepest.Depth != 2 {
			t.Fatalf("deepest run at depth %d, want 2", deepest.Depth)
		}
		if c := capsOf(alice.trace(deepest.ID)); c["delegation_depth"] != 1 {
			t.Errorf("deepest run's refusals = %v, want one delegation_depth", c)
		}
		for _, r := range tree {
			if r.Status != "completed" {
				t.Errorf("run %s at depth %d is %s, want completed: a refused hop never fails a run", r.ID, r.Depth, r.Status)
			}
		}
	})

	t.Run("fan out to 1000", func(t *testing.T) {
		e := newEnv(t, envOptions{caps: corral.TreeCaps{Fanout: 4, Concurrency: 4}})
		alice := e.signup("alice@example.com", "Alice")
		boss := alice.roleAgent("boss", "boss")
		var helpers []string
		for i := range 4 {
			helpers = append(helpers, alice.roleAgent(fmt.Sprintf("h%d", i), "helper"))
		}
		e.answer(roles(map[string]modeltest.Script{
			"boss": func(req modeltest.Request) modeltest.Reply {
				if len(req.LastToolResults()) > 0 {
					return modeltest.Text("fanned out")
				}
				var calls []modeltest.ToolCall
				for i := range 1000 {
					calls = append(calls, delegateCall(fmt.Sprintf("c%d", i), helpers[i%4], "part"))
				}
				return modeltest.Calls(calls...)
			},
			"helper": func(modeltest.Request) modeltest.Reply { return modeltest.Text("part done") },
		}))
		root := alice.send(boss, "fan out")
		// The server answers while the tree works.
		alice.do("GET", "/api/agents", nil).want(http.StatusOK)
		alice.waitRun(root.ID, "completed")
		tree := alice.tree(root.ID)
		if len(tree) != 5 {
			t.Errorf("tree has %d runs, want the root and 4 children", len(tree))
		}
		if c := capsOf(alice.trace(root.ID)); c["delegation_fanout"] != 996 {
			t.Errorf("root's refusals = %v, want 996 delegation_fanout", c)
		}
	})

	t.Run("create agents in a loop", func(t *testing.T) {
		e := newEnv(t, envOptions{caps: corral.TreeCaps{Create: 3}})
		alice := e.signup("alice@example.com", "Alice")
		maker := alice.roleAgent("maker", "maker")
		e.answer(roles(map[string]modeltest.Script{
			"maker": func(req modeltest.Request) modeltest.Reply {
				n := 0
				for _, m := range req.Messages {
					n += len(m.ToolCalls)
				}
				if n >= 8 {
					return modeltest.Text("made enough")
				}
				return modeltest.Calls(modeltest.ToolCall{ID: fmt.Sprintf("m%d", n), Name: "create_agent",
					Arguments: string(mustJSON(map[string]string{"name": fmt.Sprintf("made %d", n), "instructions": "help"}))})
			},
		}))
		before := len(listAgents(alice))
		root := alice.send(maker, "make agents")
		alice.waitRun(root.ID, "completed")
		if n := len(listAgents(alice)) - before; n != 3 {
			t.Errorf("the tree made %d agents, want 3", n)
		}
		if c := capsOf(alice.trace(root.ID)); c["delegation_create"] != 5 {
			t.Errorf("refusals = %v, want 5 delegation_create", c)
		}
	})

	t.Run("tree tokens", func(t *testing.T) {
		const cap = 100
		e := newEnv(t, envOptions{caps: corral.TreeCaps{Depth: 20, Tokens: cap}})
		alice := e.signup("alice@example.com", "Alice")
		a, b := alice.roleAgent("a", "ping"), alice.roleAgent("b", "pong")
		loop := func(next string) modeltest.Script {
			return func(req modeltest.Request) modeltest.Reply {
				// Each call costs 15 (the fake's default usage).
				if len(req.LastToolResults()) > 0 {
					return modeltest.Calls(modeltest.ShellCall("s", "true"))
				}
				return modeltest.Calls(delegateCall("d", next, "go on"))
			}
		}
		// a and b delegate to each other: the busy rule refuses a hop back
		// to an agent already running, so each turn also runs a command
		// and delegates again, spending tokens until the tree's are gone.
		e.answer(roles(map[string]modeltest.Script{"ping": loop(b), "pong": loop(a)}))
		root := alice.send(a, "go")
		alice.waitRun(root.ID, "errored")
		var total int64
		for _, r := range alice.tree(root.ID) {
			if corral.RunActive(corral.RunStatus(r.Status)) {
				t.Errorf("run %s still %s", r.ID, r.Status)
			}
			total += r.Tokens.Input + r.Tokens.Output
		}
		one := int64(modeltest.DefaultInputTokens + modeltest.DefaultOutputTokens)
		if total < cap || total > cap+one {
			t.Errorf("the tree used %d tokens, want at least the cap %d and at most one call (%d) more", total, cap, one)
		}
		if got := alice.run(root.ID); !strings.Contains(got.Reason, "token cap") {
			t.Errorf("root ended %q, want the tree's token cap named", got.Reason)
		}
	})
}

func listAgents(c *client) []api.AgentView {
	var l api.List[api.AgentView]
	c.do("GET", "/api/agents", nil).want(http.StatusOK).decode(&l)
	return l.Items
}

func TestDelegationStopAndKill(t *testing.T) {
	for _, tc := range []struct {
		name, action, want string
	}{
		{"stop", "stop", "cancelled"},
		{"kill", "kill", "killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			alice := e.signup("alice@example.com", "Alice")
			boss := alice.roleAgent("boss", "boss")
			mid := alice.roleAgent("mid", "mid")
			leaf := alice.roleAgent("leaf", "leaf")
			marker := "sleep 600 # " + tc.name + "-leaf"
			e.answer(roles(map[string]modeltest.Script{
				"boss": func(req modeltest.Request) modeltest.Reply {
					if len(req.LastToolResults()) > 0 {
						return modeltest.Text("boss done")
					}
					return modeltest.Calls(delegateCall("d", mid, "go"))
				},
				"mid": func(req modeltest.Request) modeltest.Reply {
					if len(req.LastToolResults()) > 0 {
						return modeltest.Text("mid done")
					}
					return modeltest.Calls(delegateCall("d", leaf, "go"))
				},
				"leaf": func(req modeltest.Request) modeltest.Reply {
					if len(req.LastToolResults()) > 0 {
						return modeltest.Text("leaf done")
					}
					return modeltest.Calls(modeltest.ShellCall("s", marker))
				},
			}))
			root := alice.send(boss, "go")
			waitFor(t, "the leaf's command", func() bool { return len(processesWith(marker)) > 0 })
			alice.do("POST", "/api/runs/"+root.ID+"/"+tc.action, nil).want(http.StatusAccepted)
			alice.waitRun(root.ID, tc.want)
			for _, r := range alice.tree(root.ID) {
				got := alice.waitRun(r.ID, "cancelled", "killed", "completed", "errored")
				if got.Status != tc.want {
					t.Errorf("run at depth %d ended %s (%s), want %s", r.Depth, got.Status, got.Reason, tc.want)
				}
			}
			if p := processesWith(marker); len(p) != 0 {
				t.Errorf("the leaf's command still runs: %v", p)
			}
		})
	}
}

func TestDelegationPausedChild(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice := e.signup("alice@example.com", "Alice")
	boss := alice.roleAgent("boss", "boss")
	worker := alice.roleAgent("worker", "worker")
	// The worker's first call spends 30,000: what is left of its 50,000
	// cannot hold the next one's ceiling (see costly).
	alice.do("PATCH", "/api/agents/"+worker, map[string]any{"budget": map[string]int{"tokens": 50_000}}).want(http.StatusOK)
	e.answer(roles(map[string]modeltest.Script{
		"boss": delegator,
		"worker": func(req modeltest.Request) modeltest.Reply {
			if len(req.LastToolResults()) > 0 {
				return modeltest.Text("worked after the raise")
			}
			return costly(modeltest.Calls(modeltest.ShellCall("s", "echo step")))
		},
	}))
	root := alice.send(boss, "delegate to "+worker)
	alice.waitRun(root.ID, "paused")
	tree := alice.tree(root.ID)
	if len(tree) != 2 {
		t.Fatalf("tree = %d runs, want 2", len(tree))
	}
	child := alice.waitRun(tree[1].ID, "paused")
	if got := alice.run(root.ID); !strings.Contains(got.Reason, child.ID) {
		t.Errorf("the paused root says %q, want the paused child named", got.Reason)
	}
	var boss0 api.AgentView
	alice.do("GET", "/api/agents/"+boss, nil).want(http.StatusOK).decode(&boss0)
	if boss0.State != "active" {
		t.Errorf("the boss agent is %s, want active: its budget is not spent", boss0.State)
	}
	// The raise resumes both.
	alice.do("PATCH", "/api/agents/"+worker, map[string]any{"budget": map[string]int{"tokens": 1_000_000}}).want(http.StatusOK)
	alice.waitRun(child.ID, "completed")
	alice.waitRun(root.ID, "completed")
	if got := e.lastToolResult("boss"); !strings.Contains(got, "worked after the raise") {
		t.Errorf("the boss was told %q, want the worker's answer", got)
	}
}

func TestDelegationRevokedMidTree(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice, bob := e.signup("alice@example.com", "Alice"), e.signup("bob@example.com", "Bob")
	boss := alice.roleAgent("boss", "boss")
	bobs := bob.roleAgent("bob's", "worker")
	bob.grant(bobs, alice.user.ID, "runner")
	alice.accept(bobs)
	// The worker works without end: only its person's access ends it
	// (or its 50 turns, which would end it errored).
	e.answer(roles(map[string]modeltest.Script{
		"boss": delegator,
		"worker": func(req modeltest.Request) modeltest.Reply {
			return modeltest.Calls(modeltest.ShellCall("s", "echo working"))
		},
	}))
	root := alice.send(boss, "delegate to "+bobs)
	var child api.RunView
	waitFor(t, "the worker's first command", func() bool {
		tree := alice.tree(root.ID)
		if len(tree) < 2 {
			return false
		}
		child = tree[1]
		return hasEvent(bob.trace(child.ID), "tool_result")
	})
	bob.do("DELETE", "/api/agents/"+bobs+"/grants/"+alice.user.ID, nil).want(http.StatusNoContent)
	got := bob.waitRun(child.ID, "cancelled")
	if !strings.Contains(got.Reason, "may no longer run") {
		t.Errorf("the child ended %q, want the revocation named", got.Reason)
	}
	alice.waitRun(root.ID, "completed")
	if r := e.lastToolResult("boss"); !strings.Contains(r, `"status":"cancelled"`) {
		t.Errorf("the boss was told %q, want the child's cancelled end", r)
	}
}

func TestCreatedAgentNeverWider(t *testing.T) {
	e := newEnv(t, envOptions{caps: corral.TreeCaps{Create: 100000}})
	alice := e.signup("alice@example.com", "Alice")
	ctx := context.Background()
	parentID := alice.roleAgent("parent", "parent")
	root := e.completedRun(t, alice, parentID)

	rng := rand.New(rand.NewSource(14))
	pick := func(vals ...int64) int64 { return vals[rng.Intn(len(vals))] }
	fsOf := []string{"", corral.FSReadOnly, corral.FSReadWrite}
	created := 0
	for i := range 400 {
		// A random parent policy...
		pfs := fsOf[1+rng.Intn(2)]
		limits := map[string]any{
			"run_timeout_s": pick(0, 60, 600), "memory_bytes": pick(0, 64<<20, 512<<20),
			"pids": pick(0, 16, 64), "cpu_millis": pick(0, 1000, 9000), "output_bytes": pick(0, 4096, 1<<20), "max_runs": pick(0, 1, 10),
		}
		budget := pick(0, 100, 5000)
		library := rng.Intn(2) == 0
		network := []string{corral.NetworkNone, corral.NetworkAllowlist}[rng.Intn(2)]
		egressOf := []map[string]any{{}, {"presets": []string{"npm"}}, {"allow": []map[string]any{{"host": "*.example.com", "methods": []string{"GET"}}}}}
		alice.do("PATCH", "/api/agents/"+parentID, map[string]any{
			"policy": map[string]any{"fs": pfs, "protected": []string{"ci/**"}, "exclude": []string{"keys/**"}, "library": library,
				"network": network, "egress": egressOf[rng.Intn(len(egressOf))]},
			"limits": limits, "budget": map[string]int64{"tokens": budget},
		}).want(http.StatusOK)
		p, err := e.db.Agent(ctx, parentID, "")
		if err != nil {
			t.Fatal(err)
		}
		// ...and a random request.
		// (one limit at a time, or none, so that enough are made to check)
		spec := corral.AgentSpec{Name: fmt.Sprintf("made %d", i), Instructions: "x", FS: fsOf[rng.Intn(3)],
			BudgetTokens: pick(0, 0, 50, 100000)}
		switch rng.Intn(8) {
		case 0:
			spec.Limits.RunTimeoutS = pick(30, 600, 6000)
		case 1:
			spec.Limits.MemoryBytes = pick(32<<20, 1<<30)
		case 2:
			spec.Limits.Pids = pick(8, 64, 1000)
		case 3:
			spec.Limits.CPUMillis = pick(500, 20000)
		case 4:
			spec.Limits.OutputBytes = pick(1024, 1<<30)
		case 5:
			spec.Limits.MaxRuns = pick(1, 100)
		}
		a, err := e.deleg.CreateAgent(ctx, root, spec)
		if err != nil {
			continue // refused: nothing made
		}
		created++
		if narrowerErr := checkNarrower(p, a); narrowerErr != "" {
			t.Fatalf("case %d: parent %+v, asked %+v: created %+v: %s", i, p, spec, a, narrowerErr)
		}
		// Its budget was carved out of the parent's remainder.
		after, err := e.db.Agent(ctx, parentID, "")
		if err != nil {
			t.Fatal(err)
		}
		if carved := after.Budget.Used - p.Budget.Used; p.Budget.Tokens > 0 && carved != a.Budget.Tokens || p.Budget.Tokens == 0 && carved != 0 {
			t.Fatalf("case %d: parent %+v gave %d tokens and its used grew by %d", i, p.Budget, a.Budget.Tokens, carved)
		}
	}
	if created < 40 {
		t.Errorf("only %d of 400 random requests made an agent: the test checks too little", created)
	}
}

// TestCreatedAgentEgressStaysWithinParent: an agent a run created keeps
// its parent's network; an edit may narrow it, never widen it past the
// parent's, and the parent's own narrowing bounds the next edit.
func TestCreatedAgentEgressStaysWithinParent(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice := e.signup("alice@example.com", "Alice")
	ctx := context.Background()
	parentID := alice.roleAgent("parent", "parent")
	alice.do("PATCH", "/api/agents/"+parentID, map[string]any{"policy": map[string]any{"network": "allowlist",
		"egress": map[string]any{"presets": []string{"npm"}, "allow": []map[string]any{{"host": "*.example.com"}}}}}).want(http.StatusOK)
	root := e.completedRun(t, alice, parentID)
	child, err := e.deleg.CreateAgent(ctx, root, corral.AgentSpec{Name: "made", Instructions: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if child.Policy.Network != corral.NetworkAllowlist || len(child.Policy.Egress.Presets) != 1 || len(child.Policy.Egress.Allow) != 1 {
		t.Fatalf("the created agent's network = %s %+v, want its parent's", child.Policy.Network, child.Policy.Egress)
	}
	path := "/api/agents/" + child.ID
	for _, c := range []struct {
		name   string
		egress map[string]any
		status int
	}{
		{"another host", map[string]any{"allow": []map[string]any{{"host": "evil.example.org"}}}, http.StatusForbidden},
		{"another preset", map[string]any{"presets": []string{"pypi"}}, http.StatusForbidden},
		{"another port", map[string]any{"allow": []map[string]any{{"host": "a.example.com", "ports": []int{22}}}}, http.StatusForbidden},
		{"one host under the parent's suffix", map[string]any{"allow": []map[string]any{{"host": "a.example.com", "methods": []string{"GET"}}}}, http.StatusOK},
		{"nothing", map[string]any{}, http.StatusOK},
	} {
		if got := alice.do("PATCH", path, map[string]any{"policy": map[string]any{"egress": c.egress}}); got.status != c.status {
			t.Errorf("%s: PATCH = %d %s, want %d", c.name, got.status, got.body, c.status)
		}
	}
	// The parent's network off: the child may not turn its own on.
	alice.do("PATCH", "/api/agents/"+parentID, map[string]any{"policy": map[string]any{"network": "none"}}).want(http.StatusOK)
	alice.do("PATCH", path, map[string]any{"policy": map[string]any{"network": "none"}}).want(http.StatusOK)
	alice.do("PATCH", path, map[string]any{"policy": map[string]any{"network": "allowlist"}}).want(http.StatusForbidden)
}

// completedRun is a finished run of the agent with the role parent, as the
// store has it: a root that create_agent can be called from.
func (e *env) completedRun(t *testing.T, c *client, agentID string) corral.Run {
	t.Helper()
	e.answer(roles(map[string]modeltest.Script{"parent": func(modeltest.Request) modeltest.Reply { return modeltest.Text("ok") }}))
	run := c.send(agentID, "hello")
	c.waitRun(run.ID, "completed")
	root, err := e.db.Run(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// checkNarrower says how child is wider than parent, "" when it is not.
func checkNarrower(p, c corral.Agent) string {
	switch {
	case p.Policy.FS == corral.FSReadOnly && c.Policy.FS != corral.FSReadOnly:
		return "fs wider"
	case c.Policy.Network != p.Policy.Network:
		return "network differs"
	case !reflect.DeepEqual(c.Policy.Egress, p.Policy.Egress):
		return "egress not the parent's"
	case c.Policy.Library != p.Policy.Library:
		return "library not the parent's"
	case c.Policy.Changes != corral.ChangesReview:
		return "changes not reviewed"
	case strings.Join(c.Policy.Protected, ",") != strings.Join(p.Policy.Protected, ",") ||
		strings.Join(c.Policy.Secrets, ",") != strings.Join(p.Policy.Secrets, ",") ||
		strings.Join(c.Policy.Risky, ",") != strings.Join(p.Policy.Risky, ","):
		return "globs differ"
	case c.Driver != "":
		return "not the built-in loop"
	case p.Budget.Tokens > 0 && (c.Budget.Tokens <= 0 || c.Budget.Tokens > p.Budget.Left()):
		return "budget wider"
	}
	for _, l := range []struct {
		name string
		p, c int64
	}{
		{"run_timeout_s", p.Limits.RunTimeoutS, c.Limits.RunTimeoutS}, {"memory_bytes", p.Limits.MemoryBytes, c.Limits.MemoryBytes},
		{"pids", p.Limits.Pids, c.Limits.Pids}, {"cpu_millis", p.Limits.CPUMillis, c.Limits.CPUMillis},
		{"output_bytes", p.Limits.OutputBytes, c.Limits.OutputBytes}, {"max_runs", p.Limits.MaxRuns, c.Limits.MaxRuns},
		{"disk_bytes", p.Limits.DiskBytes, c.Limits.DiskBytes}, {"max_prompt_bytes", p.Limits.MaxPromptBytes, c.Limits.MaxPromptBytes},
	} {
		// 0 is the server's default: a child may have it only where the
		// parent does, and a number only at most the parent's.
		if (l.p == 0 && l.c != 0) || (l.p != 0 && (l.c == 0 || l.c > l.p)) {
			return fmt.Sprintf("limits.%s %d against the parent's %d", l.name, l.c, l.p)
		}
	}
	return ""
}

func TestDelegationTreeReattached(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice := e.signup("alice@example.com", "Alice")
	boss := alice.roleAgent("boss", "boss")
	leaf := alice.roleAgent("leaf", "leaf")
	const wait = "while [ ! -e go ]; do sleep 0.05; done; echo released"
	e.answer(roles(map[string]modeltest.Script{
		"boss": delegator,
		"leaf": func(req modeltest.Request) modeltest.Reply {
			if len(req.LastToolResults()) > 0 {
				return modeltest.Text("the leaf was released")
			}
			return modeltest.Calls(modeltest.ShellCall("s", wait))
		},
	}))
	root := alice.send(boss, "delegate to "+leaf)
	waitFor(t, "the leaf's command", func() bool { return len(processesWith("while [ ! -e go ]")) > 0 })
	tree := alice.tree(root.ID)
	if len(tree) != 2 {
		t.Fatalf("tree = %d runs, want 2", len(tree))
	}

	// The server stops; both sessions go on.
	if n, back := e.restart(); n != 0 || back != 2 {
		t.Fatalf("the restart reconciled %d runs and re-attached %d; want the whole tree (2) re-attached", n, back)
	}
	stored, err := e.db.Run(context.Background(), tree[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dataDir, "stages", stored.StageID, "tree", "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	alice.waitRun(tree[1].ID, "completed")
	alice.waitRun(root.ID, "completed")
	if got := e.lastToolResult("boss"); !strings.Contains(got, "the leaf was released") {
		t.Errorf("the boss was told %q, want the leaf's answer", got)
	}
	if n := len(alice.tree(root.ID)); n != 2 {
		t.Errorf("after the restart the tree has %d runs, want still 2 (the call found its child again)", n)
	}
}

func TestDelegationPausedChainResumesWhole(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice := e.signup("alice@example.com", "Alice")
	boss := alice.roleAgent("boss", "boss")
	mid := alice.roleAgent("mid", "mid")
	worker := alice.roleAgent("worker", "worker")
	alice.do("PATCH", "/api/agents/"+worker, map[string]any{"budget": map[string]int{"tokens": 50_000}}).want(http.StatusOK)
	const wait = "while [ ! -e go ]; do sleep 0.05; done"
	e.answer(roles(map[string]modeltest.Script{
		"boss": delegator,
		"mid": func(req modeltest.Request) modeltest.Reply {
			if len(req.LastToolResults()) > 0 {
				return modeltest.Text("mid done")
			}
			return modeltest.Calls(delegateCall("d", worker, "work"))
		},
		"worker": func(req modeltest.Request) modeltest.Reply {
			if res := req.LastToolResults(); len(res) > 0 && strings.Contains(res[0].Content, "released") {
				return modeltest.Text("worker done")
			}
			if len(req.LastToolResults()) > 0 {
				return modeltest.Calls(modeltest.ShellCall("w", wait+"; echo released"))
			}
			return costly(modeltest.Calls(modeltest.ShellCall("s", "echo step")))
		},
	}))
	root := alice.send(boss, "delegate to "+mid)
	alice.waitRun(root.ID, "paused")
	tree := alice.tree(root.ID)
	if len(tree) != 3 {
		t.Fatalf("tree = %d runs, want 3", len(tree))
	}
	for _, r := range tree {
		alice.waitRun(r.ID, "paused")
	}
	// The raise resumes the worker, and with it every run above it, while
	// the worker is still at work.
	alice.do("PATCH", "/api/agents/"+worker, map[string]any{"budget": map[string]int{"tokens": 1_000_000}}).want(http.StatusOK)
	waitFor(t, "the worker's second command", func() bool { return len(processesWith("while [ ! -e go ]")) > 0 })
	alice.waitRun(tree[1].ID, "running")
	alice.waitRun(root.ID, "running")
	stored, err := e.db.Run(context.Background(), tree[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dataDir, "stages", stored.StageID, "tree", "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, r := range tree {
		alice.waitRun(r.ID, "completed")
	}
}
