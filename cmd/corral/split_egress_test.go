//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/sandbox"
)

// TestSplitEgressLeavesNoSecret: in the split roles a run on a sandbox
// node reaches an allowed host through the egress proxy, which runs on
// control: the node carries the session's connection over its relay, and
// control adds the agent's secret at the edge. The upstream gets the
// secret; the node's whole memory holds no copy of it.
func TestSplitEgressLeavesNoSecret(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "the node needs the sandbox: %v", err)
	}
	// Made at run time: a constant would sit in the test binary's own
	// read-only data, which the node (this binary, run again) maps.
	secret := "egress-split-" + randomHex(t)
	// 127.0.0.2: not in the sandbox's NO_PROXY (127.0.0.1, localhost), so
	// curl inside goes through the proxy; control may reach it with
	// --egress-allow-private.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	var authorized, refused atomic.Int64
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != secret {
			refused.Add(1)
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		fmt.Fprint(w, "egress ok")
	})}
	go up.Serve(ln)
	t.Cleanup(func() { up.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		if r.Last().Role == "user" {
			return modeltest.Calls(modeltest.ShellCall("c1", fmt.Sprintf("curl -s -w ' code=%%{http_code}' http://127.0.0.2:%d/hello", port)))
		}
		return modeltest.Text("fetched")
	})
	defer model.Close()
	controlData, nodeData := reachableTempDir(t), reachableTempDir(t)
	ctl := startServer(t, controlData, "CORRAL_ROLE=control", "CORRAL_MODEL_BASE_URL="+model.URL(), "CORRAL_MODEL=scripted",
		"CORRAL_EGRESS_ALLOW_PRIVATE=127.0.0.0/8")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"node", "token", "--data", controlData}, nil, &out, &errOut, noenv); code != 0 {
		t.Fatalf("node token: %d %s", code, errOut.String())
	}
	node := startNode(t, nodeData, ctl.base, strings.TrimSpace(out.String()))
	c, agentID := signedIn(t, ctl)
	c.nodesReady(1)
	c.do("PATCH", "/agents/"+agentID, map[string]any{"policy": map[string]any{"network": "allowlist",
		"egress": map[string]any{"allow": []map[string]any{{"host": "127.0.0.2", "ports": []int{port}}}}}}, http.StatusOK, nil)
	c.do("POST", "/agents/"+agentID+"/secrets", map[string]string{"name": "token", "host": "127.0.0.2",
		"header": "X-Token", "value": secret}, http.StatusCreated, nil)

	r := c.send(agentID, "fetch it")
	if r.Status != "completed" {
		t.Fatalf("run = %+v\ncontrol:\n%s\nnode:\n%s", r, ctl.Log(), node.Log())
	}
	reqs := model.Requests()
	if got := reqs[len(reqs)-1].Last().Content; !strings.Contains(got, "egress ok code=200") || authorized.Load() != 1 || refused.Load() != 0 {
		t.Fatalf("inside the run: %q; the upstream authorized %d, refused %d\ncontrol:\n%s", got, authorized.Load(), refused.Load(), ctl.Log())
	}
	own, err := os.ReadFile(filepath.Join(nodeData, "node.credential"))
	if err != nil || len(bytes.TrimSpace(own)) == 0 {
		t.Fatalf("the node's credential file: %v", err)
	}
	scanNode(t, "after the run", node.cmd.Process.Pid, bytes.TrimSpace(own), map[string][]byte{
		"the secret":         []byte(secret),
		"the secret, base64": []byte(base64.StdEncoding.EncodeToString([]byte(secret))),
		"the secret's half":  []byte(secret[len(secret)/2:]),
	})
}
