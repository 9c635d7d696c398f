package app

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"corral/internal/netguard"
	"corral/internal/poll"
)

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
	g := guardListener(ln, Config{MaxConns: int(limit) + 1}, slog.New(slog.NewTextHandler(&log, nil)))
	defer g.Close()
	if g.MaxConns() != budget || !strings.Contains(log.String(), "--max-conns lowered") {
		t.Fatalf("--max-conns %d under a limit of %d gave a cap of %d, want %d with a warning; log:\n%s",
			limit+1, limit, g.MaxConns(), budget, log.String())
	}
}

// TestGated: until open, a starting control answers 503 to everything but
// the relay and the health checks, except, on a shared store, the store
// reads, which it answers as it did standing by; once open, the server's
// own handler answers everything.
func TestGated(t *testing.T) {
	server := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "server") })
	reads := func(rest http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "GET" && r.URL.Path == "/api/agents" {
				io.WriteString(w, "read")
				return
			}
			rest.ServeHTTP(w, r)
		})
	}
	for _, tc := range []struct {
		open         bool
		reads        bool
		method, path string
		want         string // the body, or the status when not 200
	}{
		{false, false, "GET", "/api/agents", "503"},
		{false, false, "GET", "/healthz", "server"},
		{false, false, "GET", "/readyz", "server"},
		{false, false, "GET", "/relay", "server"},
		{false, true, "GET", "/api/agents", "read"},
		{false, true, "POST", "/api/agents", "503"},
		{false, true, "GET", "/relay", "server"},
		{true, true, "GET", "/api/agents", "server"},
		{true, false, "POST", "/api/agents", "server"},
	} {
		var open atomic.Bool
		open.Store(tc.open)
		var r func(http.Handler) http.Handler
		if tc.reads {
			r = reads
		}
		rec := httptest.NewRecorder()
		gated(server, &open, r).ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		got := rec.Body.String()
		if rec.Code != http.StatusOK {
			got = fmt.Sprint(rec.Code)
		}
		if got != tc.want {
			t.Errorf("open %v, reads %v, %s %s: %s, want %s", tc.open, tc.reads, tc.method, tc.path, got, tc.want)
		}
	}
}
