package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/sandbox"
)

// TestAPIWalkthrough runs the curl walkthrough of docs/api.md, as written,
// against the real binary, then, in the same shell, its usage and audit
// block, and checks each step's answer in order.
func TestAPIWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walkthrough needs %s (make test installs it)", tool)
		}
	}
	page, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Walkthrough with curl.*?```sh\n(.*?)```").FindSubmatch(page)
	if m == nil {
		t.Fatal("docs/api.md has no walkthrough block")
	}
	ops := regexp.MustCompile("(?s)## Usage, audit and what is in flight.*?```sh\n(.*?)```").FindSubmatch(page)
	if ops == nil {
		t.Fatal("docs/api.md has no usage and audit block")
	}
	script := string(m[1]) + "\n" + string(ops[1])
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
		// Usage, audit and what is in flight: Bob's run on Alice's agent is
		// Alice's to see, not Bob's.
		`{"name":"reviewer","tokens":{"input":20,"output":10,"total":30},"calls":2,"runs":1}`,
		`{"name":"Bob","days":[{"day":"` + time.Now().UTC().Format(time.DateOnly) + `","total":30}]}`,
		`{"scope":"own","groups":[]}`,
		`"code":"invalid_input","message":"group_by must be one of agent, user, model (got \"day\")"`,
		`{"cursor":"1","kind":"account","type":"account_created"}`,
		`{"cursor":"2","kind":"account","type":"login"}`,
		`11 account`, `9 trace`,
		`"code":"forbidden"`,
		"0",
		`{"agent_name":"reviewer","owner":"Alice","budget":{"tokens":0,"used":30,"reserved":0,"left":null},"open_reservations":0}`,
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

// TestREADMEFirstWalk runs the README's first walk: its two lines (the
// scripted model on the address they give, then the server with the
// environment they give, on free ports here), then its conversation through
// the API: the agent asked to write hello.txt leaves one file waiting for
// review, and approving it puts the file in the workspace.
func TestREADMEFirstWalk(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## A first walk.*?```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no first walk")
	}
	lines := strings.Split(strings.TrimSpace(string(m[1])), "\n")
	const modelLine = "go run ./internal/modeltest/fakemodel -addr 127.0.0.1:11435 &"
	if len(lines) != 2 || lines[0] != modelLine || !strings.HasSuffix(lines[1], " make run") {
		t.Fatalf("the first walk is no longer %q then an environment and make run: update this test\n%s", modelLine, m[1])
	}

	// The model, as the first line starts it, on a free port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	// (go build, then the program: what go run does, leaving no process of
	// its own between the test and the model.)
	bin := filepath.Join(t.TempDir(), "fakemodel")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/modeltest/fakemodel").CombinedOutput(); err != nil {
		t.Fatalf("go build fakemodel: %v\n%s", err, out)
	}
	model := exec.Command(bin, "-addr", addr)
	stdout, err := model.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := model.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Process.Kill(); model.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, "fakemodel listening http://"+addr+"/v1") {
		t.Fatalf("fakemodel said %q (%v)", line, err)
	}

	// The server, with the second line's environment.
	var env []string
	for _, f := range strings.Fields(strings.TrimSuffix(lines[1], " make run")) {
		env = append(env, strings.Replace(f, "127.0.0.1:11435", addr, 1))
	}
	srv := startServer(t, reachableTempDir(t), env...)
	c, agentID := signedIn(t, srv)
	r := c.send(agentID, "please write hello.txt")
	if r.Status != "completed" || r.ChangeSetID == nil {
		t.Fatalf("run = %+v\n%s", r, srv.Log())
	}
	var agents struct {
		Items []struct {
			PendingChanges int `json:"pending_changes"`
		}
	}
	c.do("GET", "/agents", nil, http.StatusOK, &agents)
	if len(agents.Items) != 1 || agents.Items[0].PendingChanges != 1 {
		t.Fatalf("agents = %+v, want one with 1 change set waiting", agents)
	}
	c.do("POST", "/changes/"+*r.ChangeSetID+"/approve", nil, http.StatusOK, nil)
	var file struct{ Content string }
	c.do("GET", "/agents/"+agentID+"/files?path=hello.txt", nil, http.StatusOK, &file)
	if file.Content == "" {
		t.Fatal("hello.txt is empty or missing after the approval")
	}
}
