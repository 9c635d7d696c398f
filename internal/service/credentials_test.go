package service

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/secrets"
	"corral/internal/secrets/secrettest"
	"corral/internal/store"
)

// credSecret is distinctive so that any copy of it, anywhere, is found.
const credSecret = "ghp_SECRET-c0ffee-never-show-me-7f3a"

// recordingHandler keeps every log record, rendered, for the no-secrets
// check.
type recordingHandler struct {
	mu    *sync.Mutex
	lines *[]string
	attrs []slog.Attr
}

func newRecorder() (*slog.Logger, func() []string) {
	h := recordingHandler{mu: &sync.Mutex{}, lines: new([]string)}
	return slog.New(h), func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return append([]string(nil), *h.lines...)
	}
}

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value.Resolve())
		return true
	})
	h.mu.Lock()
	*h.lines = append(*h.lines, b.String())
	h.mu.Unlock()
	return nil
}
func (h recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}
func (h recordingHandler) WithGroup(string) slog.Handler { return h }

type credEnv struct {
	db            *store.DB
	dbPath        string
	creds         *Credentials
	logs          func() []string
	owner, editor corral.User
	agent         corral.Agent
	errs          []error // every error the test saw, for the no-secrets check
}

func newCredEnv(t *testing.T) *credEnv {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "corral.db")
	db, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	key, _, err := secrets.LoadKeyFile(filepath.Join(dir, secrets.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := newRecorder()
	e := &credEnv{db: db, dbPath: dbPath, logs: logs}
	cfg := Config{Log: log, Now: func() time.Time { return time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) }}
	e.creds = NewCredentials(db, key, cfg)
	for i, u := range []*corral.User{&e.owner, &e.editor} {
		if *u, err = db.CreateUser(ctx, corral.NewUser{Email: fmt.Sprintf("u%d@example.com", i), Name: fmt.Sprint("user ", i), PasswordHash: "$argon2id$x"}); err != nil {
			t.Fatal(err)
		}
	}
	name := "pusher"
	if e.agent, err = NewAgents(AgentsDeps{Store: db}, cfg).Create(ctx, e.owner, AgentInput{Name: &name}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutGrant(ctx, e.agent.ID, e.editor.ID, corral.LevelEditor, time.Now(), ""); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *credEnv) seen(err error) error {
	if err != nil {
		e.errs = append(e.errs, err)
	}
	return err
}

// assertNoSecret: no error the test met (in full, internal causes
// included) and no log line holds the secret.
func (e *credEnv) assertNoSecret(t *testing.T) {
	t.Helper()
	if len(e.errs) == 0 {
		t.Fatal("no errors recorded: the check would prove nothing")
	}
	for _, err := range e.errs {
		for _, s := range []string{err.Error(), fmt.Sprintf("%+v %#v", err, err), corral.ErrorMessage(err)} {
			if strings.Contains(s, credSecret) {
				t.Errorf("an error carries the secret: %s", s)
			}
		}
	}
	for _, l := range e.logs() {
		if strings.Contains(l, credSecret) {
			t.Errorf("a log line carries the secret: %s", l)
		}
	}
}

func TestCredentialCreateValidates(t *testing.T) {
	e := newCredEnv(t)
	ctx := context.Background()
	cases := []struct {
		name                          string
		cname, host, username, secret string
		code                          string // "" when accepted
		wantHost                      string
	}{
		{"a plain host", "gh", "github.com", "alice", credSecret, "", "github.com"},
		{"upper case, :443 and a trailing dot", "gh2", "GitHub.COM.:443", "alice", credSecret, "", "github.com"},
		{"a port", "own", "git.example.org:8443", "alice", credSecret, "", "git.example.org:8443"},
		{"an IPv4 address", "ip4", "10.0.0.5", "alice", credSecret, "", "10.0.0.5"},
		{"an IPv4 address and port", "ip4p", "10.0.0.5:3000", "alice", credSecret, "", "10.0.0.5:3000"},
		{"a bare IPv6 address", "ip6", "::1", "alice", credSecret, "", "[::1]"},
		{"an IPv6 address and port", "ip6p", "[::1]:8443", "alice", credSecret, "", "[::1]:8443"},
		{"an internationalised name", "idn", "bücher.example", "alice", credSecret, "", "xn--bcher-kva.example"},
		{"a bad name", "a/b", "github.com", "alice", credSecret, corral.ENAME, ""},
		{"a scheme", "s", "https://github.com", "alice", credSecret, corral.EINVALID, ""},
		{"a path", "p", "github.com/alice", "alice", credSecret, corral.EINVALID, ""},
		{"userinfo", "ui", "alice@github.com", "alice", credSecret, corral.EINVALID, ""},
		{"an empty host", "eh", "", "alice", credSecret, corral.EINVALID, ""},
		{"a space in the host", "sh", "git hub.com", "alice", credSecret, corral.EINVALID, ""},
		{"port 0", "p0", "github.com:0", "alice", credSecret, corral.EINVALID, ""},
		{"port 65536", "pbig", "github.com:65536", "alice", credSecret, corral.EINVALID, ""},
		{"an empty port", "pe", "github.com:", "alice", credSecret, corral.EINVALID, ""},
		{"a label starting with a hyphen", "hy", "-github.com", "alice", credSecret, corral.EINVALID, ""},
		{"a malformed IPv4", "bad4", "1.2.3", "alice", credSecret, corral.EINVALID, ""},
		{"an empty username", "eu", "github.com", "", credSecret, corral.EINVALID, ""},
		{"a username with a colon", "cu", "github.com", "a:b", credSecret, corral.EINVALID, ""},
		{"a username with a space", "su", "github.com", "a b", credSecret, corral.EINVALID, ""},
		{"a username with a control character", "ccu", "github.com", "a\x1bb", credSecret, corral.EINVALID, ""},
		{"a 257-byte username", "lu", "github.com", strings.Repeat("u", 257), credSecret, corral.EINVALID, ""},
		{"an empty secret", "es", "github.com", "alice", "", corral.EINVALID, ""},
		{"a secret with a NUL", "ns", "github.com", "alice", credSecret + "\x00", corral.EINVALID, ""},
		{"a secret with a line break", "ls", "github.com", "alice", credSecret + "\nhost=evil.example", corral.EINVALID, ""},
		{"a 4097-byte secret", "bs", "github.com", "alice", credSecret + strings.Repeat("s", 4097-len(credSecret)), corral.ETOOLARGE, ""},
		{"a 4096-byte secret", "ms", "github.com", "alice", credSecret + strings.Repeat("s", 4096-len(credSecret)), "", "github.com"},
		{"a name taken", "gh", "gitlab.com", "alice", credSecret, corral.ECONFLICT, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := e.creds.Create(ctx, e.owner, c.cname, c.host, c.username, c.secret, nil)
			e.seen(err)
			if c.code != "" {
				if corral.ErrorCode(err) != c.code {
					t.Fatalf("Create(%q, %q, %q) = %v, want code %s", c.cname, c.host, c.username, err, c.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create(%q, %q, %q) = %v", c.cname, c.host, c.username, err)
			}
			if got.Host != c.wantHost || got.UserID != e.owner.ID || got.Username != c.username || got.ID == "" {
				t.Fatalf("Create(%q, %q) = %+v, want host %q of %s", c.cname, c.host, got, c.wantHost, e.owner.ID)
			}
		})
	}
	e.assertNoSecret(t)
}

func TestCredentialListDelete(t *testing.T) {
	e := newCredEnv(t)
	ctx := context.Background()
	c, err := e.creds.Create(ctx, e.owner, "gh", "github.com", "alice", credSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := e.creds.List(ctx, e.owner); err != nil || len(l) != 1 || !reflect.DeepEqual(l[0], c) {
		t.Fatalf("List(owner) = %+v, %v; want [%+v]", l, err, c)
	}
	if l, err := e.creds.List(ctx, e.editor); err != nil || len(l) != 0 {
		t.Fatalf("List(editor) = %+v, %v; want nothing", l, err)
	}
	if err := e.seen(e.creds.Delete(ctx, e.editor, c.ID)); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("Delete by another user = %v, want not_found", err)
	}
	if err := e.creds.Delete(ctx, e.owner, c.ID); err != nil {
		t.Fatalf("Delete(own) = %v", err)
	}
	if _, err := e.creds.List(ctx, corral.User{}); corral.ErrorCode(e.seen(err)) != corral.EUNAUTH {
		t.Fatalf("List with no actor = %v, want unauthenticated", err)
	}
}

// TestWithSecret: the owner's credential is opened for fn, zeroed after;
// the editor's own credential is never used for the owner's agent.
func TestWithSecret(t *testing.T) {
	e := newCredEnv(t)
	ctx := context.Background()
	const repo = "https://github.com/acme/app"
	own, err := e.creds.Create(ctx, e.owner, "gh", "github.com", "owner-login", credSecret, []string{"github.com/acme/app"})
	if err != nil {
		t.Fatal(err)
	}
	eds, err := e.creds.Create(ctx, e.editor, "mine", "github.com", "editor-login", "editor-"+credSecret, []string{"github.com/acme/*"})
	if err != nil {
		t.Fatal(err)
	}

	var kept []byte
	var user string
	err = e.creds.WithSecret(ctx, e.agent.ID, own.ID, "https://GitHub.com:443/acme/app.git", func(u string, secret []byte) error {
		user, kept = u, secret // kept aliases the secret: it must be zero afterwards
		if string(secret) != credSecret {
			t.Errorf("fn got secret %q, want the owner's", secret)
		}
		return nil
	})
	if err != nil || user != "owner-login" {
		t.Fatalf("WithSecret = %q, %v; want the owner's credential", user, err)
	}
	if !bytes.Equal(kept, make([]byte, len(credSecret))) {
		t.Fatalf("the secret was not zeroed after fn: %q", kept)
	}
	// Nothing reachable from the service or its store kept a copy.
	if paths := secrettest.Find([]any{e.creds, e.db}, []byte(credSecret)); len(paths) > 0 {
		t.Fatalf("copies of the secret after WithSecret: %q", paths)
	}

	cases := []struct {
		name         string
		credentialID string
		url          string
		code         string
	}{
		{"the editor's credential, by id", eds.ID, repo, corral.ENOTFOUND},
		{"none named: none picked by host", "", repo, corral.ENOTFOUND},
		{"the owner's, for another host", own.ID, "https://gitlab.com/acme/app", corral.ENOTFOUND},
		{"a malformed URL", own.ID, "github.com/acme/app", corral.EINVALID},
		{"a repository it does not name", own.ID, "https://github.com/acme/other", corral.EFORBIDDEN},
		{"the owner's, by id", own.ID, repo, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			called := false
			err := e.seen(e.creds.WithSecret(ctx, e.agent.ID, c.credentialID, c.url, func(u string, secret []byte) error {
				called = true
				if u != "owner-login" {
					t.Errorf("fn got %q's credential, want the owner's", u)
				}
				return nil
			}))
			if corral.ErrorCode(err) != c.code || called != (c.code == "") {
				t.Fatalf("WithSecret = %v (fn called %v), want code %q", err, called, c.code)
			}
		})
	}

	t.Run("an error of fn that repeats the secret is replaced", func(t *testing.T) {
		err := e.seen(e.creds.WithSecret(ctx, e.agent.ID, own.ID, repo, func(_ string, secret []byte) error {
			return fmt.Errorf("git: fatal: https://owner-login:%s@github.com/x.git: 403", secret)
		}))
		if err == nil || strings.Contains(err.Error(), credSecret) || errors.Unwrap(err) != nil {
			t.Fatalf("WithSecret = %v, want an error without the secret and without a cause", err)
		}
	})
	t.Run("an ordinary error of fn passes through", func(t *testing.T) {
		want := corral.Errorf(corral.ECONFLICT, "not a fast-forward")
		if err := e.seen(e.creds.WithSecret(ctx, e.agent.ID, own.ID, repo, func(string, []byte) error { return want })); err != want {
			t.Fatalf("WithSecret = %v, want fn's error %v", err, want)
		}
	})
	e.assertNoSecret(t)
}

// TestWithSecretAfterTheKeyChanged: a server started with another key
// answers with a clear error, not a crash, and says nothing of the secret.
func TestWithSecretAfterTheKeyChanged(t *testing.T) {
	e := newCredEnv(t)
	ctx := context.Background()
	c, err := e.creds.Create(ctx, e.owner, "gh", "github.com", "owner-login", credSecret, []string{"github.com/acme/app"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := secrets.LoadKeyFile(filepath.Join(t.TempDir(), secrets.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := newRecorder()
	restarted := NewCredentials(e.db, other, Config{Log: log})
	called := false
	err = e.seen(restarted.WithSecret(ctx, e.agent.ID, c.ID, "https://github.com/acme/app", func(string, []byte) error { called = true; return nil }))
	var ce *corral.Error
	if called || !errors.As(err, &ce) || ce.Code != corral.EUNAVAIL || !strings.Contains(ce.Message, "secret key") {
		t.Fatalf("WithSecret with another key = %v (fn called %v), want unavailable naming the secret key", err, called)
	}
	if l := logs(); len(l) != 1 || !strings.Contains(l[0], "does not open") {
		t.Fatalf("log = %q, want one warning", l)
	}
	first := e.logs
	e.logs = func() []string { return append(first(), logs()...) }
	e.assertNoSecret(t)
}

// TestSealedSecretBoundToItsRow: a sealed value copied into another row
// (here: the owner's other credential) does not open there.
func TestSealedSecretBoundToItsRow(t *testing.T) {
	e := newCredEnv(t)
	ctx := context.Background()
	a, err := e.creds.Create(ctx, e.owner, "a", "github.com", "owner-login", credSecret, []string{"github.com/acme/app"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.creds.Create(ctx, e.owner, "b", "evil.example", "owner-login", "other-secret", []string{"evil.example/acme/app"})
	if err != nil {
		t.Fatal(err)
	}
	// What someone who can write the database, but has not the key, can do.
	raw, err := sql.Open("sqlite", e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(ctx, `UPDATE credentials SET sealed = (SELECT sealed FROM credentials WHERE id = ?) WHERE id = ?`, a.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	err = e.seen(e.creds.WithSecret(ctx, e.agent.ID, b.ID, "https://evil.example/acme/app", func(_ string, s []byte) error {
		t.Errorf("fn called with %q: a copied ciphertext opened in another row", s)
		return nil
	}))
	if corral.ErrorCode(err) != corral.EUNAVAIL {
		t.Fatalf("WithSecret on a copied ciphertext = %v, want unavailable", err)
	}
	e.assertNoSecret(t)
}
