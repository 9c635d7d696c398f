package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"corral"
	"corral/internal/api"
	"corral/internal/modeltest"
)

// The delegation tools as each CLI offers them to its model: the MCP
// server's tools, named by the CLI (as the requests the provider got show).
var cliDelegateTool = map[string]string{
	corral.DriverCodex:      "mcp__corral__delegate",
	corral.DriverClaudeCode: "mcp__corral__delegate",
	corral.DriverOpenCode:   "corral_delegate",
}

const (
	helperAnswer     = "The helper counted 42 files."
	cliDelegateFinal = "The helper has answered."
)

// mcpTool is the name the CLI gave Corral's MCP tool among the tools it
// offered its model ("mcp__corral__delegate", "corral_delegate"): "" for a
// side request of the CLI's (a title), which offers none.
func mcpTool(tools []string, tool string) string {
	for _, name := range tools {
		if name != tool && strings.HasSuffix(name, tool) {
			return name
		}
	}
	return ""
}

// targetIn is the agent the run's task names ("delegate to agt_..."), in
// whichever user message of the CLI's it is.
func targetIn(req modeltest.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == "user" {
			if t := targetWord.FindStringSubmatch(m.Content); t != nil {
				return t[1]
			}
		}
	}
	return ""
}

// TestAgentCLIsDelegate: each real agent CLI, in the real sandbox, reaches
// the delegation tools through the gateway's MCP server with its run's
// token. Alice's CLI agent, told by the scripted model to delegate to her
// built-in helper agent, gets the helper's answer back and ends on its
// own; the helper's run is the CLI run's child at depth 1. Told to
// delegate to Bob's private agent, it gets the not-found error and no run
// is made; the same once Bob grants Alice runner on it, which she has not
// accepted as a delegation target.
func TestAgentCLIsDelegate(t *testing.T) {
	slow(t)
	for _, tc := range cliCases {
		t.Run(tc.driver, func(t *testing.T) {
			needTools(t, tc.driver)
			e := newEnv(t, envOptions{})
			alice, bob := e.signup("alice@example.com", "Alice"), e.signup("bob@example.com", "Bob")
			cli := alice.roleAgent("cli-"+tc.driver, "cli")
			alice.do("PATCH", "/api/agents/"+cli, map[string]any{"driver": tc.driver}).want(http.StatusOK)
			helper := alice.roleAgent("helper", "helper")
			bobs := bob.roleAgent("bob's private", "private")

			var mu sync.Mutex
			offered := map[string]bool{} // the names the CLI's model was offered the tool by
			e.answer(roles(map[string]modeltest.Script{
				"cli": func(r modeltest.Request) modeltest.Reply {
					name := mcpTool(r.Tools, "delegate")
					if name == "" {
						return modeltest.Text("Delegation")
					}
					mu.Lock()
					offered[name] = true
					mu.Unlock()
					if len(r.LastToolResults()) > 0 {
						return modeltest.Text(cliDelegateFinal)
					}
					args, _ := json.Marshal(map[string]string{"agent_id": targetIn(r), "task": "Count the files."})
					return modeltest.Calls(modeltest.ToolCall{ID: "call_d1", Name: name, Arguments: string(args)})
				},
				"helper":  func(modeltest.Request) modeltest.Reply { return modeltest.Text(helperAnswer) },
				"private": func(modeltest.Request) modeltest.Reply { return modeltest.Text("Bob's agent must not run") },
			}))

			// To her own helper: a child run, and its answer back.
			run := alice.send(cli, "Hand the count to "+helper+": delegate to "+helper)
			done := alice.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
			events := alice.trace(run.ID)
			if done.Status != "completed" {
				t.Fatalf("run %s: %s (%s)\ntrace: %s", run.ID, done.Status, done.Reason, brief(events))
			}
			verify(t, run.ID, events)
			mu.Lock()
			names := offered
			mu.Unlock()
			if want := cliDelegateTool[tc.driver]; len(names) != 1 || !names[want] {
				t.Errorf("the CLI offered its model the delegate tool as %v, want %s", names, want)
			}
			tree := alice.tree(run.ID)
			if len(tree) != 2 {
				t.Fatalf("tree = %+v, want the CLI's run and one child\ntrace: %s", tree, brief(events))
			}
			child := tree[1]
			if child.ParentRunID == nil || *child.ParentRunID != run.ID || child.RootRunID != run.ID || child.Depth != 1 ||
				child.AgentID != helper || child.Status != "completed" || child.TriggeredBy == nil || child.TriggeredBy.ID != alice.user.ID {
				t.Errorf("child = %+v, want Alice's helper completed at depth 1 under %s", child, run.ID)
			}
			if !hasEvent(events, "delegated") || !delegateResult(events, child.ID) {
				t.Errorf("trace has no delegated event or no delegate tool_result naming %s: %s", child.ID, brief(events))
			}
			if got := e.lastToolResult("cli"); !strings.Contains(got, helperAnswer) || !strings.Contains(got, `"status":"completed"`) {
				t.Errorf("the CLI's model was told %q, want the helper's completed answer", got)
			}
			if !strings.Contains(lastAssistant(t, alice, cli), cliDelegateFinal) {
				t.Error("the thread does not end on the CLI's answer")
			}

			// To Bob's private agent: not found, and no run.
			run = alice.send(cli, "Try Bob's: delegate to "+bobs)
			done = alice.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
			events = alice.trace(run.ID)
			if done.Status != "completed" {
				t.Fatalf("run %s: %s (%s)\ntrace: %s", run.ID, done.Status, done.Reason, brief(events))
			}
			if got := e.lastToolResult("cli"); !strings.Contains(got, "not found") || strings.Contains(got, "must not run") {
				t.Errorf("delegating to Bob's agent, the CLI's model was told %q, want not found", got)
			}
			if !hasEvent(events, "delegation_refused") || hasEvent(events, "delegated") {
				t.Errorf("trace %v, want delegation_refused and no delegated", types(events))
			}
			if tree := alice.tree(run.ID); len(tree) != 1 {
				t.Errorf("tree has %d runs, want the CLI's run alone", len(tree))
			}
			if runs := bob.runsOf(bobs); len(runs) != 0 {
				t.Errorf("Bob's agent has %d runs, want none", len(runs))
			}

			// Granted to Alice, not accepted by her: the same answer.
			refused := e.lastToolResult("cli")
			bob.grant(bobs, alice.user.ID, "runner")
			run = alice.send(cli, "Try Bob's again: delegate to "+bobs)
			done = alice.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
			events = alice.trace(run.ID)
			if done.Status != "completed" {
				t.Fatalf("run %s: %s (%s)\ntrace: %s", run.ID, done.Status, done.Reason, brief(events))
			}
			if got := e.lastToolResult("cli"); wallTime.ReplaceAllString(got, "") != wallTime.ReplaceAllString(refused, "") {
				t.Errorf("delegating to Bob's agent granted but not accepted, the CLI's model was told %q, want %q as before", got, refused)
			}
			if !hasEvent(events, "delegation_refused") || hasEvent(events, "delegated") {
				t.Errorf("trace %v, want delegation_refused and no delegated", types(events))
			}
			if runs := bob.runsOf(bobs); len(runs) != 0 {
				t.Errorf("Bob's agent has %d runs after a delegate Alice did not accept, want none", len(runs))
			}
		})
	}
}

// wallTime is the time a CLI (Codex) says a tool call took, which differs
// between two calls answered alike.
var wallTime = regexp.MustCompile(`Wall time: [0-9.]+ seconds`)

// delegateResult tells whether the trace has the delegate call's
// tool_result, naming the child run.
func delegateResult(events []api.TraceView, childID string) bool {
	for _, ev := range events {
		if ev.Type != "tool_result" {
			continue
		}
		var d struct{ Name, Output string }
		if json.Unmarshal(ev.Data, &d) == nil && d.Name == "delegate" && strings.Contains(d.Output, childID) {
			return true
		}
	}
	return false
}
