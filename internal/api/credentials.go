package api

import (
	"net/http"

	"corral"
	"corral/internal/service"
)

type credentialRequest struct {
	Name         string   `json:"name"`
	Host         string   `json:"host"`
	Username     string   `json:"username"`
	Secret       string   `json:"secret"`
	Repositories []string `json:"repositories,omitempty"`
}

type credentialPatch struct {
	Repositories *[]string `json:"repositories"`
}

// credentialView is a code-host credential as the API shows it. It has no
// field for the secret: there is nothing to leave out by mistake.
type credentialView struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Host         string   `json:"host"`
	Username     string   `json:"username"`
	Repositories []string `json:"repositories"`
	CreatedAt    string   `json:"created_at"`
}

func viewCredential(c corral.CodeCredential) credentialView {
	repos := c.Repositories
	if repos == nil {
		repos = []string{}
	}
	return credentialView{ID: c.ID, Name: c.Name, Host: c.Host, Username: c.Username, Repositories: repos, CreatedAt: rfc3339(c.CreatedAt)}
}

func (s *Server) credentialsService() (*service.Credentials, error) {
	if s.credentials == nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "this server keeps no credentials (it was started without a secret key)")
	}
	return s.credentials, nil
}

func (s *Server) createCredential(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	creds, err := s.credentialsService()
	if err != nil {
		return err
	}
	var req credentialRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	c, err := creds.Create(r.Context(), actor, req.Name, req.Host, req.Username, req.Secret, req.Repositories)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewCredential(c))
	return nil
}

func (s *Server) listCredentials(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	creds, err := s.credentialsService()
	if err != nil {
		return err
	}
	cs, err := creds.List(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(cs, viewCredential))
	return nil
}

func (s *Server) patchCredential(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	creds, err := s.credentialsService()
	if err != nil {
		return err
	}
	var req credentialPatch
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Repositories == nil {
		return corral.Errorf(corral.EINVALID, "give repositories: the only thing of a credential that changes (for a new secret, delete it and add it again)")
	}
	c, err := creds.SetRepositories(r.Context(), actor, r.PathValue("id"), *req.Repositories)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewCredential(c))
	return nil
}

func (s *Server) deleteCredential(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	creds, err := s.credentialsService()
	if err != nil {
		return err
	}
	if err := creds.Delete(r.Context(), actor, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
