package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/pgtest"
	"corral/internal/secrets"
	"corral/internal/store"
)

// TestControlLease: a control on a PostgreSQL store holds the control
// lease while it serves and gives it up when it closes; one whose lease
// is taken by another (its term stolen) writes nothing more and stops
// serving at once.
func TestControlLease(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	db, err := store.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := Config{Role: "control", Data: t.TempDir(), Addr: "127.0.0.1:0", Database: url}

	a, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	holder, _, err := db.Lease(ctx, controlLease)
	if err != nil || holder == "" {
		t.Fatalf("the lease while the control is built: %q, %v; want held", holder, err)
	}
	a.Close()
	if _, _, err := db.Lease(ctx, controlLease); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("the lease after Close: %v, want given up", err)
	}

	a, err = New(ctx, cfg) // the same data directory, and so the same secret key
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ran := make(chan error, 1)
	ready := make(chan string, 1)
	go func() { ran <- a.Run(ctx, ready) }()
	<-ready
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var state readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &state); err != nil || state.Checks["lease"] != "ok" {
		t.Fatalf("/readyz = %s, %v; want the lease check ok", rec.Body, err)
	}
	now, err := db.Clock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Another control's, from a clock an hour on: as if this one had been
	// away past its term and the other had taken over.
	if ok, err := db.TakeLease(ctx, controlLease, "thief", now.Add(time.Hour), now.Add(2*time.Hour)); !ok || err != nil {
		t.Fatalf("TakeLease(thief) = %v, %v", ok, err)
	}
	// The fence: from the theft on, this control writes nothing, even
	// before it notices.
	if _, err := a.Store.CreateUser(ctx, corral.NewUser{Email: "late@example.com", Name: "Late", PasswordHash: "x"}); err == nil ||
		!strings.Contains(err.Error(), "no longer holds its lease") {
		t.Fatalf("a write after the lease was taken: %v, want refused by the fence", err)
	}
	select {
	case err := <-ran:
		if err == nil || !strings.Contains(err.Error(), "another control holds the control lease") {
			t.Fatalf("Run = %v, want it stopped for the lease", err)
		}
	case <-time.After(defaultFailoverAfter):
		t.Fatal("the control served on with its lease taken")
	}
}

// TestControlsShareTheEgressCA: two controls on one PostgreSQL store
// (each its own data directory, one secret key) sign with one egress CA,
// the first's, so a run one takes over from the other trusts its proxy.
func TestControlsShareTheEgressCA(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, secrets.KeySize))
	var certs [][]byte
	var dirs []string
	for range 2 {
		dir := t.TempDir()
		a, err := New(ctx, Config{Role: "control", Data: dir, Database: url, SecretKey: key})
		if err != nil {
			t.Fatal(err)
		}
		certs, dirs = append(certs, a.egressCA.CertPEM()), append(dirs, dir)
		a.Close() // the next takes the lease at once
	}
	if !bytes.Equal(certs[0], certs[1]) {
		t.Fatal("two controls on one store sign with two egress CAs")
	}
	// The second made a CA of its own in its data directory, and does
	// not sign with it.
	own, err := os.ReadFile(filepath.Join(dirs[1], "egress-ca.pem"))
	if err != nil || bytes.Equal(own, certs[1]) {
		t.Fatalf("the second control's own CA: %v; want one, not the one it signs with", err)
	}
}
