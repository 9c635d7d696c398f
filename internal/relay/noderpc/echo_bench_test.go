package noderpc_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/relay"
	"corral/internal/relay/noderpc"
	"corral/internal/vethtest"
)

// overRelay serves n as a node does, over a whole relay whose control
// end listens on a listener of listen's, and returns control's client.
func overRelay(b testing.TB, listen func() (net.Listener, error), n noderpc.Node) *noderpc.Client {
	b.Helper()
	ln, err := listen()
	if err != nil {
		b.Fatal(err)
	}
	accepted := make(chan *relay.Session, 1)
	srv := httptest.NewUnstartedServer(relay.Handler(func(*http.Request) (string, error) { return "node", nil },
		func(_ string, s *relay.Session) { accepted <- s }, relay.Config{}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	b.Cleanup(srv.Close)
	nodeEnd, err := relay.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil, relay.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nodeEnd.Close() })
	serveOn(b, nodeEnd, n)
	select {
	case control := <-accepted:
		return noderpc.NewClient(control.Open)
	case <-time.After(patience):
		b.Fatal("the node did not connect")
		return nil
	}
}

// BenchmarkTerminalEcho measures a keystroke's echo (a byte typed into a
// session's shell until the terminal shows it back) through the whole
// relay (Node RPC on a yamux stream of a WebSocket over TCP, as between
// control and a node) against the same on node.Local directly (role
// all), in the same run, alternating, each on a session of its own;
// relay/all is the ratio of their medians. On loopback, and on a veth
// pair to a network namespace where control's end listens (vethtest,
// root only).
//
//	go test -run '^$' -bench TerminalEcho -benchtime 200x -count 3 ./internal/relay/noderpc/
func BenchmarkTerminalEcho(b *testing.B) {
	b.Run("loopback", func(b *testing.B) {
		benchEcho(b, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
	})
	b.Run("veth", func(b *testing.B) {
		pair := vethtest.New(b)
		benchEcho(b, func() (net.Listener, error) { return pair.Listen(0) })
	})
}

func benchEcho(b *testing.B, listen func() (net.Listener, error)) {
	needSessions(b)
	l, _ := newLocal(b)
	c := overRelay(b, listen, l.Local)
	// A session each, so neither viewer sees the other's keystrokes.
	startSession(b, c, "run_echo_a")
	startSession(b, c, "run_echo_b")
	direct, err := l.Local.Terminal(acting, "run_echo_a", 80, 24)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	relayed, err := c.Terminal(acting, "run_echo_b", 80, 24)
	if err != nil {
		b.Fatal(err)
	}
	defer relayed.Close()
	echo := func(term corral.Terminal, key byte) time.Duration {
		buf := make([]byte, 4096)
		start := time.Now()
		if _, err := term.Write([]byte{key}); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := term.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			if bytes.IndexByte(buf[:n], key) >= 0 {
				return time.Since(start)
			}
		}
	}
	var all, rel []time.Duration
	i := 0
	for b.Loop() {
		key := byte('a' + i%26)
		if i%2 == 0 {
			all = append(all, echo(direct, key))
			rel = append(rel, echo(relayed, key))
		} else {
			rel = append(rel, echo(relayed, key))
			all = append(all, echo(direct, key))
		}
		i++
	}
	med := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		for x := 1; x < len(s); x++ {
			for y := x; y > 0 && s[y] < s[y-1]; y-- {
				s[y], s[y-1] = s[y-1], s[y]
			}
		}
		return s[len(s)/2]
	}
	ma, mr := med(all), med(rel)
	b.ReportMetric(float64(ma.Microseconds()), "all-µs")
	b.ReportMetric(float64(mr.Microseconds()), "relay-µs")
	b.ReportMetric(float64(mr)/float64(ma), "relay/all")
}
