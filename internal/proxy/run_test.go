package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/poll"
)

// TestSecretHeaders: the proxy sets a secret on requests to its host,
// over the client's own value, and on no other host's; the value is in
// no event and no log line, whatever happens to the requests.
func TestSecretHeaders(t *testing.T) {
	const secret = "Bearer sk-proxy-secret-4f9a"
	tlsUp, plainUp := newUpstream(t, true), newUpstream(t, false)
	f := newFixture(t)
	f.setGrant(Grant{
		Rules: []corral.EgressRule{
			{Host: "localhost", Ports: []int{tlsUp.port}, Methods: []string{"GET"}},
			{Host: "localhost", Ports: []int{plainUp.port}},
			{Host: "127.0.0.1", Ports: []int{tlsUp.port}},
		},
		Headers: []Header{
			{Host: "localhost", Name: "Authorization", Value: secret},
			{Host: "other.test", Name: "X-Other", Value: "not-for-localhost"},
		},
	}, nil)
	c := f.client("run-1", true)
	get := func(method, url string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		req.Header.Set("Authorization", "Bearer the-client's-own")
		req.Header.Set("Proxy-Token", "hop")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		body(t, resp)
		return resp
	}

	for _, url := range []string{tlsUp.url("localhost", "/in"), plainUp.url("localhost", "/in")} {
		if resp := get("GET", url); resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", url, resp.Status)
		}
	}
	if resp := get("POST", tlsUp.url("localhost", "/denied")); resp.StatusCode != 403 {
		t.Fatalf("POST: %s, want 403", resp.Status)
	}
	// Another host (an address) gets no secret: the client's value passes.
	if resp := get("GET", tlsUp.url("127.0.0.1", "/other")); resp.StatusCode != 200 {
		t.Fatalf("GET by address: %s", resp.Status)
	}
	c.CloseIdleConnections()

	tlsReqs, _ := tlsUp.seen()
	plainReqs, _ := plainUp.seen()
	for _, r := range append(tlsReqs, plainReqs...) {
		// The request by address went through a tunnel: the proxy saw
		// none of it, and passed it as the client sent it.
		tunnelled := r.URL.Path == "/other"
		want := secret
		if tunnelled {
			want = "Bearer the-client's-own"
		}
		if got := r.Header.Get("Authorization"); got != want {
			t.Errorf("%s (Host %s) reached the upstream with Authorization %q, want %q", r.URL.Path, r.Host, got, want)
		}
		if r.Header.Get("X-Other") != "" || !tunnelled && r.Header.Get("Proxy-Token") != "" {
			t.Errorf("%s reached the upstream with %v", r.URL.Path, r.Header)
		}
	}
	if len(tlsReqs) != 2 || len(plainReqs) != 1 {
		t.Fatalf("the upstreams saw %d and %d requests, want 2 and 1", len(tlsReqs), len(plainReqs))
	}

	traffic := f.waitTraffic(2) // localhost and 127.0.0.1
	denied, _, _ := f.ev.snapshot()
	if len(denied) != 1 {
		t.Fatalf("denials %+v, want the POST's", denied)
	}
	if s := fmt.Sprintf("%+v %+v", denied, traffic); strings.Contains(s, "sk-proxy-secret") {
		t.Fatalf("an event carries the secret: %s", s)
	}
	if logs := f.logs.String(); strings.Contains(logs, "sk-proxy-secret") || strings.Contains(logs, "the-client's-own") {
		t.Fatalf("the log carries a header's value:\n%s", logs)
	}
	if !strings.Contains(f.logs.String(), "egress denied") {
		t.Fatalf("the log was not captured (no denial in it):\n%s", f.logs.String())
	}
}

// TestGrantEdited: the grant is asked again for every connection, and for
// every request of a terminated one, so an edit applies to the next.
func TestGrantEdited(t *testing.T) {
	up := newUpstream(t, true)
	f := newFixture(t)
	allowGET := corral.EgressRule{Host: "localhost", Ports: []int{up.port}, Methods: []string{"GET"}}
	f.allow(allowGET)
	c := f.client("run-1", true)
	get := func() int {
		t.Helper()
		resp, err := c.Get(up.url("localhost", "/x"))
		if err != nil {
			return 0 // the CONNECT was refused
		}
		body(t, resp)
		return resp.StatusCode
	}
	if s := get(); s != 200 {
		t.Fatalf("GET under the first grant: %d", s)
	}
	// The same tunnel, the next request: only POST now.
	f.allow(corral.EgressRule{Host: "localhost", Ports: []int{up.port}, Methods: []string{"POST"}})
	if s := get(); s != 403 {
		t.Fatalf("GET after GET was taken away: %d, want 403", s)
	}
	// The next connection: the host is gone from the list.
	c.CloseIdleConnections()
	f.allow(corral.EgressRule{Host: "example.test"})
	if s := get(); s != 0 {
		t.Fatalf("GET after the host was taken away: %d, want the CONNECT refused", s)
	}
	f.mu.Lock()
	dials := f.dials
	f.mu.Unlock()
	if dials != 2 {
		t.Fatalf("the client made %d connections, want 2 (one tunnel for the first two requests)", dials)
	}
	// And back: the edit applies the other way too.
	f.allow(allowGET)
	if s := get(); s != 200 {
		t.Fatalf("GET after the host came back: %d", s)
	}
}

