//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
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
	"corral/internal/poll"
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
	// Made at run time: a constant would sit in the test binary's own
	// read-only data, which the node (this binary, run again) maps.
	const user = "pusher"
	secret := "ghp_split-" + randomHex(t)
	git := gittest.New(t, gittest.Options{User: user, Password: secret})
	controlData, nodeData := reachableTempDir(t), reachableTempDir(t)
	ctl := startServer(t, controlData, "CORRAL_ROLE=control", "CORRAL_GIT_CA_FILE="+git.CAFile)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"node", "token", "--data", controlData}, nil, &out, &errOut, noenv); code != 0 {
		t.Fatalf("node token: %d %s", code, errOut.String())
	}
	dump := filepath.Join(t.TempDir(), "node.heap")
	node := startNode(t, nodeData, ctl.base, strings.TrimSpace(out.String()),
		"CORRAL_GIT_CA_FILE="+git.CAFile, "CORRAL_EGRESS_ALLOW_PRIVATE=127.0.0.0/8", "CORRAL_TEST_HEAPDUMP="+dump)

	c, agentID := signedIn(t, ctl)
	c.nodesReady(1)
	u, _ := url.Parse(git.URL())
	var cred struct{ ID string }
	c.do("POST", "/credentials", map[string]any{"name": "git", "host": u.Host, "username": user, "secret": secret, "repositories": []string{git.URL()}}, http.StatusCreated, &cred)
	c.do("PUT", "/agents/"+agentID+"/repository", map[string]string{"url": git.URL(), "credential_id": cred.ID}, http.StatusAccepted, nil)
	var repo struct{ Status, Error string }
	poll.Until(t, "the clone on the node", func() bool {
		c.do("GET", "/agents/"+agentID+"/repository", nil, http.StatusOK, &repo)
		return repo.Status != "cloning"
	})
	if repo.Status != "ready" {
		t.Fatalf("clone = %+v\ncontrol:\n%s\nnode:\n%s", repo, ctl.Log(), node.Log())
	}
	own, err := os.ReadFile(filepath.Join(nodeData, "node.credential"))
	if err != nil || len(bytes.TrimSpace(own)) == 0 {
		t.Fatalf("the node's credential file: %v", err)
	}
	scanNode(t, "after the clone", node.cmd.Process.Pid, bytes.TrimSpace(own), credentialForms(user, secret))
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

	forms := credentialForms(user, secret)
	scanNode(t, "after the push", node.cmd.Process.Pid, bytes.TrimSpace(own), forms)
	if err := node.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the node's heap dump", func() bool { return strings.Contains(node.Log(), "test: heap dumped") })
	heap, err := os.ReadFile(dump)
	if err != nil || !strings.Contains(node.Log(), "heap dumped to "+dump+": <nil>") {
		t.Fatalf("the heap dump: %v\n%s", err, node.Log())
	}
	// The scan can see a secret the node does hold: its node credential,
	// which it keeps in memory to renew it and dial again.
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

// credentialForms are the forms a code-host credential could take in a
// node's memory: as control sent it, base64 in either alphabet (a JSON
// []byte, a Basic token), the user:secret pair git's Authorization header
// carries, the helper protocol's line, and half of it (a split buffer).
func credentialForms(user, secret string) map[string][]byte {
	pair := []byte(user + ":" + secret)
	return map[string][]byte{
		"the secret":                 []byte(secret),
		"the basic auth token":       []byte(base64.StdEncoding.EncodeToString(pair)),
		"the basic auth token, raw":  []byte(base64.RawStdEncoding.EncodeToString(pair)),
		"the secret, base64":         []byte(base64.StdEncoding.EncodeToString([]byte(secret))),
		"the secret, base64 URL":     []byte(base64.RawURLEncoding.EncodeToString([]byte(secret))),
		"the helper protocol's line": []byte("password=" + secret[:8]),
		"half the secret (a split)":  []byte(secret[len(secret)/2:]),
		"the secret's first half":    []byte(secret[:len(secret)/2]),
	}
}

// scanNode reads every readable mapping of the node process's memory
// (/proc/PID/mem: heap, stacks, the runtime's free spans, buffers of every
// library, not only what the collector can reach) and fails the test for
// each form of the credential it finds. The same scan must find own, a
// secret the node does keep (its node credential): a scan that finds
// nothing proves nothing.
func scanNode(t *testing.T, when string, pid int, own []byte, forms map[string][]byte) {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	all := map[string][]byte{"own": own}
	for k, v := range forms {
		all[k] = v
	}
	found := map[string]int{}
	var scanned int64
	const chunk = 1 << 20
	buf := make([]byte, chunk+4096)
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1][0] != 'r' || strings.HasSuffix(line, "[vvar]") || strings.HasSuffix(line, "[vsyscall]") {
			continue
		}
		var start, end uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &start, &end); err != nil {
			continue
		}
		// Chunks overlap by 4 KiB, so a form across a boundary is seen.
		for off := start; off < end; off += chunk {
			n := min(uint64(len(buf)), end-off)
			got, _ := mem.ReadAt(buf[:n], int64(off))
			scanned += int64(got)
			for what, form := range all {
				found[what] += bytes.Count(buf[:got], form)
			}
		}
	}
	if found["own"] == 0 {
		t.Fatalf("%s: the scan of the node's memory (%d MiB) lacks the node's own credential: it would prove nothing", when, scanned>>20)
	}
	for what := range forms {
		if found[what] > 0 {
			t.Errorf("%s: the node's memory holds %s %d times", when, what, found[what])
		}
	}
	t.Logf("%s: scanned %d MiB of the node's memory", when, scanned>>20)
}
