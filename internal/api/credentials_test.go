package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"corral/internal/api"
)

// apiCredSecret is distinctive so that any copy of it is found.
const apiCredSecret = "glpat-SECRET-d00d-ff-never-answered-91b2"

// lockedBuffer is a log sink shared by the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestCredentialsAPI(t *testing.T) {
	var logs lockedBuffer
	e := newEnv(t, envOptions{api: api.Config{Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}})
	alice := e.signup("alice@example.com", "Alice")
	bob := e.signup("bob@example.com", "Bob")

	body := map[string]any{"name": "work", "host": "GitLab.example.com:443", "username": "alice", "secret": apiCredSecret,
		"repositories": []string{"https://gitlab.example.com/team/app.git", "gitlab.example.com/team/app", "GitLab.example.com/lib/*/"}}
	var created api.CredentialView
	alice.do("POST", "/api/credentials", body).want(http.StatusCreated).decode(&created)
	if created.ID == "" || created.Name != "work" || created.Host != "gitlab.example.com" || created.Username != "alice" || created.CreatedAt == "" ||
		!reflect.DeepEqual(created.Repositories, []string{"gitlab.example.com/team/app", "gitlab.example.com/lib/*"}) {
		t.Fatalf("POST /api/credentials = %+v, want work for gitlab.example.com as alice, for team/app and lib/*", created)
	}
	if got := alice.do("POST", "/api/credentials", body); got.status != http.StatusConflict {
		t.Fatalf("a second credential named work = %d %s, want 409", got.status, got.body)
	}
	bob.do("POST", "/api/credentials", body).want(http.StatusCreated) // names are per person

	refused := []struct {
		name   string
		body   any
		status int
	}{
		{"a host with a scheme", map[string]string{"name": "x", "host": "https://github.com", "username": "a", "secret": apiCredSecret}, 400},
		{"no secret", map[string]string{"name": "x", "host": "github.com", "username": "a", "secret": ""}, 400},
		{"a secret with a line break", map[string]string{"name": "x", "host": "github.com", "username": "a", "secret": apiCredSecret + "\nx"}, 400},
		{"a secret over 4096 bytes", map[string]string{"name": "x", "host": "github.com", "username": "a", "secret": apiCredSecret + strings.Repeat("s", 4096)}, 413},
		{"a bad name", map[string]string{"name": "../x", "host": "github.com", "username": "a", "secret": apiCredSecret}, 400},
		{"an unknown field", map[string]string{"name": "x", "host": "github.com", "username": "a", "secret": apiCredSecret, "password": apiCredSecret}, 400},
		{"a secret of the wrong type", map[string]any{"name": "x", "host": "github.com", "username": "a", "secret": []string{apiCredSecret}}, 400},
		{"a repository on another host", map[string]any{"name": "x", "host": "github.com", "username": "a", "secret": apiCredSecret, "repositories": []string{"gitlab.com/a/b"}}, 400},
		{"a repository with no path", map[string]any{"name": "x", "host": "github.com", "username": "a", "secret": apiCredSecret, "repositories": []string{"github.com"}}, 400},
		{"a repository with ..", map[string]any{"name": "x", "host": "github.com", "username": "a", "secret": apiCredSecret, "repositories": []string{"github.com/a/../b"}}, 400},
		{"a malformed pattern", map[string]any{"name": "x", "host": "github.com", "username": "a", "secret": apiCredSecret, "repositories": []string{"github.com/a/[b"}}, 400},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			if got := alice.do("POST", "/api/credentials", c.body); got.status != c.status {
				t.Fatalf("POST /api/credentials = %d %s, want %d", got.status, got.body, c.status)
			}
		})
	}

	var mine api.List[api.CredentialView]
	alice.do("GET", "/api/credentials", nil).want(http.StatusOK).decode(&mine)
	if len(mine.Items) != 1 || !reflect.DeepEqual(mine.Items[0], created) {
		t.Fatalf("GET /api/credentials as alice = %+v, want only %+v", mine.Items, created)
	}
	// Only its owner changes what it is for; a pattern is checked as at
	// creation.
	path := "/api/credentials/" + created.ID
	notMine := bob.do("PATCH", path, map[string]any{"repositories": []string{"gitlab.example.com/bob/*"}})
	if notMine.status != http.StatusNotFound {
		t.Fatalf("PATCH of alice's credential by bob = %d %s, want 404", notMine.status, notMine.body)
	}
	alice.do("PATCH", path, map[string]any{"repositories": []string{"github.com/a/b"}}).want(http.StatusBadRequest)
	alice.do("PATCH", path, map[string]any{}).want(http.StatusBadRequest)
	var patched api.CredentialView
	alice.do("PATCH", path, map[string]any{"repositories": []string{"gitlab.example.com/team/*"}}).want(http.StatusOK).decode(&patched)
	if !reflect.DeepEqual(patched.Repositories, []string{"gitlab.example.com/team/*"}) || patched.ID != created.ID {
		t.Fatalf("PATCH = %+v", patched)
	}
	var theirs api.List[api.CredentialView]
	bob.do("GET", "/api/credentials", nil).want(http.StatusOK).decode(&theirs)
	if len(theirs.Items) != 1 || theirs.Items[0].ID == created.ID {
		t.Fatalf("GET /api/credentials as bob = %+v, want only bob's own", theirs.Items)
	}

	// Another person's credential answers exactly like a missing one.
	hidden := bob.do("DELETE", "/api/credentials/"+created.ID, nil)
	missing := bob.do("DELETE", "/api/credentials/crd_doesnotexist0000000000", nil)
	if hidden.status != http.StatusNotFound || !bytes.Equal(hidden.body, missing.body) {
		t.Fatalf("DELETE of alice's credential by bob = %d %s, missing = %d %s: want identical 404s", hidden.status, hidden.body, missing.status, missing.body)
	}
	alice.do("DELETE", "/api/credentials/"+created.ID, nil).want(http.StatusNoContent)
	alice.do("DELETE", "/api/credentials/"+created.ID, nil).want(http.StatusNotFound)
	alice.do("GET", "/api/credentials", nil).want(http.StatusOK).decode(&mine)
	if len(mine.Items) != 0 {
		t.Fatalf("after delete, GET /api/credentials = %+v, want none", mine.Items)
	}

	// The database holds ciphertext only, bound to the row.
	var sealed []byte
	if err := e.rawDB(t).QueryRow(`SELECT sealed FROM credentials WHERE user_id = ?`, bob.user.ID).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte(apiCredSecret)) {
		t.Fatal("the database holds the secret in the clear")
	}

	assertAbsent(t, e, logs.String(), apiCredSecret, sealed)
}

