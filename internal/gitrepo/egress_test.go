package gitrepo

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"corral"
	"corral/internal/gittest"
	"corral/internal/sanitize"
)

// TestEgressRefusesPrivateRemotes: a clone or push to a loopback address,
// or a name that resolves only to one, is refused before git runs (no
// request reaches the server) unless the range is allowed.
func TestEgressRefusesPrivateRemotes(t *testing.T) {
	s, allowed := server(t, gittest.Options{})
	refused := allowed
	refused.Egress.AllowPrivate = nil
	port := s.URL()[strings.LastIndex(s.URL(), ":")+1 : strings.LastIndex(s.URL(), "/")]
	for _, url := range []string{s.URL(), "https://localhost:" + port + "/" + gittest.Name, "https://[::1]:" + port + "/" + gittest.Name} {
		before := len(s.Requests())
		dir := filepath.Join(t.TempDir(), "clone")
		err := refused.Clone(context.Background(), url, "", auth(), dir, nil)
		if corral.ErrorCode(err) != corral.EFORBIDDEN || !strings.Contains(corral.ErrorMessage(err), "--egress-allow-private") {
			t.Fatalf("a clone of %s = %v, want forbidden naming --egress-allow-private", url, err)
		}
		if n := len(s.Requests()) - before; n != 0 {
			t.Fatalf("%d requests reached the server", n)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused clone left %s (%v)", dir, err)
		}
	}
	// Allowed, the same clone goes through; a push the policy refuses
	// sends nothing.
	dir := filepath.Join(t.TempDir(), "clone")
	if err := allowed.Clone(context.Background(), s.URL(), "", auth(), dir, nil); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "x")
	before := len(s.Requests())
	if _, err := refused.Push(context.Background(), dir, s.URL(), "feature", auth()); corral.ErrorCode(err) != corral.EFORBIDDEN {
		t.Fatalf("a push to loopback = %v, want forbidden", err)
	}
	if n := len(s.Requests()) - before; n != 0 {
		t.Fatalf("%d requests of the refused push reached the server", n)
	}
}

// TestEgressPinsTheAddress: a name is resolved once and git is told to
// connect to that address (http.curloptResolve), so a second lookup
// cannot send it elsewhere.
func TestEgressPinsTheAddress(t *testing.T) {
	u, _ := sanitize.RepositoryURL("https://localhost:8443/r.git")
	r, err := Config{Egress: loopback}.remote(context.Background(), u, nil)
	if err != nil || r.resolve != "localhost:8443:127.0.0.1" {
		t.Fatalf("remote = %+v, %v; want localhost pinned to 127.0.0.1", r, err)
	}
	cmd, cleanup, err := Config{}.command(context.Background(), "", r, "ls-remote")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if !slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.HasSuffix(kv, "=http.curloptResolve") }) ||
		!slices.Contains(cmd.Env, "GIT_CONFIG_VALUE_"+valueIndex(cmd.Env, "http.curloptResolve")+"=localhost:8443:127.0.0.1") {
		t.Fatalf("git's environment does not pin the address: %q", cmd.Env)
	}
	u, _ = sanitize.RepositoryURL("https://127.0.0.1:8443/r.git")
	if r, err := (Config{Egress: loopback}).remote(context.Background(), u, nil); err != nil || r.resolve != "" {
		t.Fatalf("an address needs no pin: %+v, %v", r, err)
	}
}

// valueIndex is the n of the GIT_CONFIG_KEY_n that names key.
func valueIndex(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "GIT_CONFIG_KEY_") && v == key {
			return strings.TrimPrefix(k, "GIT_CONFIG_KEY_")
		}
	}
	return "?"
}

// TestNetworkFailuresLookAlike: a closed port, a web server that is not
// git, a port that speaks something else, and a git server whose
// certificate git does not trust all answer one message, so that answers
// cannot tell which ports of a host are open; it names --git-ca-file,
// the fix for the last.
func TestNetworkFailuresLookAlike(t *testing.T) {
	s, cfg := server(t, gittest.Options{})
	// A web server on a port of the same host (its certificate is the
	// one the test's git server has, which git trusts), that is not git.
	web := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "an admin console", http.StatusBadGateway)
	}))
	defer web.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
			c.Close()
		}
	}()
	// The git server itself, by a Corral that was not given its CA.
	noCA := cfg
	noCA.CAFile = ""
	var msgs []string
	for _, url := range []string{"https://127.0.0.1:1/r.git", web.URL + "/r.git", "https://" + ln.Addr().String() + "/r.git", s.URL()} {
		c := cfg
		if url == s.URL() {
			c = noCA
		}
		err := c.Clone(context.Background(), url, "", nil, filepath.Join(t.TempDir(), "c"), nil)
		if corral.ErrorCode(err) != corral.EUNAVAIL {
			t.Fatalf("a clone of %s = %v, want unavailable", url, err)
		}
		msgs = append(msgs, corral.ErrorMessage(err))
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] || msgs[2] != msgs[3] || msgs[0] != msgUnreachable {
		t.Fatalf("the answers differ: %q", msgs)
	}
	if !strings.Contains(msgs[3], "--git-ca-file (CORRAL_GIT_CA_FILE)") {
		t.Fatalf("a certificate git does not trust answers %q, which does not name --git-ca-file", msgs[3])
	}
}
