package main

import (
	"strings"
	"testing"

	"corral/internal/modeltest"
)

func TestScript(t *testing.T) {
	user := func(s string) modeltest.Message { return modeltest.Message{Role: "user", Content: s} }
	tool := func(id, content string) modeltest.Message {
		return modeltest.Message{Role: "tool", ToolCallID: id, Content: content}
	}
	agents := `[{"id":"agt_1","name":"lead"},{"id":"agt_2","name":"hello-agent"}]`
	cases := []struct {
		name     string
		messages []modeltest.Message
		tools    []string // the tools the request offers
		call     string   // the tool the reply calls, with its arguments
		text     string   // or the start of the reply's text
	}{
		{"markdown", []modeltest.Message{user("answer in markdown")}, nil, "", "# Test plan"},
		{"delegation lists the agents first", []modeltest.Message{user("delegate to hello-agent: say hello")}, nil, "list_agents {}", ""},
		{"then delegates to the one named", []modeltest.Message{user("delegate to hello-agent: say hello"), tool("agents", agents)}, nil,
			`delegate {"agent_id":"agt_2","task":"say hello"}`, ""},
		{"then says so", []modeltest.Message{user("delegate to hello-agent: say hello"), tool("agents", agents), tool("delegate", `{"status":"completed"}`)}, nil,
			"", "hello-agent did it."},
		{"an agent not listed", []modeltest.Message{user("delegate to nobody: say hello"), tool("agents", agents)}, nil, "", "There is no agent called nobody."},
		{"the delegated task itself is answered plainly", []modeltest.Message{user("say hello")}, nil, "", "Hello!"},
		{"codex runs a command with exec_command", []modeltest.Message{user("run a command")}, []string{"exec_command", "apply_patch"},
			`exec_command {"cmd":"echo from-the-cli"}`, ""},
		{"claude code runs it with Bash", []modeltest.Message{user("run a command")}, []string{"Read", "Bash"},
			`Bash {"command":"echo from-the-cli","description":"Say where it runs"}`, ""},
		{"then says what it printed", []modeltest.Message{user("run a command"), tool("cli", "from-the-cli\n")}, []string{"exec_command"},
			"", "The command printed from-the-cli."},
		{"no shell tool", []modeltest.Message{user("run a command")}, nil, "", "I have no shell tool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := script(modeltest.Request{Messages: tc.messages, Tools: tc.tools})
			var call string
			if len(r.ToolCalls) > 0 {
				call = r.ToolCalls[0].Name + " " + r.ToolCalls[0].Arguments
			}
			if call != tc.call || !strings.HasPrefix(r.Content, tc.text) || (tc.text == "" && r.Content != "") {
				t.Errorf("script = call %q, text %q; want call %q, text starting %q", call, r.Content, tc.call, tc.text)
			}
		})
	}
}
