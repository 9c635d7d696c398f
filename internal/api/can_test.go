package api_test

import (
	"net/http"
	"slices"
	"testing"

	"corral"
	"corral/internal/access"
	"corral/internal/api"
)

// TestAgentViewCan checks that every agent view carries what its caller
// may do, as the access policy decides it for the caller's level: an
// owner may send messages and delete, a viewer may only look; the list
// and the single agent agree.
func TestAgentViewCan(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Olive")
	viewer := e.signup("viewer@example.com", "Vera")
	id := owner.createAgent("helper")
	owner.grant(id, viewer.user.ID, "viewer")

	tests := []struct {
		name  string
		c     *client
		level corral.Level
	}{
		{"owner", owner, corral.LevelOwner},
		{"viewer", viewer, corral.LevelViewer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var one api.AgentView
			tt.c.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&one)
			var all api.List[api.AgentView]
			tt.c.do("GET", "/api/agents", nil).want(http.StatusOK).decode(&all)
			if len(all.Items) != 1 {
				t.Fatalf("GET /api/agents listed %d agents, want 1", len(all.Items))
			}
			var want []string
			for _, a := range access.Actions() {
				if access.Check(tt.level, a) == access.Allow {
					want = append(want, a.String())
				}
			}
			for where, got := range map[string]api.CanView{"GET /api/agents/{id}": one.Can, "GET /api/agents": all.Items[0].Can} {
				if !slices.Equal(got, want) {
					t.Errorf("%s: can = %v, want %v", where, got, want)
				}
			}
			wantSend := tt.level >= corral.LevelRunner
			if got := slices.Contains(one.Can, "send_message"); got != wantSend {
				t.Errorf("can holds send_message: %v for the %s, want %v", got, tt.name, wantSend)
			}
		})
	}
}
