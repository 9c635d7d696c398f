package api

import (
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"slices"
	"unicode/utf8"

	"corral"
	"corral/internal/service"
)

type changeEntryView struct {
	Path string `json:"path"`
	// PathEscaped is the name exactly as it is on disk, with every byte
	// that is not a safe printable character escaped: JSON cannot carry a
	// name that is not UTF-8, and a reviewer must not be shown a name that
	// looks like another.
	PathEscaped string   `json:"path_escaped"`
	Op          string   `json:"op"`
	OldSHA256   string   `json:"old_sha256"`
	NewSHA256   string   `json:"new_sha256"`
	Size        int64    `json:"size"`
	Mode        string   `json:"mode"`
	Class       string   `json:"class"`
	Flags       []string `json:"flags"`
	Note        string   `json:"note"`
	State       string   `json:"state"`
	Diff        *string  `json:"diff,omitempty"`
}

type changeSetView struct {
	ID      string            `json:"id"`
	RunID   *string           `json:"run_id"`
	AgentID string            `json:"agent_id"`
	Status  string            `json:"status"`
	Mode    string            `json:"mode"`
	Entries []changeEntryView `json:"entries"`
	// DiskBytes is what the set's staged tree holds on the server's disk
	// while it waits (counted against limits.pending_disk_bytes, and the
	// server's bounds per person and in all).
	DiskBytes int64        `json:"disk_bytes"`
	CreatedAt string       `json:"created_at"`
	ExpiresAt string       `json:"expires_at"`
	DecidedBy *userRefView `json:"decided_by"`
	DecidedAt *string      `json:"decided_at"`
}

// viewChangeSet builds the answer field by field: the staged tree's
// location stays on the server.
func viewChangeSet(cs corral.ChangeSet) changeSetView {
	v := changeSetView{
		ID: cs.ID, AgentID: cs.AgentID, Status: string(cs.Status), Mode: cs.Mode, DiskBytes: cs.DiskBytes,
		Entries:   make([]changeEntryView, len(cs.Entries)),
		CreatedAt: rfc3339(cs.CreatedAt), ExpiresAt: rfc3339(cs.ExpiresAt),
	}
	if cs.RunID != "" {
		v.RunID = &cs.RunID
	}
	if cs.DecidedBy != nil {
		v.DecidedBy = &userRefView{ID: cs.DecidedBy.ID, Name: cs.DecidedBy.Name}
		at := rfc3339(cs.DecidedAt)
		v.DecidedAt = &at
	}
	for i, e := range cs.Entries {
		ev := changeEntryView{
			Path: e.Path, PathEscaped: service.EscapePath(e.Path), Op: e.Op, OldSHA256: e.OldSHA256,
			NewSHA256: e.NewSHA256, Size: e.Size, Mode: os.FileMode(e.Mode).String(), Class: e.Class,
			Flags: e.Flags, Note: e.Note, State: string(e.State),
		}
		if ev.Flags == nil {
			ev.Flags = []string{}
		}
		if slices.Contains(e.Flags, "name") {
			// A name that breaks the rules is never decided by its path,
			// and shown nowhere raw: not even a naive client can render it.
			ev.Path = ev.PathEscaped
		}
		if e.Diff != "" {
			d := e.Diff
			ev.Diff = &d
		}
		v.Entries[i] = ev
	}
	return v
}

func (s *Server) listChanges(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	sets, err := s.decisions.List(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(sets, func(cs corral.ChangeSet) changeSetView { return viewChangeSet(cs) }))
	return nil
}

