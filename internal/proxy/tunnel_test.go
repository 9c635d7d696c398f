package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/egress"
	"corral/internal/poll"
)

// TestTunnelRefusals opens tunnels by hand, to send what no well-behaved
// client would: a TLS server name other than the tunnel's host, no server
// name, bytes that are not TLS at all.
func TestTunnelRefusals(t *testing.T) {
	for _, tt := range []struct {
		name string
		rule corral.EgressRule // its Ports are the upstream's
		send func(t *testing.T, f *fixture, c net.Conn) error
		want string // in the Denial's reason
	}{
		{
			name: "a server name of another host",
			rule: corral.EgressRule{Host: "localhost"},
			send: handshake(&tls.Config{ServerName: "example.test"}),
			want: `server name "example.test" is not the host the tunnel was opened for (localhost)`,
		},
		{
			name: "a server name of another host, terminated",
			rule: corral.EgressRule{Host: "localhost", Methods: []string{"GET"}},
			send: handshake(&tls.Config{ServerName: "example.test"}),
			want: `server name "example.test" is not the host the tunnel was opened for (localhost)`,
		},
		{
			name: "no server name for a host name",
			rule: corral.EgressRule{Host: "localhost"},
			send: handshake(&tls.Config{InsecureSkipVerify: true}), // no ServerName: no SNI
			want: "the TLS client named no server",
		},
		{
			name: "not TLS",
			rule: corral.EgressRule{Host: "localhost"},
			send: func(t *testing.T, f *fixture, c net.Conn) error {
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
				_, err := c.Read(make([]byte, 1))
				return err
			},
			want: "what was sent through the tunnel to localhost:%d is not TLS",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, true)
			f := newFixture(t)
			tt.rule.Ports = []int{up.port}
			f.allow(tt.rule)
			c, resp := f.connect("run-1", fmt.Sprintf("localhost:%d", up.port))
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %s", resp.Status)
			}
			if err := tt.send(t, f, c); err == nil {
				t.Fatalf("the proxy carried it through")
			}
			closedUnanswered(t, c)
			want := tt.want
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, up.port)
			}
			f.hasDenial(Denial{Host: "localhost", Port: up.port, Reason: want})
			if _, conns := up.seen(); conns != 0 {
				t.Fatalf("the upstream was connected to %d times", conns)
			}
		})
	}
}

// handshake is a TLS client handshake with cfg (trusting the test's roots)
// through the tunnel.
func handshake(cfg *tls.Config) func(t *testing.T, f *fixture, c net.Conn) error {
	return func(t *testing.T, f *fixture, c net.Conn) error {
		cfg := cfg.Clone()
		cfg.RootCAs = f.pool
		return tls.Client(c, cfg).Handshake()
	}
}

func TestConnectRefusals(t *testing.T) {
	up := newUpstream(t, true)
	for _, tt := range []struct {
		name      string
		dial      egress.Policy
		rule      corral.EgressRule
		authority string
		status    int
		body      string
	}{
		{"not on the list", egress.Policy{AllowPrivate: loopback, Resolver: noDNS}, corral.EgressRule{Host: "example.test"},
			fmt.Sprintf("localhost:%d", up.port), 403, fmt.Sprintf("corral egress: localhost:%d is not on this agent's allow-list\n", up.port)},
		{"upper case and a trailing dot are the same host", egress.Policy{AllowPrivate: loopback, Resolver: noDNS}, corral.EgressRule{Host: "example.test"},
			fmt.Sprintf("LocalHost.:%d", up.port), 403, fmt.Sprintf("corral egress: localhost:%d is not on this agent's allow-list\n", up.port)},
		{"an address of an allowed name", egress.Policy{AllowPrivate: loopback, Resolver: noDNS}, corral.EgressRule{Host: "localhost"},
			fmt.Sprintf("127.0.0.1:%d", up.port), 403, fmt.Sprintf("corral egress: 127.0.0.1:%d is not on this agent's allow-list\n", up.port)},
		{"a name of loopback, private ranges not allowed", egress.Policy{Resolver: noDNS}, corral.EgressRule{Host: "localhost"},
			fmt.Sprintf("localhost:%d", up.port), 403, "--egress-allow-private"},
		{"loopback by address, private ranges not allowed", egress.Policy{Resolver: noDNS}, corral.EgressRule{Host: "127.0.0.1"},
			fmt.Sprintf("127.0.0.1:%d", up.port), 403, "--egress-allow-private"},
		{"a name that does not resolve", egress.Policy{Resolver: noDNS}, corral.EgressRule{Host: "nowhere.test"},
			fmt.Sprintf("nowhere.test:%d", up.port), 502, "nowhere.test could not be resolved"},
		{"no port", egress.Policy{Resolver: noDNS}, corral.EgressRule{Host: "localhost"}, "localhost", 400, "host:port"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Dial = tt.dial })
			tt.rule.Ports = []int{up.port}
			f.allow(tt.rule)
			_, resp := f.connect("run-1", tt.authority)
			b := body(t, resp)
			if resp.StatusCode != tt.status || !strings.Contains(b, tt.body) {
				t.Fatalf("CONNECT %s: %s %q, want %d %q", tt.authority, resp.Status, b, tt.status, tt.body)
			}
			denied, _, _ := f.ev.snapshot()
			reason := strings.TrimSuffix(strings.TrimPrefix(tt.body, "corral egress: "), "\n")
			if tt.status == 400 && len(denied) != 0 || tt.status != 400 && (len(denied) != 1 || denied[0].Port != up.port || !strings.Contains(denied[0].Reason, reason)) {
				t.Fatalf("denials %+v, want one saying %q", denied, reason)
			}
		})
	}
	if _, conns := up.seen(); conns != 0 {
		t.Fatalf("the upstream was connected to %d times", conns)
	}
}