func TestGrantError(t *testing.T) {
	up := newUpstream(t, false)
	f := newFixture(t)
	f.setGrant(Grant{Rules: []corral.EgressRule{{Host: "localhost"}}}, corral.Errorf(corral.EFORBIDDEN, "the run is over"))
	resp, err := f.client("run-1", false).Get(up.url("localhost", "/x"))
	if err != nil {
		t.Fatal(err)
	}
	want := "this run may not reach the network: the run is over"
	if b := body(t, resp); resp.StatusCode != 403 || !strings.Contains(b, want) {
		t.Fatalf("GET: %s %q, want 403 %q", resp.Status, b, want)
	}
	f.hasDenial(Denial{Host: "localhost", Port: up.port, Method: "GET", Path: "/x", Reason: want})
	_, resp = f.connect("run-1", fmt.Sprintf("localhost:%d", up.port))
	if b := body(t, resp); resp.StatusCode != 403 || !strings.Contains(b, want) {
		t.Fatalf("CONNECT: %s %q, want 403 %q", resp.Status, b, want)
	}
}

func TestCaps(t *testing.T) {
	for _, tt := range []struct {
		name     string
		cfg      func(*Config)
		https    bool
		path     string
		requests int // the request that crosses the cap is the last
		what     string
	}{
		{"connections", func(c *Config) { c.MaxConns = 2 }, true, "/x", 2, "connections"}, // the open tunnel is one
		{"bytes through a tunnel", func(c *Config) { c.MaxBytes = 64 << 10 }, true, "/big?n=1000000", 1, "bytes"},
		{"bytes of plain HTTP", func(c *Config) { c.MaxBytes = 64 << 10 }, false, "/big?n=1000000", 1, "bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up, tunnelUp := newUpstream(t, tt.https), newUpstream(t, true)
			f := newFixture(t, tt.cfg, func(c *Config) { c.IdleTimeout = time.Hour })
			f.allow(corral.EgressRule{Host: "localhost", Ports: []int{up.port, tunnelUp.port}})
			// Another connection of the run, an open tunnel: crossing the
			// cap closes it too (its idle timeout is far away).
			raw, resp := f.connect("run-1", fmt.Sprintf("localhost:%d", tunnelUp.port))
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %s", resp.Status)
			}
			idle := tls.Client(raw, &tls.Config{ServerName: "localhost", RootCAs: f.pool})
			if err := idle.Handshake(); err != nil {
				t.Fatal(err)
			}
			// Another run is not touched by this one's cap.
			other := f.client("run-2", false)

			c := f.client("run-1", false)
			for i := 1; i <= tt.requests; i++ {
				resp, err := c.Get(up.url("localhost", tt.path))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if i < tt.requests && err != nil {
					t.Fatalf("request %d, within the cap: %v", i, err)
				}
				if i == tt.requests && err == nil && resp.StatusCode == 200 {
					t.Fatalf("request %d crossed the cap and succeeded", i)
				}
			}
			poll.Until(t, "the cap crossed", func() bool {
				_, _, ex := f.ev.snapshot()
				return len(ex) > 0
			})
			idle.SetReadDeadline(time.Now().Add(poll.Patience))
			if _, err := idle.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the run's open tunnel: %v, want it closed", err)
			}

			// Later connections of the run are refused, saying why.
			_, resp = f.connect("run-1", fmt.Sprintf("localhost:%d", up.port))
			if b := body(t, resp); resp.StatusCode != 403 || !strings.Contains(b, "crossed its cap on egress "+tt.what) {
				t.Fatalf("CONNECT after the cap: %s %q", resp.Status, b)
			}
			f.hasDenial(Denial{Host: "localhost", Port: up.port, Reason: "crossed its cap on egress " + tt.what})
			if resp, err := other.Get(up.url("localhost", "/x")); err != nil || resp.StatusCode != 200 {
				t.Fatalf("another run after this one's cap: %v %v", resp, err)
			}
			_, _, ex := f.ev.snapshot()
			if len(ex) != 1 || ex[0] != tt.what {
				t.Fatalf("Exceeded %q, want once %q", ex, tt.what)
			}
			if tt.what == "bytes" {
				// No more than the cap passed: the crossing bytes were not.
				total := int64(0)
				for _, tr := range f.waitTraffic(1) {
					total += tr.BytesIn + tr.BytesOut
				}
				if total > 64<<10 {
					t.Fatalf("traffic of %d bytes under a cap of %d", total, 64<<10)
				}
			}
			// End forgets the run: a new one by that name starts afresh.
			f.p.End("run-1")
			if resp, err := f.client("run-1", false).Get(up.url("localhost", "/x")); err != nil || resp.StatusCode != 200 {
				t.Fatalf("the run after End: %v %v", resp, err)
			}
		})
	}
}

