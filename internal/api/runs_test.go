package api_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/api"
	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/poll"
	"corral/internal/sandbox"
	"corral/internal/service"
	"corral/internal/trace"
)

// needSandbox skips a test that runs agents where the sandbox cannot work
// (CI runs as root, where it can).
func needSandbox(t *testing.T) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
}

// patience bounds how long a test waits for a run to reach a state. It is
// a liveness bound, not a timing assertion: runs take milliseconds here.
const patience = 2 * time.Minute

// waitFor polls cond until it holds, and fails the test once patience has
// passed without it (poll.Within, under the name this package's tests use).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Within(t, patience, what, cond)
}

// send posts a message and returns the admitted run.
func (c *client) send(agentID, content string) api.RunView {
	c.e.t.Helper()
	var got api.PostedMessage
	c.do("POST", "/api/agents/"+agentID+"/messages", map[string]string{"content": content}).want(http.StatusAccepted).decode(&got)
	if got.Run.ID == "" || got.Run.Status != "admitted" || got.Message.RunID == nil || *got.Message.RunID != got.Run.ID {
		c.e.t.Fatalf("posted message answered %+v, want an admitted run linked to the message", got)
	}
	return got.Run
}

// run reads a run.
func (c *client) run(id string) api.RunView {
	c.e.t.Helper()
	var r api.RunView
	c.do("GET", "/api/runs/"+id, nil).want(http.StatusOK).decode(&r)
	return r
}

// waitRun waits until the run's status is one of statuses.
func (c *client) waitRun(id string, statuses ...string) api.RunView {
	c.e.t.Helper()
	var r api.RunView
	if !poll.Eventually(patience, func() bool { r = c.run(id); return slices.Contains(statuses, r.Status) }) {
		c.e.t.Fatalf("run %s is %s (%s), want one of %v", id, r.Status, r.Reason, statuses)
	}
	return r
}

// waitTrace waits until the run's trace holds an event of type typ and
// returns the trace.
func (c *client) waitTrace(id, typ string) []api.TraceView {
	c.e.t.Helper()
	var events []api.TraceView
	has := func() bool {
		events = c.trace(id)
		return slices.ContainsFunc(events, func(e api.TraceView) bool { return e.Type == typ })
	}
	if !poll.Eventually(patience, has) {
		c.e.t.Fatalf("run %s: no %s event in %d events", id, typ, len(events))
	}
	return events
}

func (c *client) trace(id string) []api.TraceView {
	c.e.t.Helper()
	var l api.List[api.TraceView]
	c.do("GET", "/api/runs/"+id+"/trace", nil).want(http.StatusOK).decode(&l)
	return l.Items
}

// verify checks a trace as any viewer can: with trace.Verify over what the
// API answered.
func verify(t *testing.T, runID string, events []api.TraceView) {
	t.Helper()
	evs := make([]trace.Event, len(events))
	for i, e := range events {
		at, err := time.Parse(time.RFC3339Nano, e.At)
		if err != nil {
			t.Fatal(err)
		}
		evs[i] = trace.Event{RunID: runID, Seq: e.Seq, At: at, Type: e.Type, Data: e.Data, PrevHash: e.PrevHash, Hash: e.Hash}
	}
	if err := trace.Verify(evs); err != nil {
		t.Fatalf("trace of %s does not verify: %v", runID, err)
	}
}

func types(events []api.TraceView) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