// TestPlainPrivate: plain HTTP to a name of loopback is refused like a
// tunnel, naming the flag that would allow it.
func TestPlainPrivate(t *testing.T) {
	up := newUpstream(t, false)
	f := newFixture(t, func(c *Config) { c.Dial = egress.Policy{Resolver: noDNS} })
	f.allow(corral.EgressRule{Host: "localhost", Ports: []int{up.port}})
	resp, err := f.client("run-1", false).Get(up.url("localhost", "/x"))
	if err != nil {
		t.Fatal(err)
	}
	if b := body(t, resp); resp.StatusCode != 403 || !strings.Contains(b, "--egress-allow-private") {
		t.Fatalf("GET: %s %q, want 403 naming --egress-allow-private", resp.Status, b)
	}
	f.hasDenial(Denial{Host: "localhost", Port: up.port, Method: "GET", Path: "/x", Reason: "--egress-allow-private"})
	if _, conns := up.seen(); conns != 0 {
		t.Fatalf("the upstream was connected to %d times", conns)
	}
}

func TestPreamble(t *testing.T) {
	for _, tt := range []struct {
		name, send string
	}{
		{"none", "GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{"another word", "corral-run r1\nGET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{"no run", "corral-session \nGET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{"a run with a space", "corral-session a b\nGET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{"longer than the bound", "corral-session " + strings.Repeat("r", maxPreamble) + "\n"},
		{"binary", "\x16\x03\x01\x00\x05hello\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.allow(corral.EgressRule{Host: "localhost"})
			c := f.rawDial()
			io.WriteString(c, tt.send)
			closedUnanswered(t, c)
		})
	}
}

// TestOriginForm: a client that takes the proxy for a server is told so.
func TestOriginForm(t *testing.T) {
	f := newFixture(t)
	for _, target := range []string{"/x", "https://localhost/x"} {
		c := f.dial("run-1")
		c.SetDeadline(time.Now().Add(poll.Patience))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", target)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if b := body(t, resp); resp.StatusCode != 400 || !strings.Contains(b, "corral egress") {
			t.Fatalf("GET %s: %s %q, want 400", target, resp.Status, b)
		}
	}
}

// TestMaxOpen: a run holds at most MaxOpen connections to the proxy at
// once; the proxy's descriptors are every run's.
func TestMaxOpen(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxOpen = 2 })
	answered := func(c net.Conn) bool {
		c.SetDeadline(time.Now().Add(poll.Patience))
		if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		return err == nil && resp.StatusCode == 400
	}
	first, second := f.dial("run-1"), f.dial("run-1")
	if !answered(first) || !answered(second) {
		t.Fatal("the first two connections were not served")
	}
	closedUnanswered(t, f.dial("run-1"))
	if !answered(f.dial("run-2")) {
		t.Fatal("another run was refused for this one's connections")
	}
	first.Close()
	poll.Until(t, "the proxy to see the first connection close", func() bool {
		f.p.ledger.mu.Lock()
		defer f.p.ledger.mu.Unlock()
		return f.p.ledger.runs["run-1"].clients == 1
	})
	if !answered(f.dial("run-1")) {
		t.Fatal("a connection after one closed was refused")
	}
}
