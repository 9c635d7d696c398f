package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"corral"
	"corral/internal/api"
	"corral/internal/modeltest"
)

// burstBody is one of the model calls the burst sends, its output cap
// within the gateway's so that it goes as it is: its ceiling is its bytes
// plus the cap.
const burstBody = `{"model":"m","max_tokens":1000000,"messages":[{"role":"user","content":"burst"}]}`

// waitThenBurst is the command the scripted model asks for: it waits
// for the test to write burst.sh and a file named go.
const waitThenBurst = `while [ ! -e go ]; do sleep 0.05; done; bash burst.sh`

// burstScript takes the run's gateway token from a process of the run (as
// an attacker inside it would), fires 100 model calls at the gateway at
// once, with bash alone, and prints how many were answered 200.
const burstScript = `tok=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -o 'crt_[A-Za-z0-9_-]*' | head -1)
body='` + burstBody + `'
call() {
	exec 3<>/dev/tcp/127.0.0.1/41300 || return
	printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' "$tok" ${#body} "$body" >&3
	head -1 <&3 > status.$1
}
for i in $(seq 100); do call $i & done
wait
echo "answered=$(cat status.* | grep -c ' 200 ')"
rm -f status.* go burst.sh
`

// TestBudgetHoldsUnderABurst: from inside a run of a real agent CLI, 100
// model calls at once on a budget that holds 10 of them: 10 reach the
// provider, the other 90 are refused with the protocol's quota error,
// what is spent never passes the budget, nothing stays reserved; the
// CLI's next call does not fit and the run pauses; raising the budget
// resumes it.
func TestBudgetHoldsUnderABurst(t *testing.T) {
	needTools(t, corral.DriverCodex)
	const maxOutput = 1_000_000
	e := newEnv(t, envOptions{maxOutput: maxOutput})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("bursty")
	// The burst runs 100 subshells at once, each with a child, beside
	// the CLI: room for them all, so that the pids limit (128 by default)
	// never ends the run before the budget is tested, however slowly
	// they finish on a loaded machine.
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": corral.DriverCodex, "budget": map[string]int{"tokens": 100_000_000},
		"limits": map[string]int{"pids": 1024}}).want(http.StatusOK)
	// The provider holds the burst's answers until an 11th call reaches
	// it (which the budget must prevent), or for a few seconds, so that
	// all 100 are in flight at once rather than one after the other.
	var bursts atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	e.answer(func(r modeltest.Request) modeltest.Reply {
		switch last := r.Last().Content; {
		case last == "burst":
			switch bursts.Add(1) {
			case 1:
				time.AfterFunc(5*time.Second, open)
			case 11:
				open()
			}
			// Each answer spends all but its request's bytes of its
			// ceiling: what 10 leave cannot hold an 11th.
			return modeltest.Reply{Content: "ok", Usage: &modeltest.Usage{Input: 100, Output: maxOutput}, Block: release}
		case len(r.LastToolResults()) > 0 || strings.Contains(last, "resumed"):
			return modeltest.Text(cliFinal)
		}
		args := fmt.Sprintf(`{"cmd":%q}`, waitThenBurst)
		return modeltest.Calls(modeltest.ToolCall{ID: "call_1", Name: "exec_command", Arguments: args})
	})
	run := owner.send(id, "Spend it all.")
	waitFor(t, "the burst's command", func() bool { return len(processesWith("while [ ! -e go ]")) > 0 })

	// The CLI's first call is settled; the budget now holds 10 calls of
	// the burst and not 11.
	ctx := context.Background()
	a, err := e.db.Agent(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	ceiling := int64(len(burstBody)) + maxOutput
	budget := a.Budget.Used + 10*ceiling
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int64{"tokens": budget}}).want(http.StatusOK)
	stored, err := e.db.Run(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(e.dataDir, "stages", stored.StageID, "tree")
	if err := os.WriteFile(filepath.Join(tree, "burst.sh"), []byte(burstScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	paused := owner.waitRun(run.ID, "paused", "completed", "errored")
	events := owner.trace(run.ID)
	if paused.Status != "paused" {
		t.Fatalf("run = %s (%s), want paused: the CLI's next call does not fit\ntrace: %s", paused.Status, paused.Reason, brief(events))
	}
	var agent api.AgentView
	owner.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&agent)
	if agent.Budget.Used > agent.Budget.Tokens || agent.Budget.Reserved != 0 {
		t.Fatalf("budget %+v: spent past it", agent.Budget)
	}
	if n := bursts.Load(); n != 10 {
		t.Fatalf("%d of the burst's 100 calls reached the provider, want the 10 the budget holds", n)
	}
	if got := lastToolOutput(events); !strings.Contains(got, "answered=10") {
		t.Fatalf("the burst saw %q, want 10 calls answered 200", got)
	}
	if !strings.Contains(paused.Reason, "cannot hold the next model call") {
		t.Errorf("the paused run says %q, want why", paused.Reason)
	}

	owner.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int64{"tokens": budget + 100_000_000}}).want(http.StatusOK)
	done := owner.waitRun(run.ID, "completed", "errored", "paused")
	if done.Status != "completed" {
		t.Fatalf("after the raise: %s (%s)\ntrace: %s", done.Status, done.Reason, brief(owner.trace(run.ID)))
	}
	verify(t, run.ID, owner.trace(run.ID))
}

