package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/internal/api"
	"corral/internal/modeltest"
)

func TestClientAddrOf(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	tests := []struct {
		name      string
		peer      string
		forwarded []string
		trusted   []netip.Prefix
		want      string
	}{
		{"no proxies configured: the peer", "192.0.2.7:4711", nil, nil, "192.0.2.7"},
		{"a forged header from an untrusted peer is ignored", "192.0.2.7:4711", []string{"198.51.100.1"}, proxies, "192.0.2.7"},
		{"a forged header with no proxies configured is ignored", "10.0.0.1:4711", []string{"198.51.100.1"}, nil, "10.0.0.1"},
		{"trusted peer, no header: the proxy itself", "10.0.0.1:4711", nil, proxies, "10.0.0.1"},
		{"trusted peer names the client", "10.0.0.1:4711", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"the client's own forgery left of the real entry", "10.0.0.1:4711", []string{"203.0.113.66, 198.51.100.1"}, proxies, "198.51.100.1"},
		{"a chain of our proxies is skipped", "10.0.0.1:4711", []string{"198.51.100.1, 10.1.2.3, 10.0.0.9"}, proxies, "198.51.100.1"},
		{"several header lines read as one list", "10.0.0.1:4711", []string{"203.0.113.66", "198.51.100.1, 10.0.0.9"}, proxies, "198.51.100.1"},
		{"every entry a proxy: the leftmost", "10.0.0.1:4711", []string{"10.9.9.9, 10.0.0.9"}, proxies, "10.9.9.9"},
		{"spaces around entries", "10.0.0.1:4711", []string{"  198.51.100.1 ,10.0.0.9  "}, proxies, "198.51.100.1"},
		{"entry with a port", "10.0.0.1:4711", []string{"198.51.100.1:5555"}, proxies, "198.51.100.1"},
		{"IPv6 peer and client", "[2001:db8:ffff::1]:4711", []string{"2001:db8:1::42"}, proxies, "2001:db8:1::42"},
		{"IPv6 entry with a port", "10.0.0.1:4711", []string{"[2001:db8:1::42]:5555"}, proxies, "2001:db8:1::42"},
		{"IPv6 entry in brackets", "10.0.0.1:4711", []string{"[2001:db8:1::42]"}, proxies, "2001:db8:1::42"},
		{"IPv6 entry with a zone", "10.0.0.1:4711", []string{"fe80::1%eth0"}, proxies, "fe80::1"},
		{"IPv4-mapped entry is IPv4", "10.0.0.1:4711", []string{"::ffff:198.51.100.1"}, proxies, "198.51.100.1"},
		{"IPv4-mapped peer is matched as IPv4", "[::ffff:10.0.0.1]:4711", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"malformed rightmost entry: the peer", "10.0.0.1:4711", []string{"198.51.100.1, not-an-address"}, proxies, "10.0.0.1"},
		{"malformed entry behind a proxy of ours: the peer", "10.0.0.1:4711", []string{"198.51.100.1, unknown, 10.0.0.9"}, proxies, "10.0.0.1"},
		{"malformed entry left of the client is never read", "10.0.0.1:4711", []string{"garbage, 198.51.100.1"}, proxies, "198.51.100.1"},
		{"empty header: the peer", "10.0.0.1:4711", []string{""}, proxies, "10.0.0.1"},
		{"unclosed bracket: the peer", "10.0.0.1:4711", []string{"[2001:db8:1::42"}, proxies, "10.0.0.1"},
		{"unparsable peer", "somewhere", []string{"198.51.100.1"}, proxies, "::"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := api.ClientAddrOf(tt.peer, tt.forwarded, tt.trusted)
			if got != netip.MustParseAddr(tt.want) {
				t.Fatalf("clientAddrOf(%q, %q) = %s, want %s", tt.peer, tt.forwarded, got, tt.want)
			}
		})
	}
}