// toolResults returns the tool results the model was given, in order.
func (e *env) toolResults() []string {
	var out []string
	reqs := e.model.Requests()
	if len(reqs) == 0 {
		return nil
	}
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestRunWritesFilesIntoAChangeSet(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("builder")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"instructions": "Write tidy code."}).want(http.StatusOK)
	owner.do("PUT", "/api/agents/"+id+"/files?path=old.txt", "old\n").want(http.StatusOK)
	e.answer(modeltest.Sequence(
		modeltest.Calls(
			modeltest.WriteCall("c1", "hello.txt", "hello\n"),
			modeltest.ShellCall("c2", "mkdir -p src && printf 'package main\\n' > src/main.go && rm old.txt && echo made"),
			modeltest.ListCall("c3", "."),
			modeltest.ReadCall("c4", "hello.txt"),
		),
		modeltest.Text("Done: hello.txt and src/main.go."),
	))

	run := owner.send(id, "create the files")
	done := owner.waitRun(run.ID, "completed", "errored")
	if done.Status != "completed" || done.ChangeSetID == nil || done.Violation != nil {
		t.Fatalf("run = %+v, want completed with a change set", done)
	}
	// Two model calls at the fake's default usage, counted from the
	// provider's figures on the run and the agent.
	if done.Tokens != (api.TokensView{Input: 2 * modeltest.DefaultInputTokens, Output: 2 * modeltest.DefaultOutputTokens}) {
		t.Fatalf("tokens = %+v", done.Tokens)
	}
	var agent api.AgentView
	owner.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&agent)
	if agent.Budget.Used != 30 {
		t.Fatalf("budget used = %d, want 30", agent.Budget.Used)
	}

	// What the model was told.
	results := e.toolResults()
	if len(results) != 4 || results[0] != "ok" || !strings.Contains(results[1], `"exit_code":0`) || !strings.Contains(results[1], "made") ||
		!strings.Contains(results[2], "hello.txt\n") || !strings.Contains(results[2], "src/\n") || strings.Contains(results[2], "old.txt") ||
		results[3] != "hello\n" {
		t.Fatalf("tool results = %q", results)
	}
	reqs := e.model.Requests()
	first := reqs[0]
	if first.Model != "test-model" || first.Messages[0].Role != "system" || !strings.Contains(first.Messages[0].Content, "Write tidy code.") ||
		first.Last().Content != "create the files" || first.Authorization != "Bearer "+testModelKey || !first.Stream {
		t.Fatalf("first request = %+v", first)
	}
	if got := strings.Join(first.Tools, ","); got != "shell,read_file,write_file,list_files,search_documents,list_agents,delegate,create_agent" {
		t.Fatalf("tools offered = %s", got)
	}

	// The change set is what Corral measured, with the right hashes.
	var cs api.ChangeSetView
	owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
	want := map[string]string{"hello.txt": "create " + sha("hello\n"), "src/main.go": "create " + sha("package main\n"), "old.txt": "delete "}
	if cs.Status != "pending" || cs.RunID == nil || *cs.RunID != run.ID || len(cs.Entries) != len(want) {
		t.Fatalf("change set = %+v", cs)
	}
	for _, en := range cs.Entries {
		if want[en.Path] != en.Op+" "+en.NewSHA256 {
			t.Fatalf("entry %s = %s %s, want %s", en.Path, en.Op, en.NewSHA256, want[en.Path])
		}
	}
	// Review mode: nothing reached the workspace until approval.
	owner.do("GET", "/api/agents/"+id+"/files?path=hello.txt", nil).want(http.StatusNotFound)
	owner.do("POST", "/api/changes/"+cs.ID+"/approve", nil).want(http.StatusOK)
	if got := owner.file(id, "hello.txt"); got != "hello\n" {
		t.Fatalf("hello.txt = %q", got)
	}

	// The thread has the answer; the trace has every step and verifies.
	var thread api.List[api.MessageView]
	owner.do("GET", "/api/agents/"+id+"/messages", nil).want(http.StatusOK).decode(&thread)
	if n := len(thread.Items); n != 2 || thread.Items[1].Role != "assistant" || thread.Items[1].Content != "Done: hello.txt and src/main.go." ||
		thread.Items[1].RunID == nil || *thread.Items[1].RunID != run.ID {
		t.Fatalf("thread = %+v", thread.Items)
	}
	events := owner.trace(run.ID)
	verify(t, run.ID, events)
	got := strings.Join(types(events), " ")
	wantTypes := "admitted started usage message tool_call tool_result tool_call tool_result tool_call tool_result tool_call tool_result usage message ended"
	if got != wantTypes {
		t.Fatalf("trace = %s\nwant    %s", got, wantTypes)
	}
	var ended struct {
		Status      string `json:"status"`
		ChangeSetID string `json:"change_set_id"`
	}
	json.Unmarshal(events[len(events)-1].Data, &ended)
	if ended.Status != "completed" || ended.ChangeSetID != cs.ID {
		t.Fatalf("ended event = %s", events[len(events)-1].Data)
	}
}

// file reads a file of the agent's persistent workspace.
func (c *client) file(agentID, path string) string {
	c.e.t.Helper()
	var f struct {
		Content string `json:"content"`
	}
	c.do("GET", "/api/agents/"+agentID+"/files?path="+path, nil).want(http.StatusOK).decode(&f)
	return f.Content
}

func TestReadOnlyAgentCannotWrite(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("reader")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]string{"fs": "read-only"}}).want(http.StatusOK)
	owner.do("PUT", "/api/agents/"+id+"/files?path=notes.txt", "keep me\n").want(http.StatusOK)
	// A model that insists on writing, three ways.
	e.answer(modeltest.Sequence(
		modeltest.Calls(modeltest.WriteCall("c1", "notes.txt", "overwritten\n")),
		modeltest.Calls(modeltest.ShellCall("c2", "echo x > new.txt; rm -f notes.txt; touch /tmp/ok && echo tmp-ok")),
		modeltest.Calls(modeltest.ReadCall("c3", "notes.txt")),
		modeltest.Text("I could not write."),
	))
	run := owner.send(id, "change notes.txt")
	done := owner.waitRun(run.ID, "completed", "errored")
	if done.Status != "completed" || done.ChangeSetID != nil {
		t.Fatalf("run = %+v, want completed with no change set", done)
	}
	results := e.toolResults()
	if len(results) != 3 || !strings.HasPrefix(results[0], "error: ") || !strings.Contains(results[0], "read-only") ||
		!strings.Contains(results[1], "Read-only file system") || !strings.Contains(results[1], "tmp-ok") ||
		results[2] != "keep me\n" {
		t.Fatalf("tool results = %q", results)
	}
	if got := owner.file(id, "notes.txt"); got != "keep me\n" {
		t.Fatalf("notes.txt = %q", got)
	}
	owner.do("GET", "/api/agents/"+id+"/files?path=new.txt", nil).want(http.StatusNotFound)
}

