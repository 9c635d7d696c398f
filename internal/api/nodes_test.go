package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"corral"
	"corral/internal/api"
	"corral/internal/service"
)

// TestNodesAPI: an admin lists the enrolled nodes with how each is now,
// and drains one; nobody else may.
func TestNodesAPI(t *testing.T) {
	e := newEnv(t, envOptions{})
	admin := e.signup("admin@example.com", "Admin")
	user := e.signup("user@example.com", "User")
	enrollment := service.NewEnrollment(e.db, service.NodesConfig{})
	refusedAt := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	// The fleet of a role control, as far as the API sees it: how each
	// node is, and moves.
	var moved []string
	nodes := service.NewNodes(service.NodesDeps{Store: e.db, Checks: e.db,
		Live: func(_ context.Context, rec corral.NodeRecord) service.NodeLive {
			if rec.Draining {
				return service.NodeLive{Status: corral.NodeDraining, Load: corral.NodeLoad{Sessions: 1, MaxSessions: 4}}
			}
			return service.NodeLive{Status: corral.NodeReady, Load: corral.NodeLoad{Sessions: 2, MaxSessions: 4}, Refused: 3, LastRefused: refusedAt}
		},
		Move: func(_ context.Context, agentID, nodeID string) error {
			moved = append(moved, agentID+"→"+nodeID)
			return nil
		},
	})
	a := e.app
	e.serve(api.New(api.Config{}, api.Services{Accounts: a.Accounts, Agents: a.Agents, Decisions: a.Decisions, Files: a.Files, Repositories: a.Repositories, Runs: a.Runs,
		Credentials: a.Credentials, Egress: a.Egress, Documents: a.Documents, Models: a.Models, Nodes: nodes}))
	ctx := context.Background()
	token, _, err := enrollment.JoinToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, _, _, err := enrollment.Join(ctx, token, "sandbox-a")
	if err != nil {
		t.Fatal(err)
	}
	var l api.List[api.NodeView]
	admin.do("GET", "/api/nodes", nil).want(http.StatusOK).decode(&l)
	if len(l.Items) != 1 || l.Items[0].ID != n.ID || l.Items[0].Name != "sandbox-a" || l.Items[0].Status != "ready" || l.Items[0].Runs != 2 || l.Items[0].MaxSessions != 4 {
		t.Fatalf("nodes = %+v", l.Items)
	}
	if got := l.Items[0]; got.RefusedConnections != 3 || got.LastRefusedAt == nil || *got.LastRefusedAt != "2026-12-02T14:00:00Z" {
		t.Fatalf("the node's refused connections = %d at %v, want 3 at 14:00", got.RefusedConnections, got.LastRefusedAt)
	}
	user.do("GET", "/api/nodes", nil).want(http.StatusForbidden)
	user.do("POST", "/api/nodes/"+n.ID+"/drain", nil).want(http.StatusForbidden)
	admin.do("POST", "/api/nodes/"+n.ID+"/drain", nil).want(http.StatusNoContent)
	admin.do("POST", "/api/nodes/nod_doesnotexist/drain", nil).want(http.StatusNotFound)
	admin.do("GET", "/api/nodes", nil).want(http.StatusOK).decode(&l)
	if l.Items[0].Status != "draining" {
		t.Fatalf("after drain: %+v", l.Items[0])
	}
	user.do("DELETE", "/api/nodes/"+n.ID+"/drain", nil).want(http.StatusForbidden)
	admin.do("DELETE", "/api/nodes/"+n.ID+"/drain", nil).want(http.StatusNoContent)
	admin.do("DELETE", "/api/nodes/nod_doesnotexist/drain", nil).want(http.StatusNotFound)
	admin.do("GET", "/api/nodes", nil).want(http.StatusOK).decode(&l)
	if l.Items[0].Status != "ready" {
		t.Fatalf("after undrain: %+v", l.Items[0])
	}

	// Moving an agent: an admin's, of an agent with nothing under way.
	id := user.createAgent("mover")
	body := map[string]string{"agent_id": id}
	user.do("POST", "/api/nodes/"+n.ID+"/agents", body).want(http.StatusForbidden)
	admin.do("POST", "/api/nodes/"+n.ID+"/agents", map[string]string{"agent_id": "agt_doesnotexist"}).want(http.StatusNotFound)
	admin.do("POST", "/api/nodes/"+n.ID+"/agents", map[string]string{}).want(http.StatusBadRequest)
	admin.do("POST", "/api/nodes/"+n.ID+"/agents", body).want(http.StatusNoContent)
	if len(moved) != 1 || moved[0] != id+"→"+n.ID {
		t.Fatalf("moves = %v", moved)
	}
	e.assertNoSecrets(t)
}
