package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/api"
	"corral/internal/auth"
	"corral/internal/pgtest"
	"corral/internal/poll"
	"corral/internal/secrets"
	"corral/internal/service"
	"corral/internal/trace"
)

// TestStandbyAnswersStoreReads: a control standing by answers every store
// read itself, byte for byte as the serving control does, and forwards
// the rest. The standby is told the serving control is at a dead address,
// so what it forwards fails and what it answers can only be its own; a
// revocation made on the serving control bites on the standby's next read.
func TestStandbyAnswersStoreReads(t *testing.T) {
	ctx := t.Context()
	url := pgtest.NewDatabase(t)
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, secrets.KeySize))
	cheap := WithPasswordParams(auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})
	cfg := Config{Role: "control", Addr: "127.0.0.1:0", Database: url, SecretKey: key, FailoverAfter: minFailoverAfter}

	first := cfg
	first.Data, first.Advertise = t.TempDir(), "http://127.0.0.1:1" // nothing listens there
	serving, err := New(ctx, first, cheap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(serving.Close) // after the standby's: it must not take over
	ready := make(chan string, 1)
	go serving.Run(ctx, ready)
	servingURL := "http://" + <-ready

	second := cfg
	second.Data, second.MetricsAddr = t.TempDir(), freeAddr(t)
	standbyURL := standBy(t, ctx, second, cheap)

	// Something of everything the store reads show, made on the serving
	// control.
	owner, err := serving.Accounts.CreateUser(ctx, "owner@example.com", "Owner", "correct horse battery", true)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := serving.Accounts.CreateUser(ctx, "reader@example.com", "Reader", "correct horse battery", false)
	if err != nil {
		t.Fatal(err)
	}
	name := "watched"
	agent, err := serving.Agents.Create(ctx, owner, service.AgentInput{Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serving.Agents.GrantByEmail(ctx, owner, agent.ID, "reader@example.com", "viewer"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := serving.Agents.CreateLink(ctx, owner, agent.ID, "viewer"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := serving.Accounts.CreateToken(ctx, owner, "laptop"); err != nil {
		t.Fatal(err)
	}
	// A run in flight, its trace begun, and one that has ended: its event
	// stream is its whole trace, then the end.
	rec := trace.NewRecorder(serving.Store, nil)
	admit := func(content string, events ...string) corral.Run {
		run := corral.Run{ID: corral.NewID("run"), AgentID: agent.ID, MessageID: corral.NewID("msg"), StageID: corral.NewID("chg"),
			TriggeredBy: &corral.UserRef{ID: owner.ID}, Status: corral.RunAdmitted}
		msg := corral.Message{ID: run.MessageID, AgentID: agent.ID, Role: corral.RoleUser, Content: content, RunID: run.ID, Author: &corral.UserRef{ID: owner.ID}}
		if _, err := serving.Store.Admit(ctx, msg, run, corral.Admission{ID: corral.NewID("adm"), AgentID: agent.ID, UserID: owner.ID},
			func(corral.AdmissionFacts) string { return "" }); err != nil {
			t.Fatal(err)
		}
		for _, typ := range events {
			if _, err := rec.Append(ctx, run.ID, typ, map[string]string{}); err != nil {
				t.Fatal(err)
			}
		}
		return run
	}
	run := admit("go", trace.Admitted)
	ended := admit("went", trace.Admitted, trace.Started, trace.Ended)
	ended.Status = corral.RunErrored
	if err := serving.Store.UpdateRun(ctx, ended, corral.RunAdmitted); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := serving.Store.CreateChangeSet(ctx, corral.ChangeSet{ID: corral.NewID("chg"), AgentID: agent.ID, RunID: run.ID,
		Status: corral.ChangePending, Mode: corral.ChangesReview, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	client := netip.MustParseAddr("192.0.2.1")
	_, ownerSession, err := serving.Accounts.Login(ctx, "owner@example.com", "correct horse battery", client)
	if err != nil {
		t.Fatal(err)
	}
	_, readerSession, err := serving.Accounts.Login(ctx, "reader@example.com", "correct horse battery", client)
	if err != nil {
		t.Fatal(err)
	}

	get := func(base, path, session string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if session != "" {
			req.AddCookie(&http.Cookie{Name: api.CookieName, Value: session})
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	type read struct {
		path    string
		session string
		status  int
	}
	reads := []read{
		{"/api/setup", "", 200},
		{"/api/me", ownerSession, 200},
		{"/api/me", "", 401},
		{"/api/tokens", ownerSession, 200},
		{"/api/credentials", ownerSession, 200},
		{"/api/users", ownerSession, 200},
		{"/api/users", readerSession, 403},
		{"/api/limits", ownerSession, 200},
		{"/api/egress/presets", ownerSession, 200},
		{"/api/agents", ownerSession, 200},
		{"/api/agents", readerSession, 200},
		{"/api/agents/" + agent.ID, readerSession, 200},
		{"/api/agents/agt_nosuch", readerSession, 404},
		{"/api/agents/" + agent.ID + "/grants", ownerSession, 200},
		{"/api/agents/" + agent.ID + "/links", ownerSession, 200},
		{"/api/agents/" + agent.ID + "/messages", readerSession, 200},
		{"/api/agents/" + agent.ID + "/runs", readerSession, 200},
		{"/api/agents/" + agent.ID + "/secrets", ownerSession, 200},
		{"/api/runs/" + run.ID, readerSession, 200},
		{"/api/runs/" + run.ID + "/trace", readerSession, 200},
		{"/api/runs/" + run.ID + "/tree", readerSession, 200},
		{"/api/runs/" + ended.ID + "/events", readerSession, 200},
		{"/api/runs/run_nosuch/events", readerSession, 404},
		{"/api/runs?status=active", ownerSession, 200},
		{"/api/agents/" + agent.ID + "/changes", readerSession, 200},
		{"/api/changes?status=pending", ownerSession, 200},
		{"/api/changes", ownerSession, 400},
		{"/api/usage", ownerSession, 200},
		{"/api/audit", ownerSession, 200},
		{"/api/admin/budgets", ownerSession, 200},
		{"/api/openapi.json", "", 200},
	}
	// Every store read is among them: the standby's services are the
	// store's alone, and a read needing more would fail here.
	mux := http.NewServeMux()
	tested := map[string]bool{}
	for _, p := range api.StoreReadRoutes() {
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	for _, tc := range reads {
		_, p := mux.Handler(httptest.NewRequest("GET", tc.path, nil))
		tested[p] = true
	}
	for _, p := range api.StoreReadRoutes() {
		if !tested[p] {
			t.Errorf("store read %s is not tested on the standby", p)
		}
	}
	for _, tc := range reads {
		wantCode, want := get(servingURL, tc.path, tc.session)
		code, got := get(standbyURL, tc.path, tc.session)
		if wantCode != tc.status || code != wantCode || got != want {
			t.Errorf("GET %s: the standby answered %d %.200s\nthe serving control %d %.200s\nwant %d from both, the same bytes", tc.path, code, got, wantCode, want, tc.status)
		}
	}

	// Its metrics address answers while it stands by: its health, and
	// metrics of what it answered.
	metricsURL := "http://" + second.MetricsAddr
	if code, body := get(metricsURL, "/readyz", ""); code != 200 || !strings.Contains(body, "standby: answers store reads") {
		t.Errorf("the standby's metrics address: /readyz = %d %s, want 200 saying it stands by", code, body)
	}
	if code, body := get(metricsURL, "/metrics", ""); code != 200 ||
		!strings.Contains(body, `corral_http_requests_total{code="200",route="GET /api/agents"} 2`) ||
		!strings.Contains(body, "corral_runs_active 1") {
		t.Errorf("the standby's /metrics = %d, want its two GET /api/agents counted and the store's active run:\n%s", code, body)
	}

	// A revocation on the serving control bites on the standby's next read.
	if err := serving.Agents.DeleteGrant(ctx, owner, agent.ID, reader.ID); err != nil {
		t.Fatal(err)
	}
	if code, body := get(standbyURL, "/api/agents/"+agent.ID, readerSession); code != http.StatusNotFound {
		t.Fatalf("the reader's read on the standby after the revocation: %d %s, want 404", code, body)
	}

	// What is not a store read is forwarded, here to nowhere: the standby
	// does not answer it itself.
	start := time.Now()
	if code, body := get(standbyURL, "/api/nodes", ownerSession); code != http.StatusServiceUnavailable {
		t.Fatalf("GET /api/nodes on the standby: %d %s, want 503 (forwarded to a control that cannot be reached)", code, body)
	}
	t.Logf("the forwarded request gave up after %v", time.Since(start).Round(time.Millisecond))
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// standBy starts a control that stands by (another serves from cfg's
// store) on a port found free a moment ago, and returns its URL once it
// answers. It gives up waiting when ctx is done (the test's end), and is
// closed after.
func standBy(t testing.TB, ctx context.Context, cfg Config, opts ...Option) string {
	t.Helper()
	cfg.Addr = freeAddr(t)
	done := make(chan *App, 1)
	go func() {
		a, err := New(ctx, cfg, opts...)
		if err != nil {
			a = nil
		}
		done <- a
	}()
	t.Cleanup(func() {
		if a := <-done; a != nil {
			a.Close()
		}
	})
	url := "http://" + cfg.Addr
	poll.Until(t, "the control to stand by", func() bool {
		res, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return url
}
