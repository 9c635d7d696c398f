package api

import (
	"net/http"

	"corral"
	"corral/internal/service"
)

// egressRequest is policy.egress as a client sets it: the whole list.
type egressRequest struct {
	Allow   []egressRuleRequest `json:"allow,omitempty"`
	Presets []string            `json:"presets,omitempty"`
}

type egressRuleRequest struct {
	Host    string   `json:"host"`
	Ports   []int    `json:"ports,omitempty"`
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
}

// egressFields is policy.egress as the API shows it.
type egressFields struct {
	Allow   []egressRuleView `json:"allow"`
	Presets []string         `json:"presets"`
}

// egressRuleView is one allowed host. Ports empty: 80 and 443; methods
// and paths empty: any.
type egressRuleView struct {
	Host    string   `json:"host"`
	Ports   []int    `json:"ports"`
	Methods []string `json:"methods"`
	Paths   []string `json:"paths"`
}

func (f egressRequest) domain() corral.Egress {
	e := corral.Egress{Presets: f.Presets}
	for _, r := range f.Allow {
		e.Allow = append(e.Allow, corral.EgressRule(r))
	}
	return e
}

func viewEgress(e corral.Egress) egressFields {
	out := egressFields{Allow: []egressRuleView{}, Presets: nonNil(e.Presets)}
	for _, r := range e.Allow {
		out.Allow = append(out.Allow, egressRuleView{Host: r.Host, Ports: nonNilInts(r.Ports),
			Methods: nonNil(r.Methods), Paths: nonNil(r.Paths)})
	}
	return out
}

func nonNilInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// presetView is a preset as the settings page lists it.
type presetView struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
}

func viewPreset(p service.Preset) presetView { return presetView{Name: p.Name, Hosts: p.Hosts} }

func (s *Server) listEgressPresets(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	e, err := s.egressService()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(e.Presets(), viewPreset))
	return nil
}

type secretRequest struct {
	Name   string `json:"name"`
	Host   string `json:"host"`
	Header string `json:"header"`
	Value  string `json:"value"`
}

// secretView is an agent secret as the API shows it. It has no field for
// the value: there is nothing to leave out by mistake.
type secretView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Host      string `json:"host"`
	Header    string `json:"header"`
	CreatedAt string `json:"created_at"`
}

func viewSecret(s corral.Secret) secretView {
	return secretView{ID: s.ID, Name: s.Name, Host: s.Host, Header: s.Header, CreatedAt: rfc3339(s.CreatedAt)}
}

func (s *Server) egressService() (*service.Egress, error) {
	if s.egress == nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "this server keeps no agent secrets (it was started without a secret key)")
	}
	return s.egress, nil
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	e, err := s.egressService()
	if err != nil {
		return err
	}
	var req secretRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	sec, err := e.CreateSecret(r.Context(), actor, r.PathValue("id"), req.Name, req.Host, req.Header, req.Value)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewSecret(sec))
	return nil
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	e, err := s.egressService()
	if err != nil {
		return err
	}
	secs, err := e.Secrets(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(secs, viewSecret))
	return nil
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	e, err := s.egressService()
	if err != nil {
		return err
	}
	if err := e.DeleteSecret(r.Context(), actor, r.PathValue("id"), r.PathValue("secret_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
