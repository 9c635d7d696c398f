package fleet

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"corral"
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
	f := New(nil, Config{})
	NewRouter(f, twoNodes{}, time.Millisecond)
	defer f.gw.Close()
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
			go io.WriteString(node, askGateway+"\n"+tt.sent+request)
			got := make(chan net.Conn, 1)
			go func() {
				if c, err := f.gw.Accept(); err == nil {
					got <- c
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
				f.gw.push(nil) // unblock the Accept above
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
