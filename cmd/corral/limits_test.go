package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"corral/internal/netguard"
	"corral/internal/poll"
)

func TestServeLimitFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		conns   int
		perAddr int
		proxies string
		maxSess int
		err     string // a substring of the error; "" for none
	}{
		{name: "defaults", conns: 0, perAddr: netguard.DefaultMaxConnsPerAddr},
		{name: "flags", args: []string{"--max-conns", "500", "--max-conns-per-addr", "0"}, conns: 500, perAddr: 0},
		{name: "environment", env: map[string]string{"CORRAL_MAX_CONNS": "700", "CORRAL_MAX_CONNS_PER_ADDR": "16"}, conns: 700, perAddr: 16},
		{name: "a flag beats the environment", args: []string{"--max-conns-per-addr", "32"}, env: map[string]string{"CORRAL_MAX_CONNS_PER_ADDR": "16"}, perAddr: 32},
		{name: "proxies repeated and comma-separated", args: []string{"--trusted-proxy", "10.0.0.0/8, 192.0.2.1", "--trusted-proxy", "2001:db8::/32"},
			perAddr: netguard.DefaultMaxConnsPerAddr, proxies: "10.0.0.0/8,192.0.2.1/32,2001:db8::/32"},
		{name: "proxies from the environment", env: map[string]string{"CORRAL_TRUSTED_PROXY": "172.16.0.0/12,fd00::1"},
			perAddr: netguard.DefaultMaxConnsPerAddr, proxies: "172.16.0.0/12,fd00::1/128"},
		{name: "proxy flags replace the environment's", args: []string{"--trusted-proxy", "10.1.0.0/16"}, env: map[string]string{"CORRAL_TRUSTED_PROXY": "172.16.0.0/12"},
			perAddr: netguard.DefaultMaxConnsPerAddr, proxies: "10.1.0.0/16"},
		{name: "a CIDR's host bits are dropped", args: []string{"--trusted-proxy", "10.1.2.3/16"}, perAddr: netguard.DefaultMaxConnsPerAddr, proxies: "10.1.0.0/16"},
		{name: "not a CIDR", args: []string{"--trusted-proxy", "proxy.internal"}, err: "neither a CIDR nor an address"},
		{name: "not a CIDR in the environment", env: map[string]string{"CORRAL_TRUSTED_PROXY": "10.0.0.0/33"}, err: "CORRAL_TRUSTED_PROXY"},
		{name: "negative cap", args: []string{"--max-conns-per-addr", "-1"}, err: "must not be negative"},
		{name: "cap not a number", env: map[string]string{"CORRAL_MAX_CONNS": "lots"}, err: "CORRAL_MAX_CONNS"},
		{name: "max sessions", args: []string{"--max-sessions", "8"}, perAddr: netguard.DefaultMaxConnsPerAddr, maxSess: 8},
		{name: "max sessions from the environment", env: map[string]string{"CORRAL_MAX_SESSIONS": "3"}, perAddr: netguard.DefaultMaxConnsPerAddr, maxSess: 3},
		{name: "negative max sessions", args: []string{"--max-sessions", "-2"}, err: "--max-sessions must not be negative"},
		{name: "max sessions not a number", env: map[string]string{"CORRAL_MAX_SESSIONS": "many"}, err: "CORRAL_MAX_SESSIONS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServe(tt.args, io.Discard, func(k string) string { return tt.env[k] })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseServe(%q) error = %v, want one saying %q", tt.args, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServe(%q): %v", tt.args, err)
			}
			got := (&prefixList{list: c.TrustedProxies}).String()
			if c.MaxConns != tt.conns || c.MaxConnsPerAddr != tt.perAddr || got != tt.proxies || c.MaxSessions != tt.maxSess {
				t.Fatalf("parseServe(%q) = max-conns %d, per-addr %d, proxies %q, max-sessions %d; want %d, %d, %q, %d",
					tt.args, c.MaxConns, c.MaxConnsPerAddr, got, c.MaxSessions, tt.conns, tt.perAddr, tt.proxies, tt.maxSess)
			}
		})
	}
}