func TestSecretsInvisibleToRuns(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("curious")
	owner.do("PUT", "/api/agents/"+id+"/files?path=app.txt", "app\n").want(http.StatusOK)
	write(t, filepath.Join(e.dataDir, "workspaces", id, ".env"), "API_KEY=hunter2-secret\n")
	write(t, filepath.Join(e.dataDir, "workspaces", id, ".env.local"), "TOKEN=hunter2-secret\n")
	e.answer(modeltest.Sequence(
		modeltest.Calls(
			modeltest.ShellCall("c1", "cat .env; cat .env.local; ls -a; grep -r hunt[e]r2 / 2>/dev/null | head -1; env"),
			modeltest.ReadCall("c2", ".env"),
		),
		modeltest.Text("nothing there"),
	))
	run := owner.send(id, "find the key")
	owner.waitRun(run.ID, "completed")
	results := strings.Join(e.toolResults(), "\n")
	if strings.Contains(results, "hunter2") || strings.Contains(results, testModelKey) || !strings.Contains(results, "No such file") || !strings.Contains(results, "app.txt") {
		t.Fatalf("tool results = %q", results)
	}
	for _, ev := range owner.trace(run.ID) {
		if strings.Contains(string(ev.Data), "hunter2") || strings.Contains(string(ev.Data), testModelKey) {
			t.Fatalf("trace event %d holds a secret: %s", ev.Seq, ev.Data)
		}
	}
}

func TestNoProviderSaysHowToConfigureOne(t *testing.T) {
	e := newEnv(t, envOptions{noModel: true})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("idle")
	res := owner.do("POST", "/api/agents/"+id+"/messages", map[string]string{"content": "hi"}).want(http.StatusServiceUnavailable)
	if !strings.Contains(string(res.body), "CORRAL_MODEL_BASE_URL") || !strings.Contains(string(res.body), "CORRAL_MODEL") {
		t.Fatalf("answer = %s", res.body)
	}
	var runs api.List[api.RunView]
	owner.do("GET", "/api/agents/"+id+"/runs", nil).want(http.StatusOK).decode(&runs)
	if len(runs.Items) != 0 {
		t.Fatalf("runs = %+v", runs.Items)
	}
}

