package service

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/store"
)

func TestNodesJoinAndCredentials(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := NewEnrollment(db, NodesConfig{Now: clock})

	token, expires, err := s.JoinToken(ctx)
	if err != nil || !strings.HasPrefix(token, "cnj_") || !expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("join token = %q until %v, %v", token, expires, err)
	}
	n, cred, credExpires, err := s.Join(ctx, token, "sandbox-a")
	if err != nil || n.Name != "sandbox-a" || !strings.HasPrefix(cred, "cnc_") || !credExpires.Equal(now.Add(6*time.Hour)) {
		t.Fatalf("join = %+v, %q until %v, %v", n, cred, credExpires, err)
	}
	for _, tt := range []struct{ name, token, node string }{
		{"the same token again", token, "sandbox-b"},
		{"a malformed token", "cnj_short", "sandbox-b"},
		{"a credential as a token", cred, "sandbox-b"},
	} {
		if _, _, _, err := s.Join(ctx, tt.token, tt.node); corral.ErrorCode(err) != corral.EUNAUTH {
			t.Errorf("%s: %v, want EUNAUTH", tt.name, err)
		}
	}
	if _, _, _, err := s.Join(ctx, token, "../bad"); corral.ErrorCode(err) != corral.ENAME {
		t.Errorf("a bad name: %v, want invalid_name", err)
	}

	if got, err := s.Authenticate(ctx, cred); err != nil || got.ID != n.ID {
		t.Fatalf("Authenticate = %+v, %v", got, err)
	}
	now = now.Add(time.Hour) // control rotates every hour
	rotated, _, err := s.Rotate(ctx, n.ID)
	if err != nil || rotated == cred {
		t.Fatalf("Rotate = %q, %v", rotated, err)
	}
	for _, c := range []string{cred, rotated} {
		if _, err := s.Authenticate(ctx, c); err != nil {
			t.Errorf("a live credential refused: %v", err)
		}
	}
	now = now.Add(5 * time.Hour) // the first credential's end; the rotated one lives on
	if _, err := s.Authenticate(ctx, cred); corral.ErrorCode(err) != corral.EUNAUTH {
		t.Errorf("an expired credential: %v, want EUNAUTH", err)
	}
	if _, err := s.Authenticate(ctx, rotated); err != nil {
		t.Errorf("the rotated credential: %v", err)
	}

	admin, user := corral.User{ID: "usr_a", Admin: true}, corral.User{ID: "usr_b"}
	nodes := NewNodes(NodesDeps{Store: db, Live: func(context.Context, corral.NodeRecord) NodeLive { return NodeLive{Status: corral.NodeLost} }})
	if _, err := nodes.All(ctx, user); corral.ErrorCode(err) != corral.EFORBIDDEN {
		t.Errorf("a user lists nodes: %v", err)
	}
	if err := nodes.Drain(ctx, user, n.ID, true); corral.ErrorCode(err) != corral.EFORBIDDEN {
		t.Errorf("a user drains: %v", err)
	}
	if err := nodes.Drain(ctx, admin, n.ID, true); err != nil {
		t.Fatal(err)
	}
	if all, err := nodes.All(ctx, admin); err != nil || len(all) != 1 || !all[0].Draining {
		t.Fatalf("nodes = %+v, %v", all, err)
	}
}
