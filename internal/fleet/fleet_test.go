package fleet

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/poll"
	"corral/internal/relay"
	"corral/internal/relay/noderpc"
)

// twoNodes is a store in which run_a's session is on nod_a and run_b's
// agent is on nod_b (its run recorded no node yet).
type twoNodes struct{ placements }

func (twoNodes) Run(_ context.Context, id string) (corral.Run, error) {
	switch id {
	case "run_a":
		return corral.Run{ID: id, AgentID: "agt_a", Node: "nod_a"}, nil
	case "run_b":
		return corral.Run{ID: id, AgentID: "agt_b"}, nil
	}
	return corral.Run{}, corral.Errorf(corral.ENOTFOUND, "no run")
}

func (twoNodes) AgentNode(_ context.Context, agentID string) (string, error) {
	if agentID == "agt_b" {
		return "nod_b", nil
	}
	return "", nil
}

// TestGatewayConnsOfOwnSessionsOnly: a node carries a session's
// connection to the gateway only for a session it runs; the gateway gets
// it with its preamble intact. One naming another node's session, an
// unknown one, none, or a line too long is closed unread.
func TestGatewayConnsOfOwnSessionsOnly(t *testing.T) {
	for _, ask := range []string{askGateway, askEgress} {
		t.Run(ask, func(t *testing.T) { testCarried(t, ask) })
	}
}

// testCarried is TestGatewayConnsOfOwnSessionsOnly for one ask: the
// connection reaches its own listener (the gateway's, or the egress
// proxy's), never the other.
func testCarried(t *testing.T, ask string) {
	f := New(nil, Config{})
	NewRouter(f, twoNodes{}, time.Millisecond)
	defer f.gw.Close()
	defer f.eg.Close()
	to, other := f.gw, f.eg
	if ask == askEgress {
		to, other = f.eg, f.gw
	}
	tests := []struct {
		name, node, sent string
		carried          bool
	}{
		{"its own session (the run's record)", "nod_a", corral.GatewayPreamble("run_a"), true},
		{"its own session (the agent's placement)", "nod_b", corral.GatewayPreamble("run_b"), true},
		{"another node's session", "nod_b", corral.GatewayPreamble("run_a"), false},
		{"another node's agent", "nod_a", corral.GatewayPreamble("run_b"), false},
		{"an unknown run", "nod_a", corral.GatewayPreamble("run_zz"), false},
		{"no preamble", "nod_a", "POST /v1/responses HTTP/1.1\n", false},
		{"an empty session", "nod_a", corral.GatewayPreamble(""), false},
		{"a line past the reader", "nod_a", corral.GatewayPreamble(strings.Repeat("x", 300)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, ctl := net.Pipe()
			defer node.Close()
			go f.answer(&member{rec: corral.NodeRecord{ID: tt.node}}, ctl)
			const request = "POST /v1/responses HTTP/1.1\r\n\r\n"
			go io.WriteString(node, ask+"\n"+tt.sent+request)
			got := make(chan net.Conn, 1)
			go func() {
				if c, err := to.Accept(); err == nil {
					got <- c
				}
			}()
			elsewhere := make(chan net.Conn, 1)
			go func() {
				if c, err := other.Accept(); err == nil {
					elsewhere <- c
				}
			}()
			defer func() {
				other.push(nil) // unblock the Accept above
				if c := <-elsewhere; c != nil {
					t.Errorf("the connection also reached the other listener")
				}
			}()
			if !tt.carried {
				// Closed by control: the node's end reads EOF.
				node.SetReadDeadline(time.Now().Add(time.Minute))
				if _, err := node.Read(make([]byte, 1)); err != io.EOF {
					t.Fatalf("the node's stream read %v, want it closed", err)
				}
				select {
				case c := <-got:
					t.Fatalf("the gateway got a connection: %v", c)
				default:
				}
				to.push(nil) // unblock the Accept above
				<-got
				return
			}
			c := <-got
			want := tt.sent + request
			b := make([]byte, len(want))
			if _, err := io.ReadFull(c, b); err != nil || string(b) != want {
				t.Fatalf("the gateway read %q, %v; want %q", b, err, want)
			}
		})
	}
}

