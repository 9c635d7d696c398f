package app

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"corral/internal/gateway"
	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/poll"
)

// probeKey is the provider's key in these tests: no answer may show it.
const probeKey = "sk-probe-0123456789-SECRET"

// TestReadinessFollowsTheProvider: /healthz answers 200 from the start;
// /readyz answers 503 naming the server while it starts, 200 once it is
// open and the store, the sandbox and the provider answer, 503 naming the
// provider once the provider stops answering, and 200 again once it is
// back; no answer tells the provider's address or key.
func TestReadinessFollowsTheProvider(t *testing.T) {
	if err := sandboxReady(context.Background()); err != nil {
		kerneltest.Skip(t, "readiness needs this machine's sandbox: %v", err)
	}
	provider := modeltest.New(nil)
	defer func() { provider.Close() }()
	u, _ := url.Parse(provider.URL())
	a, err := New(context.Background(), Config{Role: "all", Data: t.TempDir(),
		Model: gateway.Config{BaseURL: provider.URL(), APIKey: probeKey, Model: "m"}}, WithProbeTTL(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	readyz := func() (int, readiness) {
		code, body := get("/readyz")
		for _, secret := range []string{u.Host, u.Port(), probeKey} {
			if strings.Contains(body, secret) {
				t.Fatalf("/readyz tells %q: %s", secret, body)
			}
		}
		var r readiness
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("/readyz = %d %s: %v", code, body, err)
		}
		return code, r
	}

	steps := []struct {
		name   string
		do     func()
		status int
		check  string // the check that must say so: "ok" for every one at 200
		reason string // in the check's answer
	}{
		{"starting", func() {}, http.StatusServiceUnavailable, "server", "starting"},
		{"open", a.Open, http.StatusOK, "provider", "ok"},
		{"provider down", provider.Close, http.StatusServiceUnavailable, "provider", "could not be reached"},
		{"provider back", func() {
			if provider, err = modeltest.NewAt(u.Host, nil); err != nil {
				t.Fatalf("the provider again on %s: %v", u.Host, err)
			}
		}, http.StatusOK, "provider", "ok"},
	}
	for _, s := range steps {
		if code, body := get("/healthz"); code != http.StatusOK || strings.TrimSpace(body) != `{"status":"ok"}` {
			t.Fatalf("%s: /healthz = %d %s, want 200 {\"status\":\"ok\"}", s.name, code, body)
		}
		s.do()
		var code int
		var r readiness
		if !poll.Eventually(30*time.Second, func() bool {
			code, r = readyz()
			return code == s.status && strings.Contains(r.Checks[s.check], s.reason)
		}) {
			t.Fatalf("%s: /readyz = %d %+v, want %d with %s: %q", s.name, code, r, s.status, s.check, s.reason)
		}
		if code == http.StatusOK {
			for _, name := range []string{"server", "store", "sandbox", "provider"} {
				if r.Checks[name] != "ok" {
					t.Fatalf("%s: /readyz = 200 with %s: %q", s.name, name, r.Checks[name])
				}
			}
		}
	}
}

// TestProbeIsCached: readiness asked a hundred times within the probe's
// TTL asks the provider once.
func TestProbeIsCached(t *testing.T) {
	n := 0
	c := newCachedCheck(func(context.Context) error { n++; return nil }, time.Hour)
	for range 100 {
		c.run(context.Background())
	}
	if n != 1 {
		t.Fatalf("100 checks within the TTL probed %d times, want 1", n)
	}
}

// TestMetricsAddrTaken: a metrics address another process holds stops
// the start, saying which flag, as a taken --addr does.
func TestMetricsAddrTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := New(context.Background(), Config{Role: "all", Data: t.TempDir(), MetricsAddr: ln.Addr().String()})
	if err == nil {
		a.Close()
		t.Fatal("New on a taken metrics address succeeded")
	}
	if !strings.Contains(err.Error(), "--metrics-addr") {
		t.Fatalf("New on a taken metrics address: %v, want it to name --metrics-addr", err)
	}
}
