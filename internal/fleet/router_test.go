package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"corral"
)

// placements is a store in which every run is agent a's, placed on node n.
type placements struct{}

func (placements) AgentNode(context.Context, string) (string, error) { return "nod_n", nil }
func (placements) PlaceAgent(context.Context, string, string) (string, error) {
	return "nod_n", nil
}
func (placements) Run(_ context.Context, id string) (corral.Run, error) {
	return corral.Run{ID: id, AgentID: "agt_a"}, nil
}
func (placements) Nodes(context.Context) ([]corral.NodeRecord, error) {
	return []corral.NodeRecord{{ID: "nod_n"}}, nil
}
func (placements) SetRunNode(context.Context, string, string) error { return nil }
func (placements) MoveAgent(context.Context, string, string, string) error {
	return corral.Errorf(corral.ECONFLICT, "placements do not move")
}

// TestAwayNodeCostsOneGrace: calls for a node that does not come back
// wait for it through the grace once; after that they fail at once, and
// a call for a workspace never waits. All are EUNAVAIL naming the node.
func TestAwayNodeCostsOneGrace(t *testing.T) {
	r := NewRouter(New(nil, Config{}), placements{}, 300*time.Millisecond)
	if _, err := r.Session(context.Background(), "run_1"); corral.ErrorCode(err) != corral.EUNAVAIL {
		t.Fatalf("the first call: %v, want EUNAVAIL", err)
	}
	// Were the grace counted per call, this one would wait 300 ms and be
	// cut by its own deadline instead.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.Exec(ctx, "run_2", corral.Command{ID: "c"}); corral.ErrorCode(err) != corral.EUNAVAIL {
		t.Fatalf("a call after the grace: %v, want EUNAVAIL at once", err)
	}
	_, _, err := r.ReadFile(ctx, corral.FileScope{AgentID: "agt_a"}, "x")
	if corral.ErrorCode(err) != corral.EUNAVAIL || ctx.Err() != nil {
		t.Fatalf("a workspace call: %v (ctx %v), want EUNAVAIL at once", err, ctx.Err())
	}
}

// draining is placements whose one node is draining.
type draining struct{ placements }

func (draining) Nodes(context.Context) ([]corral.NodeRecord, error) {
	return []corral.NodeRecord{{ID: "nod_n", Name: "node-n", Draining: true}}, nil
}

// TestDrainingNodeStartsNoRun: a run of an agent on a draining node is
// refused its session, saying why, before the node is asked.
func TestDrainingNodeStartsNoRun(t *testing.T) {
	r := NewRouter(New(nil, Config{}), draining{}, time.Millisecond)
	err := r.StartSession(context.Background(), corral.SessionSpec{ID: "run_1"})
	if corral.ErrorCode(err) != corral.EUNAVAIL || !strings.Contains(corral.ErrorMessage(err), "node-n") || !strings.Contains(corral.ErrorMessage(err), "draining") {
		t.Fatalf("StartSession on a draining node: %v", err)
	}
}

// TestNoCallWhileMoving: while an agent's workspace moves, a call on it
// is refused at once, saying why, before any node is asked; a move is
// refused while a call on it is under way.
func TestNoCallWhileMoving(t *testing.T) {
	r := NewRouter(New(nil, Config{}), placements{}, time.Millisecond)
	r.moving["agt_a"] = true
	_, _, err := r.ReadFile(context.Background(), corral.FileScope{AgentID: "agt_a"}, "x")
	if corral.ErrorCode(err) != corral.ECONFLICT || !strings.Contains(corral.ErrorMessage(err), "moving") {
		t.Fatalf("a read while moving: %v, want ECONFLICT saying it moves", err)
	}
	delete(r.moving, "agt_a")
	done, err := r.use("agt_a")
	if err != nil {
		t.Fatal(err)
	}
	if r.inflight["agt_a"] != 1 {
		t.Fatalf("in flight: %d, want 1", r.inflight["agt_a"])
	}
	done()
	done() // once only
	if n, ok := r.inflight["agt_a"]; ok {
		t.Fatalf("in flight after done: %d", n)
	}
}

// TestDropAgentNamesAwayNodes: a deleted agent's files are dropped on
// every node; one that is not connected keeps them, and the error names
// it rather than passing for done.
func TestDropAgentNamesAwayNodes(t *testing.T) {
	r := NewRouter(New(nil, Config{}), draining{}, time.Millisecond)
	err := r.DropAgent(context.Background(), "agt_a")
	if corral.ErrorCode(err) != corral.EUNAVAIL || !strings.Contains(err.Error(), "node-n") {
		t.Fatalf("DropAgent with its node away: %v, want EUNAVAIL naming node-n", err)
	}
}