// admissionRows returns the stored admission evidence of an agent as
// reason → count, and fails if any column holds the prompt text.
func (e *env) admissionRows(t *testing.T, agentID, prompt string) map[string]int {
	t.Helper()
	rows, err := e.rawDB(t).Query(`SELECT * FROM admissions WHERE agent_id = ?`, agentID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	got := map[string]int{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		reason := ""
		for i, c := range cols {
			if s, ok := vals[i].(string); ok && prompt != "" && strings.Contains(s, prompt) {
				t.Fatalf("admission evidence column %s holds the prompt", c)
			}
			if c == "reason" {
				reason, _ = vals[i].(string)
			}
		}
		got[reason]++
	}
	return got
}

func TestAdmissionRefusals(t *testing.T) {
	needSandbox(t)
	tests := []struct {
		reason string
		// setup brings the agent to where a message with prompt is refused.
		setup  func(e *env, owner *client, id string)
		prompt string
	}{
		{"prompt_too_large", func(e *env, owner *client, id string) {
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"limits": map[string]int{"max_prompt_bytes": 10}}).want(http.StatusOK)
		}, "eleven-byte"},
		{"run_limit", func(e *env, owner *client, id string) {
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"limits": map[string]int{"max_runs": 1}}).want(http.StatusOK)
			owner.waitRun(owner.send(id, "first").ID, "completed")
		}, "the second run"},
		{"budget_exhausted", func(e *env, owner *client, id string) {
			owner.waitRun(owner.send(id, "spend").ID, "completed")
			// Lowered to what was used: the agent is active but spent.
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int{"tokens": 15}}).want(http.StatusOK)
		}, "more work"},
		{"paused", func(e *env, owner *client, id string) {
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int{"tokens": 1}}).want(http.StatusOK)
			e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "true")), modeltest.Text("done")))
			owner.waitRun(owner.send(id, "spend it all").ID, "paused")
		}, "more work"},
		{"quarantined", func(e *env, owner *client, id string) {
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"limits": map[string]int{"output_bytes": 1024}}).want(http.StatusOK)
			e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "yes"))))
			for range 2 {
				owner.waitRun(owner.send(id, "flood").ID, "errored")
			}
		}, "more work"},
		{"busy", func(e *env, owner *client, id string) {
			hold := make(chan struct{})
			e.t.Cleanup(func() { close(hold) })
			e.answer(modeltest.Sequence(modeltest.Reply{Content: "slow", Block: hold}))
			owner.waitRun(owner.send(id, "take your time").ID, "running")
			// Held in its model call, so the count below is settled.
			waitFor(e.t, "the held run's model call", func() bool { return len(e.model.Requests()) > 0 })
		}, "are you done"},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			owner := e.signup("owner@example.com", "Owner")
			id := owner.createAgent("limited")
			e.answer(modeltest.Sequence(modeltest.Text("ok")))
			tt.setup(e, owner, id)
			calls := len(e.model.Requests())
			var before api.List[api.RunView]
			owner.do("GET", "/api/agents/"+id+"/runs", nil).want(http.StatusOK).decode(&before)

			res := owner.do("POST", "/api/agents/"+id+"/messages", map[string]string{"content": tt.prompt}).want(http.StatusUnprocessableEntity)
			var body api.ErrorBody
			res.decode(&body)
			if body.Error.Code != "admission_denied" || body.Error.Reason != tt.reason || body.Error.Message == "" {
				t.Fatalf("refusal = %s, want admission_denied %s", res.body, tt.reason)
			}
			if n := len(e.model.Requests()); n != calls {
				t.Fatalf("a refused message made %d model calls", n-calls)
			}
			var after api.List[api.RunView]
			owner.do("GET", "/api/agents/"+id+"/runs", nil).want(http.StatusOK).decode(&after)
			if len(after.Items) != len(before.Items) {
				t.Fatalf("a refused message made a run: %d runs, was %d", len(after.Items), len(before.Items))
			}
			var thread api.List[api.MessageView]
			owner.do("GET", "/api/agents/"+id+"/messages", nil).want(http.StatusOK).decode(&thread)
			for _, m := range thread.Items {
				if m.Content == tt.prompt {
					t.Fatalf("a refused message joined the thread")
				}
			}
			if got := e.admissionRows(t, id, tt.prompt); got[tt.reason] != 1 {
				t.Fatalf("evidence = %v, want one %s refusal", got, tt.reason)
			}
		})
	}
}

func TestBudgetPausesAndRaisingItResumes(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("thrifty")
	// 30,010 tokens a call (see costly): after two (60,020), what is left
	// of 80,000 cannot hold the third's ceiling.
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int{"tokens": 80_000}}).want(http.StatusOK)
	e.answer(modeltest.Sequence(
		costly(modeltest.Calls(modeltest.ShellCall("c1", "echo one > one.txt"))),
		costly(modeltest.Calls(modeltest.ShellCall("c2", "echo two > two.txt"))),
		modeltest.Text("both written"),
	))
	run := owner.send(id, "write two files")
	paused := owner.waitRun(run.ID, "paused", "completed", "errored")
	if paused.Status != "paused" || len(e.model.Requests()) != 2 {
		t.Fatalf("run = %+v after %d calls, want paused after 2", paused, len(e.model.Requests()))
	}
	var agent api.AgentView
	owner.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&agent)
	if agent.State != "paused" || agent.Budget.Used != 60_020 || agent.Budget.Reserved != 0 || agent.Budget.Left == nil || *agent.Budget.Left != 80_000-60_020 {
		t.Fatalf("agent = %s, budget %+v; want paused at 60,020 used, nothing reserved", agent.State, agent.Budget)
	}
	// Both tool calls ran before the pause; the pause came at the model
	// call boundary.
	events := owner.trace(run.ID)
	if got := types(events); got[len(got)-1] != "paused" {
		t.Fatalf("trace = %v", got)
	}

	// Raising the budget resumes the run with no new message.
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int{"tokens": 1_000_000}}).decode(&agent)
	if agent.State != "active" {
		t.Fatalf("agent after raise = %s", agent.State)
	}
	done := owner.waitRun(run.ID, "completed", "errored")
	if done.Status != "completed" || len(e.model.Requests()) != 3 || done.ChangeSetID == nil {
		t.Fatalf("run = %+v after %d calls", done, len(e.model.Requests()))
	}
	// The resumed call carried the whole conversation from the checkpoint.
	last := e.model.Requests()[2]
	if last.CountRole("tool") != 2 || last.CountRole("user") != 1 {
		t.Fatalf("resumed request = %+v", last.Messages)
	}
	var cs api.ChangeSetView
	owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
	if len(cs.Entries) != 2 {
		t.Fatalf("change set entries = %+v, want one.txt and two.txt", cs.Entries)
	}
	events = owner.trace(run.ID)
	verify(t, run.ID, events)
	if !strings.Contains(strings.Join(types(events), " "), "paused resumed usage message ended") {
		t.Fatalf("trace = %v", types(events))
	}
}

