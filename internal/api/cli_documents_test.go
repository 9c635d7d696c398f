package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"corral"
	"corral/internal/api"
	"corral/internal/modeltest"
)

// The search_documents tool as each CLI offers it to its model: the MCP
// server's tool, named by the CLI (as the requests the provider got show).
var cliSearchTool = map[string]string{
	corral.DriverCodex:      "mcp__corral__search_documents",
	corral.DriverClaudeCode: "mcp__corral__search_documents",
	corral.DriverOpenCode:   "corral_search_documents",
}

const (
	// runbook is Alice's private document; its fact is on one line, so
	// that it reads the same in a CLI's JSON-wrapped tool result.
	runbook = "# Runbook\n\n## Canary\n\nEvery release of ledger-api goes to the canary pool first. " +
		"The canary stage lasts 20 minutes before the deploy bot promotes the release.\n\n" +
		"## Rollback\n\nRun `deployctl rollback ledger-api` to restore the previous build.\n"
	runbookFact = "The canary stage lasts 20 minutes"
	// bobMarker is on Bob's private document, in the same words as
	// Alice's: it must reach no provider request.
	bobMarker       = "BOB-SECRET-MARKER"
	cliSearchQuery  = "how long does the canary stage of ledger-api last before promotion"
	cliSearchFinal  = "The canary stage lasts 20 minutes [1]."
	cliSearchPrompt = "How long does the canary stage of ledger-api last before promotion?"
)

// TestAgentCLIsSearchDocuments: each real agent CLI, in the real sandbox,
// reaches search_documents through the gateway's MCP server. Alice's CLI
// agent has a private runbook; Bob's agent has a private document in the
// same words, and the library one of Bob's. The CLI's task is the
// message with the passages retrieved at send time; told by the scripted
// model to search, the CLI gets the runbook's passage back, the trace
// records the search with its call, the answer names runbook.md, and
// nothing of Bob's private document reaches the provider.
func TestAgentCLIsSearchDocuments(t *testing.T) {
	slow(t)
	for _, tc := range cliCases {
		t.Run(tc.driver, func(t *testing.T) {
			needTools(t, tc.driver)
			e := newEnv(t, envOptions{})
			alice, bob := e.signup("alice@example.com", "Alice"), e.signup("bob@example.com", "Bob")
			cli := alice.roleAgent("cli-"+tc.driver, "cli")
			alice.do("PATCH", "/api/agents/"+cli, map[string]any{"driver": tc.driver}).want(http.StatusOK)
			bobs := bob.roleAgent("bob's private", "private")

			var doc api.DocumentView
			alice.do("POST", "/api/agents/"+cli+"/documents?name=runbook.md", runbook).want(http.StatusCreated).decode(&doc)
			bob.do("POST", "/api/agents/"+bobs+"/documents?name=bob-runbook.md",
				"# Canary\n\n"+bobMarker+": the canary stage of ledger-api lasts 45 minutes before promotion.").want(http.StatusCreated)
			bob.do("POST", "/api/library/documents?name=glossary.md",
				"# Glossary\n\nA canary is a small pool that gets a release first. Promotion moves the release to the fleet.").want(http.StatusCreated)

			var mu sync.Mutex
			offered := map[string]bool{} // the names the CLI's model was offered the tool by
			e.answer(roles(map[string]modeltest.Script{
				"cli": func(r modeltest.Request) modeltest.Reply {
					name := mcpTool(r.Tools, "search_documents")
					if name == "" {
						return modeltest.Text("Canary")
					}
					mu.Lock()
					offered[name] = true
					mu.Unlock()
					if len(r.LastToolResults()) > 0 {
						return modeltest.Text(cliSearchFinal)
					}
					args, _ := json.Marshal(map[string]string{"query": cliSearchQuery})
					return modeltest.Calls(modeltest.ToolCall{ID: "call_s1", Name: name, Arguments: string(args)})
				},
			}))

			run := alice.send(cli, cliSearchPrompt)
			done := alice.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
			events := alice.trace(run.ID)
			if done.Status != "completed" {
				t.Fatalf("run %s: %s (%s)\ntrace: %s", run.ID, done.Status, done.Reason, brief(events))
			}
			verify(t, run.ID, events)
			mu.Lock()
			names := offered
			mu.Unlock()
			if want := cliSearchTool[tc.driver]; len(names) != 1 || !names[want] {
				t.Errorf("the CLI offered its model the search tool as %v, want %s", names, want)
			}

			// The trace: the tool's search, bound to its call, found the
			// runbook.
			if !searchRetrieved(events, doc.ID) {
				t.Errorf("no retrieved event with a tool_call_id and %s among its items: %s", doc.ID, brief(events))
			}
			// The CLI's model got the passage, named, from the tool.
			if got := e.lastToolResult("cli"); !strings.Contains(got, runbookFact) || !strings.Contains(got, "runbook.md") {
				t.Errorf("the CLI's model was told %q, want the runbook's canary passage", got)
			}

			reqs := e.model.Requests()
			// The CLI's task: the message, then what was retrieved for it.
			task := ""
			for _, r := range reqs {
				if roleOf(r) == "cli" && firstUser(r) != "" {
					for _, m := range r.Messages {
						if m.Role == "user" && strings.Contains(m.Content, cliSearchPrompt) {
							task = m.Content
						}
					}
					break
				}
			}
			if !strings.Contains(task, runbookFact) || !strings.Contains(task, "runbook.md") {
				t.Errorf("the CLI's first request's task = %q, want the message with the runbook's passage", task)
			}
			// Nothing of Bob's private document, in any provider request.
			for i, r := range reqs {
				if strings.Contains(string(r.Body), bobMarker) {
					t.Errorf("provider request %d holds Bob's private document: %.300s", i, r.Body)
				}
			}

			// The thread: the message as written, and an answer naming
			// its source.
			var msgs api.List[api.MessageView]
			alice.do("GET", "/api/agents/"+cli+"/messages", nil).want(http.StatusOK).decode(&msgs)
			if len(msgs.Items) != 2 || msgs.Items[0].Content != cliSearchPrompt {
				t.Fatalf("thread = %+v, want the message as written and the answer", msgs.Items)
			}
			answer := msgs.Items[1]
			if !strings.Contains(answer.Content, cliSearchFinal) {
				t.Errorf("the thread's answer is %q, want the CLI's", answer.Content)
			}
			named := false
			for _, s := range answer.Sources {
				named = named || (s.DocumentID == doc.ID && s.Name == "runbook.md" && s.Source == "private")
			}
			if !named {
				t.Errorf("the answer's sources = %+v, want runbook.md", answer.Sources)
			}
		})
	}
}

// searchRetrieved tells whether the trace has a retrieved event of a
// search_documents call (with its tool_call_id) whose items hold docID.
func searchRetrieved(events []api.TraceView, docID string) bool {
	for _, ev := range events {
		if ev.Type != "retrieved" {
			continue
		}
		var d struct {
			ToolCallID string `json:"tool_call_id"`
			Items      []struct {
				DocumentID string `json:"document_id"`
			} `json:"items"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.ToolCallID == "" {
			continue
		}
		for _, it := range d.Items {
			if it.DocumentID == docID {
				return true
			}
		}
	}
	return false
}