// TestSignupThrottleCountsTheForwardedClient: behind a trusted proxy the
// throttle counts each forwarded client apart; from anyone else, varying
// the header buys nothing.
func TestSignupThrottleCountsTheForwardedClient(t *testing.T) {
	tests := []struct {
		name    string
		trusted []netip.Prefix
		peer    string
		// forwarded is the header of the n-th signup
		forwarded func(n int) string
		// fresh is a header that, when the 21st signup was throttled,
		// must (or must not) get through
		fresh      string
		freshAdmit bool
	}{
		{
			name: "through a trusted proxy", trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, peer: "10.0.0.1",
			forwarded: func(int) string { return "192.0.2.1" }, fresh: "192.0.2.2", freshAdmit: true,
		},
		{
			name: "forged by an untrusted peer", trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, peer: "192.0.2.9",
			forwarded: func(n int) string { return fmt.Sprintf("198.51.100.%d", n) }, fresh: "198.51.100.250", freshAdmit: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{api: api.Config{TrustedProxies: tt.trusted}})
			signup := func(n int, forwarded string) *httptest.ResponseRecorder {
				body := fmt.Sprintf(`{"email":"u%d@example.com","name":"U","password":%q}`, n, password)
				req := httptest.NewRequest("POST", "/api/auth/signup", strings.NewReader(body))
				req.RemoteAddr = tt.peer + ":5555"
				req.Header.Set("X-Forwarded-For", forwarded)
				rec := httptest.NewRecorder()
				e.api.ServeHTTP(rec, req)
				return rec
			}
			for n := range 20 { // the 20th starts the backoff
				if rec := signup(n, tt.forwarded(n)); rec.Code != http.StatusCreated {
					t.Fatalf("signup %d = %d %s, want 201", n, rec.Code, rec.Body)
				}
			}
			if rec := signup(20, tt.forwarded(20)); rec.Code != http.StatusTooManyRequests {
				t.Fatalf("signup 21 = %d %s, want 429", rec.Code, rec.Body)
			}
			rec := signup(21, tt.fresh)
			if admitted := rec.Code == http.StatusCreated; admitted != tt.freshAdmit {
				t.Fatalf("signup forwarded for %s = %d %s, want admitted %v", tt.fresh, rec.Code, rec.Body, tt.freshAdmit)
			}
		})
	}
}

// openStream asks for a run's event stream with c's credential and returns
// the answer, its body left open for the caller (closed when the test ends).
func (c *client) openStream(t *testing.T, runID string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", c.e.srv.URL+"/api/runs/"+runID+"/events", nil)
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	} else {
		req.AddCookie(&http.Cookie{Name: api.CookieName, Value: c.cookie})
	}
	res, err := c.e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// liveStreams is how many event streams hold a slot.
func (e *env) liveStreams() int {
	return e.api.LiveStreams()
}

func wantThrottled(t *testing.T, res *http.Response, what string) {
	t.Helper()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("%s = %d (Retry-After %q), want 429 with Retry-After", what, res.StatusCode, res.Header.Get("Retry-After"))
	}
	var b api.ErrorBody
	if err := json.NewDecoder(res.Body).Decode(&b); err != nil || b.Error.Code != "throttled" || b.Error.Message == "" {
		t.Fatalf("%s answered %+v (%v), want code throttled with a message", what, b, err)
	}
}

