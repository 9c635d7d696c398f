package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"corral/internal/gittest"
	"corral/internal/kerneltest"
	"corral/internal/sandbox"
)

// TestSplitPushLeavesNoCredential: on a sandbox node, an agent's
// repository is cloned with its owner's credential, a file is committed
// and pushed with it. Then the node's whole reachable heap (a runtime
// heap dump after two collections) and its data directory hold no copy
// of the credential in any form git or the relay could have left, while
// the same scan finds the node's own credential, which the node keeps.
func TestSplitPushLeavesNoCredential(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "the node needs the sandbox: %v", err)
	}
	const user, secret = "pusher", "ghp_split-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	git := gittest.New(t, gittest.Options{User: user, Password: secret})
	controlData, nodeData := reachableTempDir(t), reachableTempDir(t)
	ctl := startServer(t, controlData, "CORRAL_ROLE=control", "CORRAL_GIT_CA_FILE="+git.CAFile)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"node", "token", "--data", controlData}, nil, &out, &errOut, noenv); code != 0 {
		t.Fatalf("node token: %d %s", code, errOut.String())
	}
	dump := filepath.Join(t.TempDir(), "node.heap")
	node := startNode(t, nodeData, ctl.base, strings.TrimSpace(out.String()),
		"CORRAL_GIT_CA_FILE="+git.CAFile, "CORRAL_TEST_HEAPDUMP="+dump)

	c, agentID := signedIn(t, ctl)
	c.nodesReady(1)
	u, _ := url.Parse(git.URL())
	c.do("POST", "/credentials", map[string]string{"name": "git", "host": u.Host, "username": user, "secret": secret}, http.StatusCreated, nil)
	c.do("PUT", "/agents/"+agentID+"/repository", map[string]string{"url": git.URL()}, http.StatusAccepted, nil)
	var repo struct{ Status, Error string }
	waitFor(t, "the clone on the node", func() bool {
		c.do("GET", "/agents/"+agentID+"/repository", nil, http.StatusOK, &repo)
		return repo.Status != "cloning"
	})
	if repo.Status != "ready" {
		t.Fatalf("clone = %+v\ncontrol:\n%s\nnode:\n%s", repo, ctl.Log(), node.Log())
	}
	req, _ := http.NewRequest("PUT", c.base+"/api/agents/"+agentID+"/files?path=notes.txt", strings.NewReader("written on control, committed on the node\n"))
	res, err := c.c.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("upload = %v, %v", res, err)
	}
	res.Body.Close()
	var pushed struct {
		Head    string
		Commits int
	}
	c.do("POST", "/agents/"+agentID+"/repository/push", map[string]string{"branch": "corral/split"}, http.StatusOK, &pushed)
	if pushed.Commits != 1 || git.Head(t, "corral/split") != pushed.Head ||
		git.Show(t, "corral/split", "notes.txt") != "written on control, committed on the node\n" {
		t.Fatalf("push = %+v; the server's branch is at %s", pushed, git.Head(t, "corral/split"))
	}
	git.Fsck(t)

	// Every form the credential could take on the node: as control sent
	// it, and as git's Authorization header carried it.
	forms := map[string][]byte{
		"the secret":                []byte(secret),
		"the basic auth token":      []byte(base64.StdEncoding.EncodeToString([]byte(user + ":" + secret))),
		"the secret, base64":        []byte(base64.StdEncoding.EncodeToString([]byte(secret))),
		"half the secret (a split)": []byte(secret[len(secret)/2:]),
	}
	if err := node.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node's heap dump", func() bool { return strings.Contains(node.Log(), "test: heap dumped") })
	heap, err := os.ReadFile(dump)
	if err != nil || !strings.Contains(node.Log(), "heap dumped to "+dump+": <nil>") {
		t.Fatalf("the heap dump: %v\n%s", err, node.Log())
	}
	// The scan can see a secret the node does hold: its node credential,
	// which it keeps in memory to renew it and dial again.
	own, err := os.ReadFile(filepath.Join(nodeData, "node.credential"))
	if err != nil || len(bytes.TrimSpace(own)) == 0 {
		t.Fatalf("the node's credential file: %v", err)
	}
	if !bytes.Contains(heap, bytes.TrimSpace(own)) {
		t.Fatalf("the heap dump (%d bytes) lacks the node's own credential: the scan would prove nothing", len(heap))
	}
	for what, form := range forms {
		if i := bytes.Index(heap, form); i >= 0 {
			t.Errorf("the node's reachable heap holds %s at byte %d of its dump: %q", what, i, heap[max(0, i-64):min(len(heap), i+len(form)+64)])
		}
	}
	filepath.WalkDir(nodeData, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for what, form := range forms {
			if bytes.Contains(b, form) {
				t.Errorf("%s on the node holds %s", p, what)
			}
		}
		return nil
	})
}
