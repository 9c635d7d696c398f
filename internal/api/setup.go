package api

import (
	"net/http"

	"corral"
)

// What the browser asks about the server itself, around its forms: whether
// it is brand new (the sign-in page), the models an agent may be set to
// and what its limits are when left at 0 (the agent form).

type setupView struct {
	FirstRun bool   `json:"first_run"`
	Signup   string `json:"signup"`
}

// setup needs no sign-in: a brand-new server's first visitor is told that
// the account they make administers it. Nothing else: no counts, no emails.
func (s *Server) setup(w http.ResponseWriter, r *http.Request, _ corral.User) error {
	st, err := s.accounts.Setup(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, setupView{FirstRun: st.FirstRun, Signup: st.Signup})
	return nil
}

type modelView struct {
	ID string `json:"id"`
}

// modelsView never holds the provider's address or key: only names.
type modelsView struct {
	Models     []modelView `json:"models"`
	Default    string      `json:"default"`
	Configured bool        `json:"configured"`
	Listed     bool        `json:"listed"`
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request, _ corral.User) error {
	if s.models == nil {
		return corral.Errorf(corral.EUNAVAIL, "this server does not list its models")
	}
	l := s.models.List(r.Context())
	v := modelsView{Models: make([]modelView, len(l.Models)), Default: l.Default, Configured: l.Configured, Listed: l.Listed}
	for i, m := range l.Models {
		v.Models[i] = modelView{ID: m}
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// limitsFields is limitsView where a field may be absent or null: a
// change's fields (absent: unchanged), and the server's defaults (null:
// no limit).
type limitsFields struct {
	MaxPromptBytes   *int64 `json:"max_prompt_bytes"`
	MaxRuns          *int64 `json:"max_runs"`
	RunTimeoutS      *int64 `json:"run_timeout_s"`
	CPUMillis        *int64 `json:"cpu_millis"`
	MemoryBytes      *int64 `json:"memory_bytes"`
	Pids             *int64 `json:"pids"`
	OutputBytes      *int64 `json:"output_bytes"`
	DiskBytes        *int64 `json:"disk_bytes"`
	DiskInodes       *int64 `json:"disk_inodes"`
	PendingDiskBytes *int64 `json:"pending_disk_bytes"`
}

type limitsAnswer struct {
	Defaults limitsFields      `json:"defaults"`
	Max      limitsView        `json:"max"`
	Notes    map[string]string `json:"notes"`
}

// orNull is n, or null for a default of 0: there is no limit.
func orNull(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

func (s *Server) limits(w http.ResponseWriter, r *http.Request, _ corral.User) error {
	l := s.runs.Limits()
	d := l.Defaults
	writeJSON(w, http.StatusOK, limitsAnswer{
		Defaults: limitsFields{
			MaxPromptBytes: orNull(d.MaxPromptBytes), MaxRuns: orNull(d.MaxRuns), RunTimeoutS: orNull(d.RunTimeoutS),
			CPUMillis: orNull(d.CPUMillis), MemoryBytes: orNull(d.MemoryBytes), Pids: orNull(d.Pids),
			OutputBytes: orNull(d.OutputBytes), DiskBytes: orNull(d.DiskBytes), DiskInodes: orNull(d.DiskInodes),
			PendingDiskBytes: orNull(d.PendingDiskBytes),
		},
		Max:   viewLimits(l.Max),
		Notes: l.Notes,
	})
	return nil
}