func TestEventStreamsPerSession(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("watched")
	hold := make(chan struct{})
	e.answer(modeltest.Sequence(modeltest.Reply{Content: "thinking", Block: hold}, modeltest.Text("done")))
	run := owner.send(id, "take your time")

	var first *http.Response
	for i := range api.DefaultMaxStreamsPerSession {
		res := owner.openStream(t, run.ID)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("stream %d = %d, want 200", i+1, res.StatusCode)
		}
		if first == nil {
			first = res
		}
	}
	wantThrottled(t, owner.openStream(t, run.ID), fmt.Sprintf("stream %d of one session", api.DefaultMaxStreamsPerSession+1))

	// The cap is the session's, not the user's: the same person signed in
	// again, or with an API token, has their own.
	again := &client{e: e, cookie: loginCookie(t, e, "owner@example.com")}
	if res := again.openStream(t, run.ID); res.StatusCode != http.StatusOK {
		t.Fatalf("a stream of another session = %d, want 200", res.StatusCode)
	}
	var tok api.TokenView
	owner.do("POST", "/api/tokens", map[string]string{"name": "script"}).want(http.StatusCreated).decode(&tok)
	script := &client{e: e, bearer: tok.Token}
	if res := script.openStream(t, run.ID); res.StatusCode != http.StatusOK {
		t.Fatalf("a stream of an API token = %d, want 200", res.StatusCode)
	}

	// A client that goes away gives its slot back.
	first.Body.Close()
	waitFor(t, "the closed stream's slot to come back", func() bool { return e.liveStreams() == api.DefaultMaxStreamsPerSession+1 })
	if res := owner.openStream(t, run.ID); res.StatusCode != http.StatusOK {
		t.Fatalf("a stream after one closed = %d, want 200", res.StatusCode)
	}

	// The run's end ends every stream, and every slot comes back.
	close(hold)
	owner.waitRun(run.ID, "completed")
	waitFor(t, "every slot to come back", func() bool { return e.liveStreams() == 0 })
}

func TestEventStreamsTotalCap(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{api: api.Config{MaxStreams: 2}})
	owner := e.signup("owner@example.com", "Owner")
	viewer := e.signup("viewer@example.com", "Viewer")
	other := e.signup("other@example.com", "Other")
	id := owner.createAgent("watched")
	owner.grant(id, viewer.user.ID, "viewer")
	owner.grant(id, other.user.ID, "viewer")
	hold := make(chan struct{})
	e.answer(modeltest.Sequence(modeltest.Reply{Content: "thinking", Block: hold}, modeltest.Text("done")))
	run := owner.send(id, "take your time")

	for _, c := range []*client{owner, viewer} {
		if res := c.openStream(t, run.ID); res.StatusCode != http.StatusOK {
			t.Fatalf("stream of %s = %d, want 200", c.user.Email, res.StatusCode)
		}
	}
	wantThrottled(t, other.openStream(t, run.ID), "a stream over the server's total")
	// A run the caller may not see still answers 404, cap or no cap.
	stranger := e.signup("stranger@example.com", "Stranger")
	if res := stranger.openStream(t, run.ID); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a stranger's stream at the cap = %d, want 404", res.StatusCode)
	}
	close(hold)
	owner.waitRun(run.ID, "completed")
}

// TestStalledWatcherIsDropped: a client that asks for a stream and never
// reads it is cut off once a write has waited StreamWriteTimeout, so it
// holds no slot, goroutine or buffer while the run goes on.
func TestStalledWatcherIsDropped(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{api: api.Config{StreamWriteTimeout: 200 * time.Millisecond}})
	// The env's server with tiny socket buffers, so that a stalled reader
	// blocks the server's writes after kilobytes rather than megabytes.
	srv := httptest.NewUnstartedServer(e.api)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("chatty")
	// About 600 KB of live output, then the command sleeps: the run
	// outlives the stream by far.
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "head -c 600000 /dev/zero | tr '\\0' x; sleep 120"))))
	run := owner.send(id, "talk a lot")

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/runs/%s/events HTTP/1.1\r\nHost: corral\r\nCookie: %s=%s\r\n\r\n", run.ID, api.CookieName, owner.cookie)
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("stream answered %q, %v", status, err)
	}
	// Read no further: the server's writes fill both buffers and wait.
	waitFor(t, "the stalled stream to be dropped", func() bool { return e.liveStreams() == 0 })
	if r := owner.run(run.ID); r.Status != "running" {
		t.Fatalf("run = %s: it should still be running, the stream should have ended on its own", r.Status)
	}
	owner.do("POST", "/api/runs/"+run.ID+"/kill", nil).want(http.StatusAccepted)
	owner.waitRun(run.ID, "killed")
}

// smallBuffers gives each accepted connection a small send buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}
