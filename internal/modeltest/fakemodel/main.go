// Command fakemodel serves modeltest's scripted provider on a loopback
// port, for tests that drive a real `corral serve` from outside Go (the
// browser tests, the README's first walk). It prints "fakemodel listening
// <base URL>" on stdout and serves until it is signalled; -addr sets where
// (default: a free loopback port). It lists two models, scripted and
// scripted-mini, and answers whatever model a request names.
//
// The script: a message that mentions hello.txt makes the model run a short
// shell command, then write hello.txt (and notes.txt too when the message
// names it), then say so; one that says "slowly"
// makes it run a command that takes 60 seconds (to be stopped or killed);
// one that says "run a command" makes an agent CLI run "echo from-the-cli"
// with its shell tool, then say so;
// one that says "markdown" gets an answer in Markdown (a heading, a list, a
// code block, and raw HTML that must not come through); one that says
// "delegate to NAME:" makes it list the agents and hand the agent NAME the
// rest of the message; anything else gets a one-line answer.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"corral/internal/modeltest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "the address to serve on (port 0: any free port)")
	flag.Parse()
	p, err := modeltest.NewAt(*addr, script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(1)
	}
	defer p.Close()
	// What GET /v1/models lists: the model the browser test sets as the
	// server's default, and one more for the model picker to offer.
	p.SetModels("scripted", "scripted-mini")
	fmt.Printf("fakemodel listening %s\n", p.URL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}

func script(r modeltest.Request) modeltest.Reply {
	// The turns of this run: those after the last user message.
	var asked string
	done := map[string]bool{}
	results := map[string]string{}
	for _, m := range r.Messages {
		switch m.Role {
		case "user":
			asked, done, results = m.Content, map[string]bool{}, map[string]string{}
		case "tool":
			done[m.ToolCallID] = true
			results[m.ToolCallID] = m.Content
		}
	}
	if strings.Contains(asked, "markdown") {
		return modeltest.Text(markdownAnswer)
	}
	if target, task, ok := delegation(asked); ok {
		return delegate(target, task, done, results)
	}
	if strings.Contains(asked, "run a command") {
		return cliCommand(r.Tools, done)
	}
	if strings.Contains(asked, "slowly") {
		if !done["slow"] {
			return modeltest.Reply{Content: "This will take a while.",
				ToolCalls: []modeltest.ToolCall{modeltest.ShellCall("slow", "echo working slowly; sleep 60; echo slept")}}
		}
		return modeltest.Text("That took a while.")
	}
	if !strings.Contains(asked, "hello.txt") {
		return modeltest.Text("Hello! Ask me to write hello.txt and I will.")
	}
	switch {
	case !done["look"]:
		return modeltest.Reply{Content: "Let me look at the workspace first.",
			ToolCalls: []modeltest.ToolCall{modeltest.ShellCall("look", "ls -la; sleep 1; echo looked")}}
	case !done["write"]:
		calls := []modeltest.ToolCall{modeltest.WriteCall("write", "hello.txt", "Hello from the agent\n")}
		if strings.Contains(asked, "notes.txt") {
			calls = append(calls, modeltest.WriteCall("notes", "notes.txt", "Notes from the agent\n"))
		}
		return modeltest.Calls(calls...)
	}
	if strings.Contains(asked, "notes.txt") {
		return modeltest.Text("I wrote hello.txt and notes.txt.")
	}
	return modeltest.Text("I wrote hello.txt.")
}

// cliCommand has an agent CLI run "echo from-the-cli" with its own shell
// tool (Codex's exec_command, Claude Code's Bash), then say what it printed.
func cliCommand(tools []string, done map[string]bool) modeltest.Reply {
	if done["cli"] {
		return modeltest.Text("The command printed from-the-cli.")
	}
	for _, t := range tools {
		switch t {
		case "exec_command":
			return modeltest.Calls(modeltest.ToolCall{ID: "cli", Name: t, Arguments: `{"cmd":"echo from-the-cli"}`})
		case "Bash":
			return modeltest.Calls(modeltest.ToolCall{ID: "cli", Name: t, Arguments: `{"command":"echo from-the-cli","description":"Say where it runs"}`})
		}
	}
	return modeltest.Text("I have no shell tool to run a command with.")
}

// markdownAnswer is an answer in Markdown as models write them, with raw
// HTML in it that the web app must show inert.
const markdownAnswer = "# Test plan\n\n" +
	"Run these in order:\n\n" +
	"- build the binary\n" +
	"- run the **unit** tests\n\n" +
	"```sh\nmake test\n```\n\n" +
	"<img src=x onerror=\"document.title='pwned'\">\n\n" +
	"See [the docs](javascript:alert(1)) or <script>document.title='pwned'</script>."

// delegation reads "delegate to NAME: TASK" out of a message.
func delegation(asked string) (target, task string, ok bool) {
	_, rest, ok := strings.Cut(asked, "delegate to ")
	if !ok {
		return "", "", false
	}
	target, task, ok = strings.Cut(rest, ":")
	return strings.TrimSpace(target), strings.TrimSpace(task), ok && strings.TrimSpace(task) != ""
}

// delegate lists the agents, hands the one named target the task, then
// says what it answered.
func delegate(target, task string, done map[string]bool, results map[string]string) modeltest.Reply {
	switch {
	case !done["agents"]:
		return modeltest.Calls(modeltest.ToolCall{ID: "agents", Name: "list_agents", Arguments: "{}"})
	case !done["delegate"]:
		var agents []struct{ ID, Name string }
		if err := json.Unmarshal([]byte(results["agents"]), &agents); err != nil {
			return modeltest.Text("I could not read the list of agents.")
		}
		for _, a := range agents {
			if a.Name == target {
				args, _ := json.Marshal(map[string]string{"agent_id": a.ID, "task": task})
				return modeltest.Calls(modeltest.ToolCall{ID: "delegate", Name: "delegate", Arguments: string(args)})
			}
		}
		return modeltest.Text("There is no agent called " + target + ".")
	}
	return modeltest.Text(target + " did it.")
}
