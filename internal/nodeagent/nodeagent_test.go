package nodeagent

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"corral"
	"corral/internal/fleet"
	"corral/internal/poll"
	"corral/internal/relay"
	"corral/internal/relay/noderpc"
	"corral/internal/service"
	"corral/internal/store"
)

// newControl is control's side of enrollment on a fresh database: the
// node use cases, the fleet, its relay and join endpoints served, and a
// join token. Everything ends with the test.
func newControl(t *testing.T) (*service.Enrollment, *fleet.Fleet, *httptest.Server, string) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	nodes := service.NewEnrollment(db, service.NodesConfig{})
	f := fleet.New(nodes, fleet.Config{})
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(func() { srv.Close(); f.Close() })
	token, _, err := nodes.JoinToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, f, srv, token
}

// TestJoinsAndRenews: a node joins with its join token, keeps the
// credential it is given (0600), connects, and renews the credential over
// the relay; the renewed one is good, the join token is used up, and a
// restarted node connects with the credential it kept.
func TestJoinsAndRenews(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes, f, srv, token := newControl(t)
	data := t.TempDir()
	a, err := New(Config{Control: srv.URL, Join: token, Name: "node-t", Data: data, Renew: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	path := filepath.Join(data, CredentialFile)
	read := func() []byte { b, _ := os.ReadFile(path); return bytes.TrimSpace(b) }
	deadline := time.Now().Add(time.Minute) // for the three waits in all
	poll.Within(t, time.Until(deadline), "the node to join and connect", func() bool { return len(read()) > 0 && len(f.Connected()) > 0 })
	first := read()
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the credential file: %v, %v; want 0600", st, err)
	}
	poll.Within(t, time.Until(deadline), "the credential to be renewed", func() bool { return !bytes.Equal(read(), first) })
	if _, err := nodes.Authenticate(ctx, string(read())); err != nil {
		t.Fatalf("the renewed credential: %v", err)
	}
	if _, _, _, err := nodes.Join(ctx, token, "again"); corral.ErrorCode(err) != corral.EUNAUTH {
		t.Fatalf("the join token again: %v, want EUNAUTH", err)
	}

	// A restart: no join token now, the kept credential is enough.
	cancel()
	<-done
	f.Close()
	f2 := fleet.New(nodes, fleet.Config{})
	defer f2.Close()
	srv2 := httptest.NewServer(f2.Handler())
	defer srv2.Close()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	b, err := New(Config{Control: srv2.URL, Name: "node-t", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	go b.Run(ctx2)
	poll.Within(t, time.Until(deadline), "the restarted node to connect with its kept credential", func() bool { return len(f2.Connected()) > 0 })
}

// TestRefusesToStartUnjoined: a node with no credential and no join token
// says how to join, and one whose credential control refuses says to
// join again, instead of retrying for ever.
func TestRefusesToStartUnjoined(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := fleet.New(service.NewEnrollment(db, service.NodesConfig{}), fleet.Config{})
	defer f.Close()
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	a, _ := New(Config{Control: srv.URL, Data: t.TempDir()})
	if err := a.Run(ctx); corral.ErrorCode(err) != corral.EINVALID {
		t.Fatalf("an unjoined node: %v, want EINVALID saying to join", err)
	}
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, CredentialFile), []byte("cnc_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n"), 0o600)
	b, _ := New(Config{Control: srv.URL, Data: data})
	if err := b.Run(ctx); corral.ErrorCode(err) != corral.EUNAUTH {
		t.Fatalf("a node with an unknown credential: %v, want EUNAUTH saying to join again", err)
	}
}

// TestOtherProtocolRefused: control takes a node's connection only when
// it speaks control's node protocol; a node of another release (or none
// said) is refused with control's reason, and gets no session, though its
// credential is good.
func TestOtherProtocolRefused(t *testing.T) {
	ctx := context.Background()
	nodes, f, srv, token := newControl(t)
	_, cred, _, err := nodes.Join(ctx, token, "node-old")
	if err != nil {
		t.Fatal(err)
	}
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + fleet.RelayPath
	for _, v := range []string{"", "1", "3", noderpc.Version + ".0"} {
		h := http.Header{"Authorization": {"Bearer " + cred}}
		if v != "" {
			h.Set(noderpc.VersionHeader, v)
		}
		_, err := relay.Dial(ctx, url, h, relay.Config{})
		if corral.ErrorCode(err) != corral.EFORBIDDEN || !strings.Contains(corral.ErrorMessage(err), "node protocol "+noderpc.Version) {
			t.Errorf("protocol %q: %v, want EFORBIDDEN naming control's protocol", v, err)
		}
	}
	if len(f.Connected()) != 0 {
		t.Fatalf("a refused node is connected: %v", f.Connected())
	}
	s, err := relay.Dial(ctx, url, http.Header{"Authorization": {"Bearer " + cred}, noderpc.VersionHeader: {noderpc.Version}}, relay.Config{})
	if err != nil {
		t.Fatalf("the same credential with control's protocol: %v", err)
	}
	s.Close()
}

// TestMovesToTheServingReplica: a node given two control replicas joins
// through the one serving (the standby, tried first, answers 503), keeps
// one relay to it, and moves to the other when that one dies and the
// other starts serving.
func TestMovesToTheServingReplica(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes, first, srvA, token := newControl(t)
	standby := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"unavailable","message":"a standby"}}`, http.StatusServiceUnavailable)
	})
	var serving atomic.Pointer[http.Handler]
	var h http.Handler = standby
	serving.Store(&h)
	srvB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*serving.Load()).ServeHTTP(w, r) }))
	defer srvB.Close()

	a, err := New(Config{Control: srvB.URL + "," + srvA.URL, Join: token, Name: "node-t", Data: t.TempDir(),
		Relay: relay.Config{Heartbeat: 200 * time.Millisecond, Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx)
	deadline := time.Now().Add(time.Minute)
	poll.Within(t, time.Until(deadline), "the node to join and connect to the serving replica", func() bool { return len(first.Connected()) == 1 })

	// The first replica dies; the standby takes over.
	srvA.CloseClientConnections()
	srvA.Close()
	first.Close()
	second := fleet.New(nodes, fleet.Config{})
	defer second.Close()
	h2 := second.Handler()
	serving.Store(&h2)
	moved := time.Now()
	poll.Within(t, time.Until(deadline), "the node to move to the second replica", func() bool { return len(second.Connected()) == 1 })
	t.Logf("the node's relay reached the second replica %v after the first died", time.Since(moved).Round(10*time.Millisecond))
}
