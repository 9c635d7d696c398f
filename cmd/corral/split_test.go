package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"corral"
	"corral/internal/driver"
	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/poll"
	"corral/internal/sandbox"
	"corral/internal/toolstest"
)

// startNode runs `corral serve --role sandbox` on data, joining control
// with token, env added, and returns once it says it is connected.
func startNode(t testing.TB, data, control, token string, env ...string) *server {
	t.Helper()
	return startNamedNode(t, "node-a", data, control, token, env...)
}

// startNamedNode is startNode for a node called name.
func startNamedNode(t testing.TB, name, data, control, token string, env ...string) *server {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--role", "sandbox", "--control", control, "--data", data, "--node-name", name)
	cmd.Env = append(append(os.Environ(), "CORRAL_TEST_AS_MAIN=1", "CORRAL_JOIN="+token), env...)
	if tools := toolstest.Dir(); tools != "" {
		cmd.Args = append(cmd.Args, "--tools-dir", tools)
	}
	return startProcess(t, cmd, "the node never connected", func(line string) bool {
		return strings.Contains(line, "connected to control")
	})
}

// TestSplitRoles: a control (database, keys, gateway, no sandbox) and a
// sandbox node (no database, no keys, no port but its metrics address) as
// two processes; the node joins with a one-time token and dials control's
// relay; a run of an agent is placed on the node and completes there, its
// tool call in the node's sandbox and its change set back on control; the
// node holds the workspace and control none; an admin sees the node. Both
// answer /healthz and /readyz on their metrics addresses: control is ready
// once its node is, the node is not while control is away.
func TestSplitRoles(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		for _, m := range r.Messages {
			if m.Role == "user" && strings.Contains(m.Content, "say hello") {
				return modeltest.Text("hello from the node")
			}
		}
		if r.Last().Role == "user" {
			return modeltest.Calls(modeltest.ShellCall("c1", "echo made on the node > made.txt && echo done"))
		}
		return modeltest.Text("made.txt is made")
	})
	defer model.Close()
	controlData, nodeData := reachableTempDir(t), reachableTempDir(t)
	// A fixed address, so the node finds control again after its restart.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctlMetrics, nodeMetrics := freeAddr(t), freeAddr(t)
	ctlEnv := []string{"CORRAL_ROLE=control", "CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted", "CORRAL_METRICS_ADDR=" + ctlMetrics}
	ctl := startServerAt(t, addr, controlData, ctlEnv...)
	ready(t, "control without a node", ctlMetrics, http.StatusServiceUnavailable, `"sandbox":"no sandbox node is connected and ready`)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"node", "token", "--data", controlData}, nil, &out, &errOut, noenv); code != 0 {
		t.Fatalf("node token: %d %s", code, errOut.String())
	}
	// One session at a time on the node: the runs here take turns, and
	// the subtest on room sees it full.
	node := startNode(t, nodeData, ctl.base, strings.TrimSpace(out.String()), "CORRAL_MAX_SESSIONS=1", "CORRAL_METRICS_ADDR="+nodeMetrics)

	c, agentID := signedIn(t, ctl) // the first account: an admin
	c.nodesReady(1)
	ready(t, "the node", nodeMetrics, http.StatusOK, `"relay":"ok"`)
	ready(t, "control", ctlMetrics, http.StatusOK, `"sandbox":"ok"`)
	// A draining node is no node to run on.
	var nodeList struct{ Items []struct{ ID string } }
	c.do("GET", "/nodes", nil, http.StatusOK, &nodeList)
	c.do("POST", "/nodes/"+nodeList.Items[0].ID+"/drain", nil, http.StatusNoContent, nil)
	ready(t, "control with its node draining", ctlMetrics, http.StatusServiceUnavailable, `"sandbox":"no sandbox node is connected and ready`)
	c.do("DELETE", "/nodes/"+nodeList.Items[0].ID+"/drain", nil, http.StatusNoContent, nil)
	ready(t, "control with its node back", ctlMetrics, http.StatusOK, `"sandbox":"ok"`)
	for _, m := range []struct{ addr, want string }{
		{nodeMetrics + "/healthz", `{"status":"ok"}`},
		{nodeMetrics + "/metrics", "corral_sandbox_sessions 0"},
		{ctlMetrics + "/metrics", `corral_nodes{status="ready"} 1`},
	} {
		if code, body := get(t, m.addr); code != http.StatusOK || !strings.Contains(body, m.want) {
			t.Fatalf("GET %s = %d, want 200 with %s:\n%.2000s", m.addr, code, m.want, body)
		}
	}
	r := c.send(agentID, "make a file")
	if r.Status != "completed" || r.ChangeSetID == nil {
		t.Fatalf("run = %+v\ncontrol:\n%s\nnode:\n%s", r, ctl.Log(), node.Log())
	}
	var ran struct{ Node string }
	c.do("GET", "/runs/"+r.ID, nil, http.StatusOK, &ran)
	if !strings.HasPrefix(ran.Node, "nod_") {
		t.Fatalf("the run answers node %q, want the node's id", ran.Node)
	}
	if tool := model.Requests()[1].Last(); !strings.Contains(tool.Content, "done") {
		t.Fatalf("the model was told %q", tool.Content)
	}
	var cs struct{ Entries []struct{ Path string } }
	c.do("GET", "/changes/"+*r.ChangeSetID, nil, http.StatusOK, &cs)
	if len(cs.Entries) != 1 || cs.Entries[0].Path != "made.txt" {
		t.Fatalf("change set = %+v", cs)
	}
	var nodes struct {
		Items []struct{ Name, Status string }
	}
	c.do("GET", "/nodes", nil, http.StatusOK, &nodes)
	if len(nodes.Items) != 1 || nodes.Items[0].Name != "node-a" || nodes.Items[0].Status != "ready" {
		t.Fatalf("nodes = %+v", nodes)
	}

	// An agent CLI on the node reaches the gateway, which is on control:
	// its model calls cross the relay, authorized by its run's token there.
	t.Run("an agent CLI through the relayed gateway", func(t *testing.T) {
		cliOnNode(t, c, model, "say hello", "hello from the node", func() string {
			return "control:\n" + ctl.Log() + "\nnode:\n" + node.Log()
		})
	})
	// A terminal: the browser's websocket ends on control, the shell runs
	// in the run's sandbox on the node, the bytes cross the relay.
	t.Run("a terminal through the relay", func(t *testing.T) { terminalOnNode(t, c, agentID) })

	// A node that runs its most sessions takes no new agent: the run of an
	// agent not placed yet fails saying so, and an admin sees the node
	// full; once the session has ended, the agent's next run goes there.
	t.Run("no room on the node", func(t *testing.T) {
		var term struct{ Run runAnswer }
		c.do("POST", "/agents/"+agentID+"/terminal", nil, http.StatusCreated, &term)
		poll.Until(t, "the terminal's run to start", func() bool {
			var r runAnswer
			c.do("GET", "/runs/"+term.Run.ID, nil, http.StatusOK, &r)
			return r.Status == "running"
		})
		var nodes struct {
			Items []struct {
				Runs        int
				MaxSessions int `json:"max_sessions"`
			}
		}
		c.do("GET", "/nodes", nil, http.StatusOK, &nodes)
		if len(nodes.Items) != 1 || nodes.Items[0].Runs != 1 || nodes.Items[0].MaxSessions != 1 {
			t.Fatalf("nodes = %+v, want one running 1 of at most 1", nodes.Items)
		}
		var other struct{ ID string }
		c.do("POST", "/agents", map[string]string{"name": "unplaced"}, http.StatusCreated, &other)
		var posted struct{ Run runAnswer }
		c.do("POST", "/agents/"+other.ID+"/messages", map[string]string{"content": "make a file"}, http.StatusAccepted, &posted)
		var r runAnswer
		poll.Until(t, "the unplaced agent's run to end", func() bool {
			c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &r)
			return r.Status != "admitted" && r.Status != "running"
		})
		if r.Status == "completed" || !strings.Contains(r.Reason, "runs its most sessions (node-a)") {
			t.Fatalf("with the only node full, the run = %+v\ncontrol:\n%s", r, ctl.Log())
		}
		c.do("POST", "/runs/"+term.Run.ID+"/kill", nil, http.StatusAccepted, nil)
		poll.Until(t, "the terminal's run to end", func() bool {
			var r runAnswer
			c.do("GET", "/runs/"+term.Run.ID, nil, http.StatusOK, &r)
			return r.Status == "killed"
		})
		c.do("POST", "/agents/"+other.ID+"/messages", map[string]string{"content": "make a file"}, http.StatusAccepted, &posted)
		poll.Until(t, "the agent's next run to end", func() bool {
			c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &r)
			return r.Status != "admitted" && r.Status != "running"
		})
		if r.Status != "completed" {
			t.Fatalf("once the node had room, the run = %+v\ncontrol:\n%s", r, ctl.Log())
		}
	})

	// Control goes away and comes back: the node dials again, with the
	// credential it keeps, and the agent's next run goes to it.
	crash(ctl)
	ready(t, "the node without control", nodeMetrics, http.StatusServiceUnavailable, `"relay":"not connected to control"`)
	ctl = startServerAt(t, addr, controlData, ctlEnv...)
	poll.Until(t, "the node to connect again", func() bool { return strings.Count(node.Log(), "connected to control") >= 2 })
	c.nodesReady(1)
	ready(t, "the node with control back", nodeMetrics, http.StatusOK, `"relay":"ok"`)
	r = c.send(agentID, "make it again")
	if r.Status != "completed" {
		t.Fatalf("after control's restart the run = %+v\nnode:\n%s", r, node.Log())
	}

	// What each side holds: the workspace and the session on the node;
	// the database and the key on control, and no worktree there.
	for _, p := range []string{"corral.db", "secret.key"} {
		if _, err := os.Stat(filepath.Join(nodeData, p)); err == nil {
			t.Errorf("the node holds %s", p)
		}
		if _, err := os.Stat(filepath.Join(controlData, p)); err != nil {
			t.Errorf("control lacks %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(nodeData, "workspaces", agentID)); err != nil {
		t.Errorf("the node holds no workspace of the agent: %v", err)
	}
	for _, d := range []string{"workspaces", "stages", "sessions"} {
		if m, _ := filepath.Glob(filepath.Join(controlData, d, "*")); len(m) > 0 {
			t.Errorf("control holds %s: %v", d, m)
		}
	}

	// Deleting the agent on control removes what the node held of it: its
	// workspace and its change sets' staged trees.
	var changes struct{ Items []struct{ ID string } }
	c.do("GET", "/agents/"+agentID+"/changes", nil, http.StatusOK, &changes)
	var stages []string
	for _, cs := range changes.Items {
		if _, err := os.Stat(filepath.Join(nodeData, "stages", cs.ID)); err == nil {
			stages = append(stages, filepath.Join(nodeData, "stages", cs.ID))
		}
	}
	if len(stages) == 0 {
		t.Fatal("the node holds no staged tree of the agent's change sets: the deletion would prove nothing")
	}
	c.do("DELETE", "/agents/"+agentID, nil, http.StatusNoContent, nil)
	if _, err := os.Stat(filepath.Join(nodeData, "workspaces", agentID)); !os.IsNotExist(err) {
		t.Errorf("after the agent's deletion the node still holds its workspace (%v)", err)
	}
	for _, st := range stages {
		if _, err := os.Stat(st); !os.IsNotExist(err) {
			t.Errorf("after the agent's deletion the node still holds %s (%v)", st, err)
		}
	}
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// get answers GET http://addrPath with its status and body.
func get(t *testing.T, addrPath string) (int, string) {
	t.Helper()
	res, err := http.Get("http://" + addrPath)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// ready waits until what's /readyz on addr answers status with want in
// its checks.
func ready(t *testing.T, what, addr string, status int, want string) {
	t.Helper()
	var code int
	var body string
	if !poll.Eventually(time.Minute, func() bool {
		code, body = get(t, addr+"/readyz")
		return code == status && strings.Contains(body, want)
	}) {
		t.Fatalf("%s: /readyz = %d %s, want %d with %s", what, code, body, status, want)
	}
}

// TestSplitNodeRestartMidRun: the node is killed (SIGKILL) while a run's
// command sleeps in its sandbox, and started again within the grace: the
// session outlived the node's process, control's calls waited for the
// node and were made again, and the run completes with the command's
// whole output and its file.
func TestSplitNodeRestartMidRun(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	const marker = "sleep 2.7182"
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		if r.Last().Role == "user" {
			return modeltest.Calls(modeltest.ShellCall("c1", "echo before; "+marker+"; echo after > late.txt; echo slept"))
		}
		return modeltest.Text("done")
	})
	defer model.Close()
	controlData, nodeData := reachableTempDir(t), reachableTempDir(t)
	ctl := startServer(t, controlData, "CORRAL_ROLE=control", "CORRAL_MODEL_BASE_URL="+model.URL(), "CORRAL_MODEL=scripted")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"node", "token", "--data", controlData}, nil, &out, &errOut, noenv); code != 0 {
		t.Fatalf("node token: %d %s", code, errOut.String())
	}
	token := strings.TrimSpace(out.String())
	node := startNode(t, nodeData, ctl.base, token)
	c, agentID := signedIn(t, ctl)
	var posted struct{ Run runAnswer }
	c.do("POST", "/agents/"+agentID+"/messages", map[string]string{"content": "sleep on the node"}, http.StatusAccepted, &posted)
	poll.Until(t, "the command to run on the node", func() bool { return len(processesWith(marker)) > 0 })

	crash(node)
	if len(processesWith(marker)) == 0 {
		t.Fatal("the command died with the node's process")
	}
	node = startNode(t, nodeData, ctl.base, token) // the token is used up: the node keeps its credential
	var r runAnswer
	poll.Until(t, "the run to end", func() bool {
		c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &r)
		return r.Status != "admitted" && r.Status != "running"
	})
	if r.Status != "completed" || r.ChangeSetID == nil {
		t.Fatalf("run = %+v\ncontrol:\n%s\nnode:\n%s", r, ctl.Log(), node.Log())
	}
	if tool := model.Requests()[1].Last(); !strings.Contains(tool.Content, `before\nslept\n`) {
		t.Fatalf("the model was told %q, want the command's whole output", tool.Content)
	}
	var cs struct{ Entries []struct{ Path string } }
	c.do("GET", "/changes/"+*r.ChangeSetID, nil, http.StatusOK, &cs)
	if len(cs.Entries) != 1 || cs.Entries[0].Path != "late.txt" {
		t.Fatalf("change set = %+v", cs)
	}
}

