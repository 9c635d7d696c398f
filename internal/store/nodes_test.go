package store

import (
	"context"
	"testing"
	"time"

	"corral"
)

func TestNodeEnrollment(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if err := db.CreateJoinToken(ctx, []byte("join-1"), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateJoinToken(ctx, []byte("join-old"), now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
		node  string
		want  string // error code; "" for success
	}{
		{"a live token", "join-1", "nod_a", ""},
		{"used once already", "join-1", "nod_b", corral.ENOTFOUND},
		{"expired", "join-old", "nod_c", corral.ENOTFOUND},
		{"unknown", "join-never", "nod_d", corral.ENOTFOUND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.Enroll(ctx, []byte(tt.token), now, corral.NodeRecord{ID: tt.node, Name: "sandbox-" + tt.node[4:]}, []byte("cred-"+tt.node), now.Add(6*time.Hour))
			if corral.ErrorCode(err) != tt.want && !(tt.want == "" && err == nil) {
				t.Fatalf("Enroll = %v, want %q", err, tt.want)
			}
		})
	}
	nodes, err := db.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].ID != "nod_a" {
		t.Fatalf("nodes = %+v, %v: a refused join must leave no node", nodes, err)
	}

	if got, err := db.NodeByCredential(ctx, []byte("cred-nod_a"), now); err != nil || got.ID != "nod_a" {
		t.Fatalf("NodeByCredential = %+v, %v", got, err)
	}
	if _, err := db.NodeByCredential(ctx, []byte("cred-nod_a"), now.Add(6*time.Hour)); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("an expired credential: %v", err)
	}
	// A rotation: the new one works, the old one until it expires, and an
	// expired one is forgotten.
	if err := db.AddCredential(ctx, "nod_a", []byte("cred-2"), now.Add(12*time.Hour), now.Add(7*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := db.NodeByCredential(ctx, []byte("cred-2"), now.Add(7*time.Hour)); err != nil || got.ID != "nod_a" {
		t.Fatalf("rotated credential = %+v, %v", got, err)
	}
	if n := count(t, db, "node_credentials", "node_id = 'nod_a'"); n != 1 {
		t.Fatalf("%d credentials kept, want the live one only", n)
	}
	if err := db.AddCredential(ctx, "nod_missing", []byte("cred-3"), now.Add(time.Hour), now); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("a credential for no node: %v", err)
	}

	if err := db.SetDraining(ctx, "nod_a", true); err != nil {
		t.Fatal(err)
	}
	if err := db.SetDraining(ctx, "nod_missing", true); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("drain of no node: %v", err)
	}
	for _, at := range []time.Time{now.Add(time.Minute), now} { // never backwards
		if err := db.NodeSeen(ctx, "nod_a", at); err != nil {
			t.Fatal(err)
		}
	}
	nodes, _ = db.Nodes(ctx)
	if !nodes[0].Draining || !nodes[0].LastSeen.Equal(now.Add(time.Minute)) || nodes[0].Name != "sandbox-a" {
		t.Fatalf("node = %+v", nodes[0])
	}
}

func TestPlaceAgent(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	now := time.Now()
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	for _, id := range []string{"nod_a", "nod_b"} {
		if err := db.CreateJoinToken(ctx, []byte("join-"+id), now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := db.Enroll(ctx, []byte("join-"+id), now, corral.NodeRecord{ID: id, Name: id}, []byte("cred-"+id), now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := db.AgentNode(ctx, a.ID); err != nil || got != "" {
		t.Fatalf("an unplaced agent is on %q, %v", got, err)
	}
	if got, err := db.PlaceAgent(ctx, a.ID, "nod_a"); err != nil || got != "nod_a" {
		t.Fatalf("PlaceAgent = %q, %v", got, err)
	}
	// A second placement (a race, or another control) keeps the first.
	if got, err := db.PlaceAgent(ctx, a.ID, "nod_b"); err != nil || got != "nod_a" {
		t.Fatalf("a second PlaceAgent = %q, %v, want nod_a kept", got, err)
	}
	if _, err := db.AgentNode(ctx, "agt_missing"); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("AgentNode of no agent: %v", err)
	}

	// A move is a compare and set on where the agent is.
	for _, tt := range []struct {
		name, agent, from, to, code, after string
	}{
		{"from where it is not", a.ID, "nod_b", "nod_a", corral.ECONFLICT, "nod_a"},
		{"to no node", a.ID, "nod_a", "nod_missing", corral.ENOTFOUND, "nod_a"},
		{"no agent", "agt_missing", "nod_a", "nod_b", corral.ENOTFOUND, "nod_a"},
		{"from where it is", a.ID, "nod_a", "nod_b", "", "nod_b"},
		{"again, from where it was", a.ID, "nod_a", "nod_b", corral.ECONFLICT, "nod_b"},
	} {
		if err := db.MoveAgent(ctx, tt.agent, tt.from, tt.to); corral.ErrorCode(err) != tt.code {
			t.Errorf("MoveAgent %s: %v, want %q", tt.name, err, tt.code)
		}
		if got, _ := db.AgentNode(ctx, a.ID); got != tt.after {
			t.Errorf("after MoveAgent %s the agent is on %q, want %q", tt.name, got, tt.after)
		}
	}
}
