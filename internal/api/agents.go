package api

import (
	"net/http"
	"strconv"

	"corral"
	"corral/internal/service"
)

// agentRequest is the body of create and update. Absent fields are left as
// they are; budget.used is not settable, so it is not here and is refused
// as an unknown field.
type agentRequest struct {
	Name         *string `json:"name"`
	Instructions *string `json:"instructions"`
	Model        *string `json:"model"`
	Driver       *string `json:"driver"`
	Policy       *struct {
		FS        *string        `json:"fs"`
		Changes   *string        `json:"changes"`
		Network   *string        `json:"network"`
		Egress    *egressRequest `json:"egress"`
		Secrets   *[]string      `json:"exclude"`
		Protected *[]string      `json:"protected"`
		Risky     *[]string      `json:"risky"`
		Library   *bool          `json:"library"`
	} `json:"policy"`
	Limits *limitsFields `json:"limits"`
	Budget *struct {
		Tokens *int64 `json:"tokens"`
	} `json:"budget"`
}

func (req agentRequest) input() service.AgentInput {
	in := service.AgentInput{Name: req.Name, Instructions: req.Instructions, Model: req.Model, Driver: req.Driver}
	if p := req.Policy; p != nil {
		in.FS, in.Changes, in.Network = p.FS, p.Changes, p.Network
		in.Secrets, in.Protected, in.Risky = p.Secrets, p.Protected, p.Risky
		in.Library = p.Library
		if p.Egress != nil {
			e := p.Egress.domain()
			in.Egress = &e
		}
	}
	if l := req.Limits; l != nil {
		in.Limits = service.LimitsInput{
			MaxPromptBytes: l.MaxPromptBytes, MaxRuns: l.MaxRuns, RunTimeoutS: l.RunTimeoutS,
			CPUMillis: l.CPUMillis, MemoryBytes: l.MemoryBytes, Pids: l.Pids, OutputBytes: l.OutputBytes,
			DiskBytes: l.DiskBytes, DiskInodes: l.DiskInodes, PendingDiskBytes: l.PendingDiskBytes,
		}
	}
	if req.Budget != nil {
		in.BudgetTokens = req.Budget.Tokens
	}
	return in
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	as, err := s.agents.List(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(as, viewAgent))
	return nil
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	var req agentRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	a, err := s.agents.Create(r.Context(), actor, req.input())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewAgent(a))
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	a, err := s.agents.Get(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAgent(a))
	return nil
}

func (s *Server) updateAgent(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	var req agentRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	a, err := s.agents.Update(r.Context(), actor, r.PathValue("id"), req.input())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAgent(a))
	return nil
}

func (s *Server) deleteAgent(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	if err := s.agents.Delete(r.Context(), actor, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) releaseAgent(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	a, err := s.agents.Release(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAgent(a))
	return nil
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	gs, err := s.agents.Grants(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(gs, viewGrant))
	return nil
}

type levelRequest struct {
	Level string `json:"level"`
}

func (s *Server) putGrant(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	var req levelRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	g, err := s.agents.PutGrant(r.Context(), actor, r.PathValue("id"), r.PathValue("user_id"), req.Level)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewGrant(g))
	return nil
}

type emailGrantRequest struct {
	Email string `json:"email"`
	Level string `json:"level"`
}

func (s *Server) grantByEmail(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	var req emailGrantRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	g, err := s.agents.GrantByEmail(r.Context(), actor, r.PathValue("id"), req.Email, req.Level)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewGrant(g))
	return nil
}

func (s *Server) deleteGrant(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	if err := s.agents.DeleteGrant(r.Context(), actor, r.PathValue("id"), r.PathValue("user_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listLinks(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	ls, err := s.agents.Links(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(ls, func(l corral.Link) linkView { return viewLink(l, "") }))
	return nil
}

func (s *Server) createLink(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	var req levelRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	l, token, err := s.agents.CreateLink(r.Context(), actor, r.PathValue("id"), req.Level)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewLink(l, token))
	return nil
}

func (s *Server) deleteLink(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	if err := s.agents.DeleteLink(r.Context(), actor, r.PathValue("id"), r.PathValue("link_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) acceptLink(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	a, err := s.agents.AcceptLink(r.Context(), actor, r.PathValue("token"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAgent(a))
	return nil
}

// acceptAgent records that the caller accepts an agent shared with them
// as a delegation target of their runs.
func (s *Server) acceptAgent(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	if err := s.agents.Accept(r.Context(), actor, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return corral.Errorf(corral.EINVALID, "limit must be a whole number from 1 to 1000")
		}
		limit = n
	}
	ms, err := s.agents.Messages(r.Context(), actor, r.PathValue("id"), r.URL.Query().Get("before"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(ms, viewMessage))
	return nil
}

type messageRequest struct {
	Content string `json:"content"`
}

type postedMessage struct {
	Message messageView `json:"message"`
	Run     runView     `json:"run"`
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	var req messageRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	m, run, err := s.runs.Send(r.Context(), actor, r.PathValue("id"), req.Content)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, postedMessage{Message: viewMessage(m), Run: viewRun(run)})
	return nil
}