// lastToolOutput is the output of the last tool call the trace holds.
func lastToolOutput(events []api.TraceView) string {
	out := ""
	for _, ev := range events {
		if ev.Type == "tool_result" {
			b, _ := json.Marshal(ev.Data)
			out = string(b)
		}
	}
	return out
}

// TestCreatedAgentsCarveTheBudget: the attack as it was written: an agent
// with a budget creates three agents with budgets just under its own
// (4,960, 4,920 and 4,880 of 5,000, here a hundred times that). The first
// is carved out of its remainder; the other two are refused, as more than
// it has left; and the parent, whose remainder the carve took, pauses at
// its next call instead of spending beside its child.
func TestCreatedAgentsCarveTheBudget(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{maxOutput: 1000})
	alice := e.signup("alice@example.com", "Alice")
	boss := alice.roleAgent("boss", "boss")
	alice.do("PATCH", "/api/agents/"+boss, map[string]any{"budget": map[string]int{"tokens": 500_000}}).want(http.StatusOK)
	create := func(id string, budget int) modeltest.ToolCall {
		return modeltest.ToolCall{ID: id, Name: "create_agent", Arguments: string(mustJSON(map[string]any{
			"name": "worker " + id, "instructions": "ROLE:worker", "policy": map[string]any{"budget_tokens": budget},
		}))}
	}
	e.answer(roles(map[string]modeltest.Script{
		"boss": func(req modeltest.Request) modeltest.Reply {
			if len(req.LastToolResults()) > 0 {
				return modeltest.Text("made them")
			}
			return modeltest.Calls(create("c1", 496_000), create("c2", 492_000), create("c3", 488_000))
		},
	}))
	root := alice.send(boss, "make workers")
	paused := alice.waitRun(root.ID, "paused", "completed", "errored")
	if paused.Status != "paused" {
		t.Fatalf("the boss's run = %s (%s), want paused: the carve left it too little for its next call", paused.Status, paused.Reason)
	}
	results := map[string]string{}
	for _, ev := range alice.trace(root.ID) {
		if ev.Type == "tool_result" {
			var d struct {
				ID     string `json:"id"`
				Error  string `json:"error"`
				Output string `json:"output"`
			}
			json.Unmarshal(ev.Data, &d)
			results[d.ID] = d.Error + d.Output
		}
	}
	if strings.Contains(results["c1"], "above what") || !strings.Contains(results["c2"], "above what this agent has left") || !strings.Contains(results["c3"], "above what this agent has left") {
		t.Fatalf("create_agent results = %v, want the first made and the others refused", results)
	}
	var made []corral.Agent
	for _, a := range listAgents(alice) {
		if strings.HasPrefix(a.Name, "worker") {
			full, err := e.db.Agent(context.Background(), a.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			made = append(made, full)
		}
	}
	b, err := e.db.Agent(context.Background(), boss, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(made) != 1 || made[0].Budget.Tokens != 496_000 {
		t.Fatalf("made %+v, want one worker with 496,000", made)
	}
	// The boss's used holds the carve and its one call: the tree's
	// budgets together are the boss's, not three times it.
	if b.Budget.Used != 496_000+int64(paused.Tokens.Input+paused.Tokens.Output) || b.Budget.Used > b.Budget.Tokens {
		t.Fatalf("the boss's budget = %+v after spending %+v, want the carve in it", b.Budget, paused.Tokens)
	}
}

// TestImpossibleUsageIsMeteredAtTheCeiling: a provider that reports
// negative usage, or more than a call could be (9.2e18), neither leaves
// the call unmetered nor fails it: the call is metered at the ceiling it
// reserved, on the built-in loop and through a CLI's pass-through alike,
// and the trace says what the provider claimed.
func TestImpossibleUsageIsMeteredAtTheCeiling(t *testing.T) {
	for _, usage := range []modeltest.Usage{{Input: -40, Output: 5}, {Input: 9_200_000_000_000_000_000, Output: 1}} {
		for _, driver := range []string{corral.DriverBuiltin, corral.DriverCodex} {
			t.Run(fmt.Sprintf("%s/%d", driver, usage.Input), func(t *testing.T) {
				if driver == corral.DriverBuiltin {
					needSandbox(t)
				} else {
					needTools(t, driver)
				}
				e := newEnv(t, envOptions{native: true})
				owner := e.signup("owner@example.com", "Owner")
				id := owner.createAgent("liar")
				owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": driver, "budget": map[string]int{"tokens": 100_000_000}}).want(http.StatusOK)
				e.answer(func(r modeltest.Request) modeltest.Reply {
					reply := modeltest.Text(cliFinal)
					reply.Usage = &usage
					return reply
				})
				run := owner.send(id, "Say something.")
				done := owner.waitRun(run.ID, "completed", "errored", "paused")
				events := owner.trace(run.ID)
				if done.Status != "completed" {
					t.Fatalf("run = %s (%s)\ntrace: %s", done.Status, done.Reason, brief(events))
				}
				var ceilings int64
				for _, ev := range events {
					if ev.Type != "usage" {
						continue
					}
					var raw map[string]any
					json.Unmarshal(ev.Data, &raw)
					c, _ := raw["metered_at_ceiling"].(float64)
					if c <= 0 || int64(raw["input"].(float64)) != int64(c) || raw["output"].(float64) != 0 {
						t.Fatalf("usage event %v, want the call metered at its ceiling", raw)
					}
					ceilings += int64(c)
				}
				if ceilings == 0 || done.Tokens.Input+done.Tokens.Output != ceilings {
					t.Fatalf("run tokens %+v, ceilings metered %d", done.Tokens, ceilings)
				}
				var agent api.AgentView
				owner.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&agent)
				if agent.Budget.Used != ceilings || agent.Budget.Reserved != 0 {
					t.Fatalf("budget %+v, want %d used", agent.Budget, ceilings)
				}
			})
		}
	}
}

