package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"corral/internal/modeltest"
)

// TestREADMEWalkthrough runs the README's curl walkthrough, as written,
// against the real binary, and checks each step's answer in order.
func TestREADMEWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walkthrough needs %s (make test installs it)", tool)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Walkthrough with curl.*?```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no walkthrough block")
	}
	script := string(m[1])
	if !strings.Contains(script, "API=http://127.0.0.1:8080/api") {
		t.Fatal("walkthrough no longer sets API: update this test")
	}

	// The model: asked to write hello.txt, it does, then says so.
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		if last := r.Last(); last.Role == "user" && strings.Contains(last.Content, "hello.txt") {
			return modeltest.Calls(modeltest.WriteCall("c1", "hello.txt", "Hello from the agent\n"))
		}
		return modeltest.Text("I wrote hello.txt.")
	})
	defer model.Close()
	srv := startServer(t, reachableTempDir(t),
		"CORRAL_MODEL_BASE_URL="+model.URL(), "CORRAL_MODEL=scripted", "CORRAL_MODEL_API_KEY=sk-walkthrough")
	base := srv.base

	script = strings.Replace(script, "API=http://127.0.0.1:8080/api", "API="+base+"/api", 1)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s", err, out)
	}
	// Each step's answer, in order.
	want := []string{
		`"admin":true`, `"admin":false`,
		`"code":"not_found","message":"agent not found"`,
		`"access": "viewer"`,
		`"code":"forbidden"`,
		`"code":"not_found","message":"agent not found"`,
		`"runner"`,
		`"name": "Bob"`,
		`"type":"admitted" "type":"started" "type":"usage" "type":"message" "type":"tool_call" "type":"tool_result" "type":"usage" "type":"message" "type":"ended"`,
		`{"status":"completed","tokens":{"input":20,"output":10}}`,
		`{"role":"user","author":"Bob","content":"please write hello.txt"}`,
		`{"role":"assistant","author":null,"content":"I wrote hello.txt."}`,
		`{"path":"hello.txt","op":"create","class":"ordinary"}`,
		`"applied"`,
		"Hello from the agent",
		`"code":"not_found","message":"agent not found"`,
		`"reviewer"`,
		"204",
		`"code":"unauthenticated"`,
	}
	rest := string(out)
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("walkthrough output lacks %s after the earlier steps:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
}