// cliOnNode runs a real Codex CLI on a node: its model calls cross the
// relay to the gateway on control, authorized by its run's token there.
// The model answers message with want.
func cliOnNode(t *testing.T, c *httpClient, model *modeltest.Provider, message, want string, logs func() string) {
	t.Helper()
	toolstest.Need(t, driver.Installed(toolstest.Dir(), corral.DriverCodex))
	var cli struct{ ID string }
	c.do("POST", "/agents", map[string]any{"name": "cli", "driver": corral.DriverCodex}, http.StatusCreated, &cli)
	var posted struct{ Run runAnswer }
	c.do("POST", "/agents/"+cli.ID+"/messages", map[string]string{"content": message}, http.StatusAccepted, &posted)
	var r struct {
		runAnswer
		Driver string
	}
	poll.Until(t, "the CLI's run to end", func() bool {
		c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &r)
		return r.Status != "admitted" && r.Status != "running"
	})
	if r.Driver != corral.DriverCodex {
		t.Fatalf("the run was driven by %q, want codex", r.Driver)
	}
	// The CLI's calls came in the Responses API (Codex speaks only it)
	// and were translated by the gateway on control.
	sawCLI := false
	for _, req := range model.Requests() {
		sawCLI = sawCLI || strings.Contains(string(req.Body), message)
	}
	if !sawCLI {
		t.Fatal("the provider never got the CLI's call")
	}
	var msgs struct {
		Items []struct{ Role, Content string }
	}
	c.do("GET", "/agents/"+cli.ID+"/messages", nil, http.StatusOK, &msgs)
	if r.Status != "completed" || len(msgs.Items) != 2 || !strings.Contains(msgs.Items[1].Content, want) {
		t.Fatalf("run = %+v, thread = %+v\n%s", r, msgs.Items, logs())
	}
}