// TestTreeSpendsWithinTheRootBudget: a boss creates two workers, each
// budget carved out of its own, and delegates to both at once: the two
// runs call the model side by side until each worker's budget cannot hold
// another call. No worker spends past its budget, and the whole tree
// (the boss's calls, the workers' calls) spends no more than the boss was
// given.
func TestTreeSpendsWithinTheRootBudget(t *testing.T) {
	needSandbox(t)
	const given = 100_000
	e := newEnv(t, envOptions{maxOutput: 1000})
	alice := e.signup("alice@example.com", "Alice")
	boss := alice.roleAgent("boss", "boss")
	alice.do("PATCH", "/api/agents/"+boss, map[string]any{"budget": map[string]int{"tokens": given}}).want(http.StatusOK)
	made := regexp.MustCompile(`"id":"(agt_\w+)"`)
	e.answer(roles(map[string]modeltest.Script{
		"boss": func(req modeltest.Request) modeltest.Reply {
			var ids []string
			for _, m := range req.Messages {
				if m.Role == "tool" {
					if id := made.FindStringSubmatch(m.Content); id != nil {
						ids = append(ids, id[1])
					}
				}
			}
			switch {
			case len(ids) == 0:
				return modeltest.Calls(
					modeltest.ToolCall{ID: "c1", Name: "create_agent", Arguments: string(mustJSON(map[string]any{"name": "w1", "instructions": "ROLE:worker", "policy": map[string]any{"budget_tokens": 30_000}}))},
					modeltest.ToolCall{ID: "c2", Name: "create_agent", Arguments: string(mustJSON(map[string]any{"name": "w2", "instructions": "ROLE:worker", "policy": map[string]any{"budget_tokens": 30_000}}))})
			case req.Last().Role == "tool" && strings.HasPrefix(req.Last().ToolCallID, "c"):
				return modeltest.Calls(delegateCall("d1", ids[0], "spend"), delegateCall("d2", ids[1], "spend"))
			}
			return modeltest.Text("done")
		},
		// Every call spends what it reserved: the workers go on until
		// their budgets cannot hold one more.
		"worker": func(req modeltest.Request) modeltest.Reply {
			return costly(modeltest.Calls(modeltest.ShellCall("s", "true")))
		},
	}))
	root := alice.send(boss, "make two workers and have them spend")
	alice.waitRun(root.ID, "paused", "completed", "errored")
	tree := alice.tree(root.ID)
	if len(tree) != 3 {
		t.Fatalf("tree = %d runs, want the boss and two workers", len(tree))
	}
	var spent int64
	for _, r := range tree {
		r = alice.waitRun(r.ID, "paused", "completed", "errored")
		spent += r.Tokens.Input + r.Tokens.Output
		a, err := e.db.Agent(context.Background(), r.AgentID, "")
		if err != nil {
			t.Fatal(err)
		}
		if a.Budget.Used > a.Budget.Tokens || a.Budget.Reserved != 0 {
			t.Fatalf("agent %s (%s): budget %+v: spent past it", a.Name, r.Status, a.Budget)
		}
		if r.Depth > 0 && r.Status != "paused" {
			t.Errorf("worker run %s, want paused at its budget", r.Status)
		}
	}
	if spent > given || spent < 30_000 {
		t.Fatalf("the tree spent %d of the %d given to its root", spent, given)
	}
}