// assertAbsent: neither the secret nor its sealed form (in any usual
// encoding) is in any answer the env gave or in the log.
func assertAbsent(t *testing.T, e *env, log, secret string, sealed []byte) {
	t.Helper()
	needles := [][]byte{[]byte(secret), []byte(base64.StdEncoding.EncodeToString([]byte(secret))),
		[]byte(hex.EncodeToString(sealed)), []byte(base64.StdEncoding.EncodeToString(sealed))}
	e.mu.Lock()
	bodies := e.bodies
	e.mu.Unlock()
	if len(bodies) < 10 || log == "" {
		t.Fatalf("%d answers and %d bytes of log recorded: the check would prove nothing", len(bodies), len(log))
	}
	for _, b := range bodies {
		for _, n := range needles {
			if bytes.Contains(b, n) {
				t.Fatalf("an answer carries the credential (%q): %s", n[:8], b)
			}
		}
	}
	for _, n := range needles {
		if strings.Contains(log, string(n)) {
			t.Fatalf("the log carries the credential (%q)", n[:8])
		}
	}
}

// TestCredentialsUnavailableWithoutKey: an API given no credentials
// service answers 503, never a crash.
func TestCredentialsUnavailableWithoutKey(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.app
	e.serve(api.New(api.Config{}, api.Services{Accounts: a.Accounts, Agents: a.Agents, Decisions: a.Decisions, Files: a.Files, Repositories: a.Repositories, Runs: a.Runs}))
	alice := e.signup("alice@example.com", "Alice")
	for _, r := range []struct{ method, path string }{{"GET", "/api/credentials"}, {"POST", "/api/credentials"}, {"DELETE", "/api/credentials/crd_x"}} {
		if got := alice.do(r.method, r.path, map[string]string{}); got.status != http.StatusServiceUnavailable {
			t.Errorf("%s %s without credentials = %d %s, want 503", r.method, r.path, got.status, got.body)
		}
	}
}
