package fleet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/nodetest"
	"corral/internal/relay"
	"corral/internal/relay/noderpc"
	"corral/internal/supervisor"
)

// TestMain lets the test binary act as sessions' supervisors and the
// sandbox's init, for the node.Local behind the suite's routers.
func TestMain(m *testing.M) {
	supervisor.Dispatch()
	os.Exit(m.Run())
}

// TestConformance: the Router, over a real relay to one sandbox node (a
// node.Local), passes the suite every implementation of corral.Trees and
// corral.Sessions passes. The node replays the access decision.
func TestConformance(t *testing.T) {
	nodetest.Run(t, relayedRouter)
}

// nodeA is a store in which the one node, nod_a, holds every agent.
type nodeA struct{}

func (nodeA) AgentNode(context.Context, string) (string, error)          { return "nod_a", nil }
func (nodeA) PlaceAgent(context.Context, string, string) (string, error) { return "nod_a", nil }
func (nodeA) MoveAgent(context.Context, string, string, string) error {
	return corral.Errorf(corral.ECONFLICT, "one node: nothing moves")
}
func (nodeA) Run(_ context.Context, id string) (corral.Run, error) {
	return corral.Run{ID: id, AgentID: "agt_suite"}, nil
}
func (nodeA) Nodes(context.Context) ([]corral.NodeRecord, error) {
	return []corral.NodeRecord{{ID: "nod_a", Name: "node-a"}}, nil
}
func (nodeA) SetRunNode(context.Context, string, string) error { return nil }

// relayedRouter is a Router whose one node, a node.Local over a fresh
// data directory, is connected to its fleet as a sandbox node connects to
// control: over a relay (a WebSocket on loopback, yamux on it), answering
// with noderpc.Serve.
func relayedRouter(t *testing.T, setup nodetest.Setup) nodetest.Subject {
	l, data := nodetest.NewLocal(t, setup, nil)
	f := New(oneNode{}, Config{})
	t.Cleanup(f.Close)
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(srv.Close)
	r := NewRouter(f, nodeA{}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := relay.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+RelayPath,
		http.Header{"Authorization": {"Bearer cnc_suite"}, noderpc.VersionHeader: {noderpc.Version}}, relay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- noderpc.Serve(s, l, nil) }()
	// Before the node's own cleanups: no call is left running on it.
	t.Cleanup(func() {
		s.Close()
		<-served
	})
	deadline := time.Now().Add(time.Minute)
	for len(f.Connected()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the node did not connect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nodetest.Subject{Trees: r, Sessions: r, Tree: nodetest.StageTree(data), Caps: nodetest.Caps{ReplaysAccess: true}}
}