func TestStopEndsAtTheNextSafePoint(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("stoppable")

	t.Run("during a model call", func(t *testing.T) {
		hold := make(chan struct{})
		e.answer(modeltest.Sequence(modeltest.Reply{ToolCalls: []modeltest.ToolCall{modeltest.ShellCall("c1", "touch ran.txt")}, Block: hold}))
		run := owner.send(id, "work")
		owner.waitRun(run.ID, "running")
		waitFor(t, "the run's model call", func() bool { return len(e.model.Requests()) > 0 })
		owner.do("POST", "/api/runs/"+run.ID+"/stop", nil).want(http.StatusAccepted)
		close(hold) // the call finishes; its tool call never runs
		done := owner.waitRun(run.ID, "cancelled", "completed", "errored")
		if done.Status != "cancelled" || done.ChangeSetID != nil || done.Tokens.Input == 0 {
			t.Fatalf("run = %+v, want cancelled, metered, with nothing changed", done)
		}
		for _, ev := range owner.trace(run.ID) {
			if ev.Type == "tool_call" {
				t.Fatalf("a tool ran after stop: %s", ev.Data)
			}
		}
	})

	t.Run("during a tool", func(t *testing.T) {
		e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "echo started > s.txt; sleep 4243"))))
		run := owner.send(id, "work long")
		waitFor(t, `the run's "sleep 4243"`, func() bool { return len(processesWith("sleep 4243")) > 0 })
		owner.do("POST", "/api/runs/"+run.ID+"/stop", nil).want(http.StatusAccepted)
		done := owner.waitRun(run.ID, "cancelled", "completed", "errored")
		if done.Status != "cancelled" || done.ChangeSetID == nil {
			t.Fatalf("run = %+v, want cancelled with its work kept as a change set", done)
		}
		var cs api.ChangeSetView
		owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
		if cs.Mode != "review" || cs.Status != "pending" {
			t.Fatalf("a stopped run's changes = %s %s, want pending review", cs.Mode, cs.Status)
		}
	})

	// The conversation so far is kept: the next message continues it.
	e.answer(modeltest.Sequence(modeltest.Text("continuing")))
	owner.waitRun(owner.send(id, "go on").ID, "completed")
	last := e.model.Requests()[len(e.model.Requests())-1]
	if last.CountRole("user") != 3 || !strings.Contains(last.Messages[1].Content, "work") {
		t.Fatalf("next run's conversation = %+v", last.Messages)
	}
	owner.do("POST", "/api/runs/nope/stop", nil).want(http.StatusNotFound)
}

// processesWith lists the processes whose command line contains s.
func processesWith(s string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			found = append(found, d)
		}
	}
	return found
}

func TestKillEndsEveryProcessAtOnce(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	runner := e.signup("runner@example.com", "Runner")
	id := owner.createAgent("killable")
	owner.grant(id, runner.user.ID, "runner")
	// A process tree that ignores SIGTERM.
	marker := "sleep 4242"
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "trap '' TERM; ("+marker+" &); "+marker))))
	run := runner.send(id, "hang")
	owner.waitTrace(run.ID, "tool_call")
	waitFor(t, "both of the run's "+marker+" processes", func() bool { return len(processesWith(marker)) >= 2 })
	runner.do("POST", "/api/runs/"+run.ID+"/kill", nil).want(http.StatusForbidden)
	owner.do("DELETE", "/api/agents/"+id, nil).want(http.StatusConflict) // not under a running run
	owner.do("POST", "/api/runs/"+run.ID+"/kill", nil).want(http.StatusAccepted)
	done := owner.waitRun(run.ID, "killed", "cancelled", "errored")
	if done.Status != "killed" {
		t.Fatalf("run = %+v, want killed", done)
	}
	// The run is recorded killed only once its sandbox is gone.
	if left := processesWith(marker); len(left) != 0 {
		t.Fatalf("processes left after kill: %v", left)
	}
	owner.do("POST", "/api/runs/"+run.ID+"/kill", nil).want(http.StatusConflict)
	owner.do("DELETE", "/api/agents/"+id, nil).want(http.StatusNoContent)
}

func TestRepeatedViolationsQuarantine(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{}) // quarantine after 2 violations
	owner := e.signup("owner@example.com", "Owner")
	editor := e.signup("editor@example.com", "Editor")
	id := owner.createAgent("noisy")
	owner.grant(id, editor.user.ID, "editor")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"limits": map[string]int{"output_bytes": 4096}}).want(http.StatusOK)
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "yes"))))
	for i := range 2 {
		done := owner.waitRun(owner.send(id, "flood").ID, "errored", "completed")
		if done.Status != "errored" || done.Violation == nil || *done.Violation != "output" {
			t.Fatalf("run %d = %+v, want errored with the output violation", i, done)
		}
	}
	var agent api.AgentView
	owner.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&agent)
	if agent.State != "quarantined" {
		t.Fatalf("agent = %s after 2 violations", agent.State)
	}
	res := owner.do("POST", "/api/agents/"+id+"/messages", map[string]string{"content": "again"}).want(http.StatusUnprocessableEntity)
	if !strings.Contains(string(res.body), `"reason":"quarantined"`) {
		t.Fatalf("refusal = %s", res.body)
	}
	editor.do("POST", "/api/agents/"+id+"/release", nil).want(http.StatusForbidden)
	owner.do("POST", "/api/agents/"+id+"/release", nil).want(http.StatusOK).decode(&agent)
	if agent.State != "active" {
		t.Fatalf("agent after release = %s", agent.State)
	}
	e.answer(modeltest.Sequence(modeltest.Text("behaving")))
	owner.waitRun(owner.send(id, "calmly").ID, "completed")
}