// waitingView is a change set in the inbox: no entries, their counts.
type waitingView struct {
	ID             string  `json:"id"`
	AgentID        string  `json:"agent_id"`
	AgentName      string  `json:"agent_name"`
	RunID          *string `json:"run_id"`
	Status         string  `json:"status"`
	PendingEntries int     `json:"pending_entries"`
	TotalEntries   int     `json:"total_entries"`
	// DiskBytes is what the set holds on the server's disk while it waits
	// (counted against the agent's, its owner's and the server's bounds).
	DiskBytes int64  `json:"disk_bytes"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
}

func viewWaiting(w corral.WaitingChangeSet) waitingView {
	v := waitingView{
		ID: w.ID, AgentID: w.AgentID, AgentName: w.AgentName, Status: string(corral.ChangePending),
		PendingEntries: w.Pending, TotalEntries: w.Entries, DiskBytes: w.DiskBytes,
		CreatedAt: rfc3339(w.CreatedAt), ExpiresAt: rfc3339(w.ExpiresAt),
	}
	if w.RunID != "" {
		v.RunID = &w.RunID
	}
	return v
}

// waitingChanges is the inbox: GET /api/changes?status=pending. Pending is
// the one status asked about across agents.
func (s *Server) waitingChanges(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	if st := r.URL.Query()["status"]; len(st) != 1 || corral.ChangeStatus(st[0]) != corral.ChangePending {
		return corral.Errorf(corral.EINVALID, "status must be %q: the change sets that wait for you", corral.ChangePending)
	}
	sets, err := s.decisions.Waiting(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(sets, viewWaiting))
	return nil
}

func (s *Server) getChange(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	cs, err := s.decisions.Get(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewChangeSet(cs))
	return nil
}

// decisionRequest is the optional body of approve and reject: the entries
// to decide, by path; without it (or without paths) every pending one.
type decisionRequest struct {
	Paths *[]string `json:"paths"`
}

func decodeDecision(w http.ResponseWriter, r *http.Request) ([]string, error) {
	if r.ContentLength == 0 && r.Header.Get("Transfer-Encoding") == "" {
		return nil, nil
	}
	var req decisionRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	if req.Paths == nil {
		return nil, nil
	}
	return append([]string{}, *req.Paths...), nil
}

func (s *Server) approveChange(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	paths, err := decodeDecision(w, r)
	if err != nil {
		return err
	}
	cs, err := s.decisions.Approve(r.Context(), actor, r.PathValue("id"), paths)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewChangeSet(cs))
	return nil
}

func (s *Server) rejectChange(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	paths, err := decodeDecision(w, r)
	if err != nil {
		return err
	}
	cs, err := s.decisions.Reject(r.Context(), actor, r.PathValue("id"), paths)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewChangeSet(cs))
	return nil
}

type fileEntryView struct {
	Name string `json:"name"`
	Type string `json:"type"` // file | dir
	Size int64  `json:"size"`
}

type fileView struct {
	Type          string          `json:"type"` // file | dir
	Path          string          `json:"path"`
	Entries       []fileEntryView `json:"entries,omitempty"`
	Size          int64           `json:"size"`
	Content       *string         `json:"content,omitempty"`        // text files
	ContentBase64 *string         `json:"content_base64,omitempty"` // other files
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	p := r.URL.Query().Get("path")
	list, content, err := s.files.ReadFile(r.Context(), actor, r.PathValue("id"), p)
	if err != nil {
		return err
	}
	if content == nil {
		v := fileView{Type: "dir", Path: p, Entries: make([]fileEntryView, len(list))}
		for i, f := range list {
			t := "file"
			if f.Dir {
				t = "dir"
			}
			v.Entries[i] = fileEntryView{Name: f.Name, Type: t, Size: f.Size}
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	}
	v := fileView{Type: "file", Path: p, Size: int64(len(content))}
	if utf8.Valid(content) {
		text := string(content)
		v.Content = &text
	} else {
		b := base64.StdEncoding.EncodeToString(content)
		v.ContentBase64 = &b
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// writeFile takes the request body as the file's bytes.
func (s *Server) writeFile(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, corral.MaxFile))
	if err != nil {
		return decodeError(err)
	}
	p := r.URL.Query().Get("path")
	if err := s.files.WriteFile(r.Context(), actor, r.PathValue("id"), p, body); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fileView{Type: "file", Path: p, Size: int64(len(body))})
	return nil
}