// TestHTTPTimeouts runs the server's HTTP settings with short timeouts
// against clients that are too slow, and one stream that outlives the
// request timeout, as event streams do.
func TestHTTPTimeouts(t *testing.T) {
	timeouts := httpTimeouts{Header: 300 * time.Millisecond, Request: 600 * time.Millisecond, Idle: 600 * time.Millisecond, Write: 600 * time.Millisecond}
	var bodyErrors, streamCancelled, bigWriteErrors atomic.Int64
	const lines = 30 // 50ms apart: the stream lasts 1.5s, well past timeouts.Request
	mux := http.NewServeMux()
	mux.HandleFunc("POST /body", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			bodyErrors.Add(1)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 256 { // far more than any socket buffer holds
			if _, err := w.Write(chunk); err != nil {
				bigWriteErrors.Add(1)
				return
			}
		}
	})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for i := range lines {
			rc.SetWriteDeadline(time.Now().Add(timeouts.Write)) // as runEvents does before each write
			select {
			case <-r.Context().Done():
				streamCancelled.Add(1)
				return
			case <-time.After(50 * time.Millisecond):
			}
			fmt.Fprintf(w, "line %d\n", i)
			rc.Flush()
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(mux, slog.New(slog.DiscardHandler), timeouts)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// cutOff sends the opening, then trickles a byte of more every 50ms (nothing, for "")
	// until the server ends the connection, and fails the test if it
	// never does.
	cutOff := func(t *testing.T, opening, more string) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ended := make(chan struct{})
		go func() {
			io.Copy(io.Discard, c) // until the server closes
			close(ended)
		}()
		io.WriteString(c, opening)
		liveness := time.After(30 * time.Second) // not a timing assertion
		for i := 0; ; i++ {
			select {
			case <-ended:
				return
			case <-liveness:
				t.Fatalf("the server never cut off a client sending %q then %q slowly", opening, more)
			case <-time.After(50 * time.Millisecond):
				if more != "" {
					c.Write([]byte{more[i%len(more)]})
				}
			}
		}
	}
	t.Run("connection that sends nothing", func(t *testing.T) { cutOff(t, "", "") })
	t.Run("slowloris trickling headers", func(t *testing.T) {
		cutOff(t, "GET /stream HTTP/1.1\r\nHost: corral\r\n", "X-Slow: drip\r\n")
	})
	t.Run("slow body", func(t *testing.T) {
		cutOff(t, "POST /body HTTP/1.1\r\nHost: corral\r\nContent-Length: 100000\r\n\r\n", "x")
		poll.Until(t, "the handler to see its body cut", func() bool { return bodyErrors.Load() == 1 })
	})
	t.Run("idle kept-alive connection", func(t *testing.T) {
		cutOff(t, "POST /body HTTP/1.1\r\nHost: corral\r\nContent-Length: 2\r\n\r\nok", "")
	})
	t.Run("a client that never reads its answer", func(t *testing.T) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: corral\r\n\r\n") // and never read
		poll.Until(t, "the handler's write to fail", func() bool { return bigWriteErrors.Load() == 1 })
	})
	t.Run("a stream outlives the request and write timeouts", func(t *testing.T) {
		res, err := http.Get("http://" + ln.Addr().String() + "/stream")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		n := 0
		for s := bufio.NewScanner(res.Body); s.Scan(); n++ {
		}
		if n != lines || streamCancelled.Load() != 0 {
			t.Fatalf("the stream gave %d lines of %d (cancelled %d times): a timeout cut it", n, lines, streamCancelled.Load())
		}
	})
}

// TestTooHighMaxConnsIsLowered: the reserve of descriptors is kept whatever
// --max-conns says.
func TestTooHighMaxConnsIsLowered(t *testing.T) {
	limit, err := netguard.RaiseFileLimit()
	if err != nil {
		t.Skipf("no descriptor limit here: %v", err)
	}
	budget, _ := netguard.Budget(limit)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	g := guardListener(ln, serveConfig{MaxConns: int(limit) + 1}, slog.New(slog.NewTextHandler(&log, nil)))
	defer g.Close()
	if g.MaxConns() != budget || !strings.Contains(log.String(), "--max-conns lowered") {
		t.Fatalf("--max-conns %d under a limit of %d gave a cap of %d, want %d with a warning; log:\n%s",
			limit+1, limit, g.MaxConns(), budget, log.String())
	}
}