func TestViewerReadsRunsButCannotSend(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	viewer := e.signup("viewer@example.com", "Viewer")
	runner := e.signup("runner@example.com", "Runner")
	stranger := e.signup("stranger@example.com", "Stranger")
	id := owner.createAgent("shared")
	owner.grant(id, viewer.user.ID, "viewer")
	owner.grant(id, runner.user.ID, "runner")

	hold := make(chan struct{})
	e.answer(modeltest.Sequence(modeltest.Reply{Content: "slow", Block: hold}))
	run := owner.send(id, "owner's run")
	owner.waitRun(run.ID, "running")

	for _, path := range []string{"/api/agents/" + id + "/messages", "/api/agents/" + id + "/runs", "/api/runs/" + run.ID, "/api/runs/" + run.ID + "/trace"} {
		viewer.do("GET", path, nil).want(http.StatusOK)
		stranger.do("GET", path, nil).want(http.StatusNotFound)
	}
	missing := stranger.do("GET", "/api/runs/run_missing", nil).want(http.StatusNotFound)
	hidden := stranger.do("GET", "/api/runs/"+run.ID, nil).want(http.StatusNotFound)
	if strings.ReplaceAll(string(hidden.body), "run_missing", "x") != strings.ReplaceAll(string(missing.body), "run_missing", "x") {
		t.Fatalf("a hidden run answers %s, a missing one %s", hidden.body, missing.body)
	}
	viewer.do("POST", "/api/agents/"+id+"/messages", map[string]string{"content": "let me"}).want(http.StatusForbidden)
	viewer.do("POST", "/api/runs/"+run.ID+"/stop", nil).want(http.StatusForbidden)
	runner.do("POST", "/api/runs/"+run.ID+"/stop", nil).want(http.StatusForbidden) // not the runner's own run
	stranger.do("POST", "/api/runs/"+run.ID+"/stop", nil).want(http.StatusNotFound)
	close(hold)
	owner.waitRun(run.ID, "completed")

	// A runner stops its own runs.
	hold2 := make(chan struct{})
	defer close(hold2)
	e.answer(modeltest.Sequence(modeltest.Reply{Content: "slow", Block: hold2}))
	own := runner.send(id, "runner's run")
	runner.do("POST", "/api/runs/"+own.ID+"/stop", nil).want(http.StatusAccepted)
}

// sse reads server-sent events from a stream.
type sse struct {
	t    testing.TB
	ctx  context.Context
	res  *http.Response
	scan *bufio.Scanner
	// lastID is the last id: the stream gave, as EventSource keeps it.
	lastID string
}

// events opens a run's event stream. The stream may stay open for patience
// at most: a run that never ends fails the test instead of hanging it.
func (c *client) events(runID string) *sse {
	c.e.t.Helper()
	return c.eventsAfter(runID, "")
}

