// Command fakemodel serves modeltest's scripted provider on a loopback
// port, for tests that drive a real `corral serve` from outside Go (the
// browser tests). It prints "fakemodel listening <base URL>" on stdout and
// serves until it is signalled.
//
// The script: a message that mentions hello.txt makes the model run a short
// shell command, then write hello.txt (and notes.txt too when the message
// names it), then say so; one that says "slowly"
// makes it run a command that takes 60 seconds (to be stopped or killed);
// anything else gets a one-line answer.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"corral/internal/modeltest"
)

func main() {
	p := modeltest.New(script)
	defer p.Close()
	fmt.Printf("fakemodel listening %s\n", p.URL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}

func script(r modeltest.Request) modeltest.Reply {
	// The turns of this run: those after the last user message.
	var asked string
	done := map[string]bool{}
	for _, m := range r.Messages {
		switch m.Role {
		case "user":
			asked, done = m.Content, map[string]bool{}
		case "tool":
			done[m.ToolCallID] = true
		}
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