// terminalOnNode opens a terminal run of the agent: the browser's
// websocket ends on control, the shell runs in the run's sandbox on the
// node, the bytes cross the relay. It types a command, sees its answer,
// and kills the run.
func terminalOnNode(t *testing.T, c *httpClient, agentID string) {
	t.Helper()
	var term struct{ Run runAnswer }
	c.do("POST", "/agents/"+agentID+"/terminal", nil, http.StatusCreated, &term)
	poll.Until(t, "the terminal's run to start", func() bool {
		var r runAnswer
		c.do("GET", "/runs/"+term.Run.ID, nil, http.StatusOK, &r)
		if r.Status != "admitted" && r.Status != "running" {
			t.Fatalf("the terminal's run = %+v", r)
		}
		return r.Status == "running"
	})
	u, _ := url.Parse(c.base)
	h := http.Header{}
	for _, k := range c.c.Jar.Cookies(u) {
		h.Add("Cookie", k.Name+"="+k.Value)
	}
	h.Set("Origin", c.base)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(c.base, "http")+"/api/runs/"+term.Run.ID+"/terminal", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.Write(ctx, websocket.MessageBinary, []byte("echo on-the-node-$((6*7)) $(cat /proc/sys/kernel/hostname)\n"))
	var screen strings.Builder
	for !strings.Contains(screen.String(), "on-the-node-42") {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("the terminal's screen %q: %v", screen.String(), err)
		}
		screen.Write(b)
	}
	c.do("POST", "/runs/"+term.Run.ID+"/kill", nil, http.StatusAccepted, nil)
	poll.Until(t, "the terminal's run to end", func() bool {
		var r runAnswer
		c.do("GET", "/runs/"+term.Run.ID, nil, http.StatusOK, &r)
		return r.Status == "killed"
	})
}