// TestTraffic: a summary per host when the run's last connection to it
// closes, counting tunnels once and seen requests each.
func TestTraffic(t *testing.T) {
	for _, tt := range []struct {
		name     string
		https    bool
		rule     corral.EgressRule
		requests int
		want     int64
	}{
		{"a tunnel counts once", true, corral.EgressRule{Host: "localhost"}, 3, 1},
		{"terminated requests count each", true, corral.EgressRule{Host: "localhost", Methods: []string{"GET"}}, 3, 3},
		{"plain requests count each", false, corral.EgressRule{Host: "localhost"}, 3, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, tt.https)
			f := newFixture(t)
			tt.rule.Ports = []int{up.port}
			f.allow(tt.rule)
			// Two clients at once, each with a kept-alive connection: one
			// summary, once both have closed, of both clients' requests.
			a, b := f.client("run-1", true), f.client("run-1", true)
			const n = 10_000
			get := func(c *http.Client) {
				t.Helper()
				for i := 0; i < tt.requests; i++ {
					resp, err := c.Get(up.url("localhost", fmt.Sprintf("/big?n=%d", n)))
					if err != nil {
						t.Fatal(err)
					}
					if got := body(t, resp); len(got) != n {
						t.Fatalf("body of %d bytes, want %d", len(got), n)
					}
				}
			}
			get(a)
			get(b)
			a.CloseIdleConnections()
			poll.Until(t, "the proxy to see the first client's connection close", func() bool {
				f.p.ledger.mu.Lock()
				defer f.p.ledger.mu.Unlock()
				h := f.p.ledger.runs["run-1"].hosts["localhost"]
				return h == nil || h.open == 1
			})
			get(b) // the host's tally goes on while b is open
			b.CloseIdleConnections()
			got := f.waitTraffic(1)
			if len(got) != 1 {
				t.Fatalf("traffic %+v, want one summary", got)
			}
			tr := got[0]
			// b's tunnel is one, whatever it carried.
			wantRequests := 3 * tt.want
			if tt.want == 1 {
				wantRequests = 2
			}
			if tr.Host != "localhost" || tr.Requests != wantRequests || tr.BytesIn < 3*n*int64(tt.requests) || tr.BytesOut < 100*int64(tt.requests) {
				t.Fatalf("traffic %+v, want localhost, %d requests, over %d bytes in", tr, wantRequests, 3*n*tt.requests)
			}
			f.ev.mu.Lock()
			runs := f.ev.runs
			f.ev.mu.Unlock()
			if runs[0] != "run-1" {
				t.Fatalf("the summary is of %q, want run-1", runs[0])
			}
		})
	}
}

// TestHeadersBounded: a client that sends headers without end is cut off
// at the bound, not read into memory.
func TestHeadersBounded(t *testing.T) {
	f := newFixture(t)
	c := f.dial("run-1")
	c.SetDeadline(time.Now().Add(poll.Patience))
	fmt.Fprintf(c, "GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 2*maxHeaderBytes))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("headers of %d bytes: %s, want 431", 2*maxHeaderBytes, resp.Status)
	}
}

// TestEndSumsAndCloses: a run's end closes its connections still open and
// hands what they moved to Events before End returns, once: a trace has
// its egress summary before the run's end, and nothing after it.
func TestEndSumsAndCloses(t *testing.T) {
	up := newUpstream(t, false)
	f := newFixture(t)
	f.allow(corral.EgressRule{Host: "localhost", Ports: []int{up.port}})
	c := f.client("run-1", true)
	resp, err := c.Get(up.url("localhost", "/big?n=5000"))
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); len(got) != 5000 {
		t.Fatalf("body of %d bytes, want 5000", len(got))
	}
	// The kept-alive connection is open: no summary yet. A tunnel is open
	// too.
	if _, traffic, _ := f.ev.snapshot(); len(traffic) != 0 {
		t.Fatalf("traffic %+v before the end, want none while the connection is open", traffic)
	}
	tunnel, resp := f.connect("run-1", fmt.Sprintf("localhost:%d", up.port))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT = %s", resp.Status)
	}
	f.p.End("run-1")
	if _, err := tunnel.Read(make([]byte, 1)); err == nil {
		t.Fatal("the run's tunnel is still open after End")
	}
	_, traffic, _ := f.ev.snapshot()
	if len(traffic) != 1 || traffic[0].Host != "localhost" || traffic[0].Requests != 1 || traffic[0].BytesIn < 5000 {
		// (The tunnel counts once its ClientHello has passed: none was sent.)
		t.Fatalf("traffic %+v when End returned, want one summary of the request", traffic)
	}
	// The connection End closed is gone: a new request opens another, and
	// closing the old one hands nothing twice.
	c.CloseIdleConnections()
	f.p.End("run-1")
	if _, traffic, _ := f.ev.snapshot(); len(traffic) != 1 {
		t.Fatalf("traffic %+v after a second End, want the one summary", traffic)
	}
}