// eventsAfter opens a run's event stream as a client resuming after the
// event last (a Last-Event-ID, when not empty).
func (c *client) eventsAfter(runID, last string) *sse {
	c.e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	c.e.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.e.srv.URL+"/api/runs/"+runID+"/events", nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	req.AddCookie(&http.Cookie{Name: api.CookieName, Value: c.cookie})
	res, err := c.e.srv.Client().Do(req)
	if err != nil {
		c.e.t.Fatal(err)
	}
	c.e.t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		c.e.t.Fatalf("events = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return &sse{t: c.e.t, ctx: ctx, res: res, scan: bufio.NewScanner(res.Body)}
}

// next returns the next event's type and data; ok false at the end.
func (s *sse) next() (typ, data string, ok bool) {
	for s.scan.Scan() {
		line := s.scan.Text()
		switch {
		case line == "":
			if typ != "" {
				return typ, data, true
			}
		case strings.HasPrefix(line, "id: "):
			s.lastID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	if s.ctx.Err() != nil {
		s.t.Fatalf("the run's event stream was still open after %v", patience)
	}
	return "", "", false
}

func TestEventsStreamLiveAndEndWithTheRun(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("watched")
	hold := make(chan struct{})
	e.answer(modeltest.Sequence(
		modeltest.Reply{Content: "Let me look around first.", ToolCalls: []modeltest.ToolCall{modeltest.ShellCall("c1", "echo looked")}, Block: hold},
		modeltest.Text("All done."),
	))
	run := owner.send(id, "watch me")
	stream := owner.events(run.ID)
	var seen []api.TraceView
	var deltas, outputs strings.Builder
	released := false
	for {
		typ, data, ok := stream.next()
		if !ok {
			break
		}
		switch typ {
		case "trace":
			var ev api.TraceView
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, ev)
			if ev.Type == "started" && !released {
				released = true
				close(hold) // the rest of the run happens while we watch
			}
		case "delta":
			var d struct{ Content string }
			json.Unmarshal([]byte(data), &d)
			deltas.WriteString(d.Content)
		case "output":
			var o struct{ Content string }
			json.Unmarshal([]byte(data), &o)
			outputs.WriteString(o.Content)
		default:
			t.Fatalf("unexpected event %s: %s", typ, data)
		}
	}
	verify(t, run.ID, seen)
	if got := types(seen); got[len(got)-1] != "ended" || len(seen) != len(owner.trace(run.ID)) {
		t.Fatalf("stream = %v", got)
	}
	if !strings.Contains(deltas.String(), "Let me look around first.") || !strings.Contains(deltas.String(), "All done.") {
		t.Fatalf("deltas = %q", deltas.String())
	}
	if outputs.String() != "looked\n" {
		t.Fatalf("live tool output = %q", outputs.String())
	}

	// A finished run's stream gives the whole trace and closes.
	again := owner.events(run.ID)
	n := 0
	for {
		typ, _, ok := again.next()
		if !ok {
			break
		}
		if typ == "trace" {
			n++
		}
	}
	if n != len(seen) {
		t.Fatalf("replayed %d events, want %d", n, len(seen))
	}

	// A client resuming after event 3 (a broken stream's Last-Event-ID)
	// gets the ones after it; one naming nothing sensible gets them all.
	for _, tc := range []struct {
		last string
		from int64
	}{{"3", 4}, {"0", 1}, {"junk", 1}} {
		resumed := owner.eventsAfter(run.ID, tc.last)
		var seqs []int64
		for {
			typ, data, ok := resumed.next()
			if !ok {
				break
			}
			var ev api.TraceView
			if typ == "trace" && json.Unmarshal([]byte(data), &ev) == nil {
				seqs = append(seqs, ev.Seq)
			}
		}
		if len(seqs) != len(seen)-int(tc.from)+1 || seqs[0] != tc.from {
			t.Fatalf("resumed after %q: seqs %v, want %d to %d", tc.last, seqs, tc.from, len(seen))
		}
	}
}

func TestRevokedViewerIsCutOffMidStream(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	viewer := e.signup("viewer@example.com", "Viewer")
	id := owner.createAgent("watched")
	owner.grant(id, viewer.user.ID, "viewer")
	var mu sync.Mutex
	hold := make(chan struct{})
	e.answer(modeltest.Sequence(
		modeltest.Reply{ToolCalls: []modeltest.ToolCall{modeltest.ShellCall("c1", "echo secret-plan")}, Block: hold},
		modeltest.Text("the secret plan is ready"),
	))
	run := owner.send(id, "plan")
	stream := viewer.events(run.ID)
	for {
		typ, data, ok := stream.next()
		if !ok {
			t.Fatal("stream ended before the run started")
		}
		if typ == "trace" && strings.Contains(data, `"type":"started"`) {
			break
		}
	}
	mu.Lock()
	owner.do("DELETE", "/api/agents/"+id+"/grants/"+viewer.user.ID, nil).want(http.StatusNoContent)
	mu.Unlock()
	close(hold)
	var after []string
	for {
		typ, data, ok := stream.next()
		if !ok {
			break
		}
		after = append(after, typ+" "+data)
	}
	if len(after) != 1 || !strings.HasPrefix(after[0], "error ") || !strings.Contains(after[0], "not_found") {
		t.Fatalf("after revocation the viewer got %q, want one error event", after)
	}
	owner.waitRun(run.ID, "completed")
	viewer.do("GET", "/api/runs/"+run.ID+"/events", nil).want(http.StatusNotFound)
}

func TestGrantByEmail(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	bob := e.signup("bob@example.com", "Bob")
	id := owner.createAgent("shared")
	path := "/api/agents/" + id + "/grants"
	var g api.GrantView
	owner.do("POST", path, map[string]string{"email": "Bob@Example.com", "level": "runner"}).want(http.StatusOK).decode(&g)
	if g.User.ID != bob.user.ID || g.Level != "runner" {
		t.Fatalf("grant = %+v", g)
	}
	var a api.AgentView
	bob.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&a)
	if a.Access != "runner" {
		t.Fatalf("bob's access = %s", a.Access)
	}
	owner.do("POST", path, map[string]string{"email": "nobody@example.com", "level": "viewer"}).want(http.StatusNotFound)
	owner.do("POST", path, map[string]string{"email": "owner@example.com", "level": "viewer"}).want(http.StatusConflict)
	owner.do("POST", path, map[string]string{"email": "bob@example.com", "level": "owner"}).want(http.StatusBadRequest)
	owner.do("POST", path, map[string]string{"email": "not an email", "level": "viewer"}).want(http.StatusBadRequest)
	bob.do("POST", path, map[string]string{"email": "owner@example.com", "level": "viewer"}).want(http.StatusForbidden)
}

func TestToolOutputStreamsWhileTheCommandRuns(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("chatty")
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "echo first-line; sleep 60; echo never"))))
	run := owner.send(id, "talk while you work")
	stream := owner.events(run.ID)
	for {
		typ, data, ok := stream.next()
		if !ok {
			t.Fatal("the stream ended before any output came")
		}
		if typ == "trace" && strings.Contains(data, `"type":"tool_result"`) {
			t.Fatalf("the result came before any live output: %s", data)
		}
		if typ == "output" {
			var o struct {
				ToolCallID string `json:"tool_call_id"`
				Content    string `json:"content"`
			}
			if err := json.Unmarshal([]byte(data), &o); err != nil {
				t.Fatal(err)
			}
			if o.ToolCallID != "c1" || !strings.Contains(o.Content, "first-line") {
				t.Fatalf("output event = %s", data)
			}
			break
		}
	}
	// The command is still sleeping: its output came while it ran.
	if r := owner.run(run.ID); r.Status != "running" {
		t.Fatalf("run = %s while its command sleeps", r.Status)
	}
	owner.do("POST", "/api/runs/"+run.ID+"/kill", nil).want(http.StatusAccepted)
	var rest []string
	for {
		typ, data, ok := stream.next()
		if !ok {
			break
		}
		if typ == "trace" {
			var ev api.TraceView
			json.Unmarshal([]byte(data), &ev)
			rest = append(rest, ev.Type)
		}
	}
	if got := strings.Join(rest, " "); !strings.HasSuffix(got, "tool_result ended") {
		t.Fatalf("after the kill the stream gave %s", got)
	}
}