// TestAskLineBounded: what a node's stream asks is one short line; a node
// that sends megabytes with no newline has its stream closed after at
// most the reader's 256 bytes, never buffered whole by control.
func TestAskLineBounded(t *testing.T) {
	f := New(nil, Config{})
	defer f.gw.Close()
	node, ctl := net.Pipe()
	defer node.Close()
	go f.answer(&member{rec: corral.NodeRecord{ID: "nod_a"}}, ctl)
	node.SetWriteDeadline(time.Now().Add(time.Minute))
	n, err := node.Write(make([]byte, 1<<20))
	if err == nil || n > 256 {
		t.Fatalf("control read %d bytes of a 1 MiB line (%v): want the stream closed within 256", n, err)
	}
}

// oneNode authenticates every credential as nod_a.
type oneNode struct{}

func (oneNode) Join(context.Context, string, string) (corral.NodeRecord, string, time.Time, error) {
	return corral.NodeRecord{}, "", time.Time{}, corral.Errorf(corral.EUNAUTH, "no")
}
func (oneNode) Authenticate(context.Context, string) (corral.NodeRecord, error) {
	return corral.NodeRecord{ID: "nod_a"}, nil
}
func (oneNode) Rotate(context.Context, string) (string, time.Time, error) {
	return "", time.Time{}, nil
}
func (oneNode) Seen(context.Context, string) error { return nil }

// TestNoTakeover: a second connection with a node's credential, while the
// node's relay is alive, is refused (409, counted for the admin) and the
// node keeps its relay; once the node is gone, a connection with its
// credential is taken in its place (a restarted node).
func TestNoTakeover(t *testing.T) {
	f := New(oneNode{}, Config{})
	defer f.gw.Close()
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + RelayPath
	header := http.Header{"Authorization": {"Bearer cnc_copied"}, noderpc.VersionHeader: {noderpc.Version}}
	dial := func() (*relay.Session, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return relay.Dial(ctx, url, header, relay.Config{})
	}
	live := func() *relay.Session {
		f.mu.Lock()
		defer f.mu.Unlock()
		if m := f.live["nod_a"]; m != nil {
			return m.session
		}
		return nil
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		poll.Within(t, time.Minute, what, cond)
	}

	first, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	waitFor("the node to connect", func() bool { return live() != nil })
	held := live()

	second, err := dial()
	if err == nil {
		second.Close()
		t.Fatal("a second connection with the node's credential was taken")
	}
	if corral.ErrorCode(err) != corral.ECONFLICT {
		t.Fatalf("the second connection: %v, want a conflict", err)
	}
	if live() != held || !first.Alive() {
		t.Fatal("the node lost its relay to the second connection")
	}
	if r := f.Refused("nod_a"); r.Count != 1 || r.Last.IsZero() {
		t.Fatalf("refusals = %+v, want 1", r)
	}

	// The node goes away: its credential connects again.
	first.Close()
	waitFor("control to see the node gone", func() bool {
		select {
		case <-held.Done():
			return true
		default:
			return false
		}
	})
	third, err := dial()
	if err != nil {
		t.Fatalf("the node's reconnect once it was gone: %v", err)
	}
	defer third.Close()
	waitFor("the reconnect to be taken", func() bool { s := live(); return s != nil && s != held })
}

// TestNodeStreamsBounded: a node has at most MaxStreams streams open to
// control; one past it is closed at once, and a place comes back when a
// stream ends.
func TestNodeStreamsBounded(t *testing.T) {
	f := New(oneNode{}, Config{MaxStreams: 2})
	defer f.gw.Close()
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, err := relay.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+RelayPath,
		http.Header{"Authorization": {"Bearer cnc_x"}, noderpc.VersionHeader: {noderpc.Version}}, relay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	closedByControl := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	var held []net.Conn
	for range 2 { // two streams that say nothing yet: each holds a place
		c, err := node.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	extra, err := node.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	extra.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a third stream read %v, want it closed by control", err)
	}
	for i, c := range held {
		if closedByControl(c) {
			t.Fatalf("held stream %d was closed", i)
		}
	}
	// One ends (an unknown ask): its place comes back.
	io.WriteString(held[0], "nothing\n")
	held[0].SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := held[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("an unknown ask read %v, want closed", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := node.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !closedByControl(c) {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no place came back after a stream ended")
		}
	}
}
