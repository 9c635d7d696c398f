package api

import (
	"net/http"

	"corral"
	"corral/internal/service"
)

func (s *Server) nodesService() (*service.Nodes, error) {
	if s.nodes == nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "this server runs its sandboxes itself (role all): it has no sandbox nodes")
	}
	return s.nodes, nil
}

type nodeView struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"`
	Runs   int    `json:"runs"`
	// MaxSessions is the most runs the node takes at once (0: no bound).
	MaxSessions int     `json:"max_sessions"`
	LastSeen    *string `json:"last_seen"`
	// RefusedConnections counts connections with the node's credential
	// refused while it was connected (since control started).
	RefusedConnections int     `json:"refused_connections"`
	LastRefusedAt      *string `json:"last_refused_at"`
}

func viewNode(n service.NodeState) nodeView {
	v := nodeView{ID: n.ID, Name: n.Name, Status: n.Status, Runs: n.Load.Sessions, MaxSessions: n.Load.MaxSessions,
		RefusedConnections: n.Refused}
	if !n.LastSeen.IsZero() {
		t := rfc3339(n.LastSeen)
		v.LastSeen = &t
	}
	if !n.LastRefused.IsZero() {
		t := rfc3339(n.LastRefused)
		v.LastRefusedAt = &t
	}
	return v
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	if !actor.Admin {
		return corral.Errorf(corral.EFORBIDDEN, "only an admin sees the nodes")
	}
	n, err := s.nodesService()
	if err != nil {
		return err
	}
	nodes, err := n.All(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(nodes, viewNode))
	return nil
}

// drainNode is POST /api/nodes/{id}/drain; undrainNode, DELETE, undoes it.
func (s *Server) drainNode(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	return s.setDraining(w, r, actor, true)
}

func (s *Server) undrainNode(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	return s.setDraining(w, r, actor, false)
}

func (s *Server) setDraining(w http.ResponseWriter, r *http.Request, actor corral.User, draining bool) error {
	if !actor.Admin {
		return corral.Errorf(corral.EFORBIDDEN, "only an admin drains a node")
	}
	n, err := s.nodesService()
	if err != nil {
		return err
	}
	if err := n.Drain(r.Context(), actor, r.PathValue("id"), draining); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type moveRequest struct {
	AgentID string `json:"agent_id"`
}

// moveAgent is POST /api/nodes/{id}/agents {agent_id}: the agent, its
// workspace with it, moves to the node.
func (s *Server) moveAgent(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	if !actor.Admin {
		return corral.Errorf(corral.EFORBIDDEN, "only an admin moves an agent between nodes")
	}
	n, err := s.nodesService()
	if err != nil {
		return err
	}
	var req moveRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.AgentID == "" {
		return corral.Errorf(corral.EINVALID, "agent_id: the agent to move")
	}
	if err := n.MoveAgent(r.Context(), actor, req.AgentID, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