func TestLateWatcherGetsTheOutputSoFar(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("chatty")
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "echo early-line; sleep 60"))))
	run := owner.send(id, "talk before I look")
	waitFor(t, "the command to write its line", func() bool {
		o, ok := e.runner.OutputSoFar(run.ID)
		return ok && strings.Contains(o.Text, "early-line")
	})
	// Joining now, after the line was written: it comes from the snapshot,
	// once.
	stream := owner.events(run.ID)
	var outputs strings.Builder
	for !strings.Contains(outputs.String(), "early-line") {
		typ, data, ok := stream.next()
		if !ok {
			t.Fatal("the stream ended without the output so far")
		}
		if typ == "output" {
			var o struct{ Content string }
			json.Unmarshal([]byte(data), &o)
			outputs.WriteString(o.Content)
		}
	}
	// A client whose stream broke here resumes after the last id it got
	// (an output event's): the line does not come again.
	last := stream.lastID
	resumed := owner.eventsAfter(run.ID, last)
	owner.do("POST", "/api/runs/"+run.ID+"/kill", nil).want(http.StatusAccepted)
	rest := func(s *sse, outputs *strings.Builder) (types []string) {
		for {
			typ, data, ok := s.next()
			if !ok {
				return types
			}
			switch typ {
			case "output":
				var o struct{ Content string }
				json.Unmarshal([]byte(data), &o)
				outputs.WriteString(o.Content)
			case "trace":
				var ev api.TraceView
				json.Unmarshal([]byte(data), &ev)
				types = append(types, ev.Type)
			}
		}
	}
	rest(stream, &outputs)
	if outputs.String() != "early-line\n" {
		t.Fatalf("the late watcher got output %q, want the line once", outputs.String())
	}
	var again strings.Builder
	types := rest(resumed, &again)
	if again.String() != "" || strings.Join(types, " ") != "tool_result ended" {
		t.Fatalf("resuming after %q gave output %q and events %v, want no output and the result and the end", last, again.String(), types)
	}
}

func TestParseEventID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want service.WatchFrom
	}{
		{"", service.WatchFrom{}},
		{"12", service.WatchFrom{Seq: 12}},
		{"12.345", service.WatchFrom{Seq: 12, Output: 345}},
		{"12.", service.WatchFrom{Seq: 12}},
		{"-1", service.WatchFrom{}},
		{"12.-5", service.WatchFrom{}},
		{"12.x", service.WatchFrom{}},
		{"junk", service.WatchFrom{}},
		{"1.2.3", service.WatchFrom{}},
	} {
		if got := api.ParseEventID(tc.id); got != tc.want {
			t.Errorf("ParseEventID(%q) = %+v, want %+v", tc.id, got, tc.want)
		}
	}
}
