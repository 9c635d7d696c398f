package api

import (
	"net/http"

	"corral"
	"corral/internal/service"
)

type repositoryView struct {
	URL             string        `json:"url"`
	Ref             string        `json:"ref"`
	Head            string        `json:"head"`
	Status          string        `json:"status"`
	Error           string        `json:"error,omitempty"`
	Progress        int           `json:"progress"`
	LastPush        *lastPushView `json:"last_push,omitempty"`
	SuggestedBranch string        `json:"suggested_branch"`
}

type lastPushView struct {
	Branch string      `json:"branch"`
	Head   string      `json:"head"`
	At     string      `json:"at"`
	By     userRefView `json:"by"`
}

// viewRepository leaves out which credential the clone used: it is the
// owner's business, and never its secret in any case.
func viewRepository(r service.Repository) repositoryView {
	v := repositoryView{URL: r.URL, Ref: r.Ref, Head: r.Head, Status: string(r.Status), Error: r.Error, Progress: r.Progress,
		SuggestedBranch: r.SuggestedBranch}
	if p := r.LastPush; p != nil {
		v.LastPush = &lastPushView{Branch: p.Branch, Head: p.Head, At: rfc3339(p.At), By: userRefView{ID: p.By.ID, Name: p.By.Name}}
	}
	return v
}

type identityView struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

type commitView struct {
	SHA         string       `json:"sha"`
	Author      identityView `json:"author"`
	CommittedAt string       `json:"committed_at"`
	Message     string       `json:"message"`
	ChangeSetID *string      `json:"change_set_id"`
}

type pushView struct {
	Branch         string `json:"branch"`
	Head           string `json:"head"`
	Commits        int    `json:"commits"`
	PullRequestURL string `json:"pull_request_url,omitempty"`
}

type repositoryRequest struct {
	URL          string `json:"url"`
	Ref          string `json:"ref,omitempty"`
	CredentialID string `json:"credential_id,omitempty"`
}

func (s *Server) putRepository(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	var body repositoryRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	repo, err := s.repos.Clone(r.Context(), actor, r.PathValue("id"), body.URL, body.Ref, body.CredentialID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, viewRepository(repo))
	return nil
}

func (s *Server) getRepository(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	repo, err := s.repos.Repository(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewRepository(repo))
	return nil
}

func (s *Server) listRepositoryCommits(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	commits, err := s.repos.Commits(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	items := make([]commitView, len(commits))
	for i, c := range commits {
		items[i] = commitView{SHA: c.SHA, Author: identityView{Name: c.Author.Name, Email: c.Author.Email},
			CommittedAt: rfc3339(c.CommittedAt), Message: c.Message}
		if c.ChangeSetID != "" {
			id := c.ChangeSetID
			items[i].ChangeSetID = &id
		}
	}
	writeJSON(w, http.StatusOK, list[commitView]{Items: items})
	return nil
}

type pushRequest struct {
	Branch string `json:"branch,omitempty"`
}

func (s *Server) pushRepository(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	var body pushRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	res, err := s.repos.Push(r.Context(), actor, r.PathValue("id"), body.Branch)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pushView{Branch: res.Branch, Head: res.Head, Commits: res.Commits, PullRequestURL: res.PullRequestURL})
	return nil
}

// syncView is what a sync did.
type syncView struct {
	Head        string   `json:"head"`
	Upstream    string   `json:"upstream"`
	FastForward bool     `json:"fast_forward"`
	Rebased     int      `json:"rebased"`
	Status      string   `json:"status"`
	Pending     []string `json:"pending"`
}

func (s *Server) syncRepository(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	res, err := s.repos.Sync(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, syncView{Head: res.Head, Upstream: res.Upstream, FastForward: res.FastForward, Rebased: res.Rebased, Status: res.Status,
		Pending: nonNil(res.Pending)})
	return nil
}

// getAgentTrace answers the agent's own chain: its clones and pushes, in
// the shape of a run's trace.
func (s *Server) getAgentTrace(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	events, err := s.repos.AgentTrace(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(events, viewTrace))
	return nil
}
