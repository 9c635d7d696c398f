package api

import (
	"time"

	"corral"
	"corral/internal/service"
)

// The views are what leaves the server. Each is built field by field from a
// domain value, so nothing the domain gains later (a hash, a secret) can
// ride along by accident.

type userView struct {
	ID        string `json:"id"`
	Email     string `json:"email"`
	Name      string `json:"name"`
	Admin     bool   `json:"admin"`
	Disabled  bool   `json:"disabled"`
	CreatedAt string `json:"created_at"`
}

func viewUser(u corral.User) userView {
	return userView{ID: u.ID, Email: u.Email, Name: u.Name, Admin: u.Admin, Disabled: u.Disabled, CreatedAt: rfc3339(u.CreatedAt)}
}

// listedUserView is an account in the administrators' list: email_ascii
// shows a non-ASCII domain in punycode, and email_mixed_script marks an
// address that mixes scripts, so a look-alike stands out.
type listedUserView struct {
	userView
	EmailASCII       string `json:"email_ascii,omitempty"`
	EmailMixedScript bool   `json:"email_mixed_script"`
}

func viewListedUser(u service.ListedUser) listedUserView {
	return listedUserView{userView: viewUser(u.User), EmailASCII: u.EmailASCII, EmailMixedScript: u.EmailMixedScript}
}

type userRefView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type contactView struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Name  string `json:"name"`
}

type policyView struct {
	FS        string       `json:"fs"`
	Changes   string       `json:"changes"`
	Network   string       `json:"network"`
	Egress    egressFields `json:"egress"`
	Secrets   []string     `json:"exclude"`
	Protected []string     `json:"protected"`
	Risky     []string     `json:"risky"`
	Library   bool         `json:"library"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type limitsView struct {
	MaxPromptBytes   int64 `json:"max_prompt_bytes"`
	MaxRuns          int64 `json:"max_runs"`
	RunTimeoutS      int64 `json:"run_timeout_s"`
	CPUMillis        int64 `json:"cpu_millis"`
	MemoryBytes      int64 `json:"memory_bytes"`
	Pids             int64 `json:"pids"`
	OutputBytes      int64 `json:"output_bytes"`
	DiskBytes        int64 `json:"disk_bytes"`
	DiskInodes       int64 `json:"disk_inodes"`
	PendingDiskBytes int64 `json:"pending_disk_bytes"`
}

type budgetView struct {
	Tokens   int64 `json:"tokens"`
	Used     int64 `json:"used"`
	Reserved int64 `json:"reserved"`
	// Left is what a call may still reserve; null for an unlimited budget.
	Left *int64 `json:"left"`
}

func budgetOf(b corral.Budget) budgetView {
	v := budgetView{Tokens: b.Tokens, Used: b.Used, Reserved: b.Reserved}
	if left := b.Left(); left >= 0 {
		v.Left = &left
	}
	return v
}

type agentView struct {
	ID           string      `json:"id"`
	Name         string      `json:"name"`
	Instructions string      `json:"instructions"`
	Model        string      `json:"model"`
	Driver       string      `json:"driver"`
	Owner        userRefView `json:"owner"`
	Access       string      `json:"access"`
	// Accepted: the caller accepted the agent as a delegation target of
	// their runs (always true for its owner).
	Accepted  bool       `json:"accepted"`
	Policy    policyView `json:"policy"`
	Limits    limitsView `json:"limits"`
	Budget    budgetView `json:"budget"`
	State     string     `json:"state"`
	CreatedAt string     `json:"created_at"`
	UpdatedAt string     `json:"updated_at"`
	// PendingChanges counts the agent's change sets that wait for a
	// person, whoever may decide them.
	PendingChanges int `json:"pending_changes"`
	// Can is what the caller may do to the agent.
	Can canView `json:"can"`
}

// canView is what the caller may do to an agent: the actions of the
// access policy its level allows, by name, in the policy's order
// (service.Allowed). Clients offer what it lists and keep no copy of the
// policy. (A list of names, not an object of booleans: no key of an
// answer names a secret, read_secrets included.)
type canView []string

func viewLimits(l corral.Limits) limitsView {
	return limitsView{
		MaxPromptBytes: l.MaxPromptBytes, MaxRuns: l.MaxRuns, RunTimeoutS: l.RunTimeoutS,
		CPUMillis: l.CPUMillis, MemoryBytes: l.MemoryBytes, Pids: l.Pids, OutputBytes: l.OutputBytes,
		DiskBytes: l.DiskBytes, DiskInodes: l.DiskInodes, PendingDiskBytes: l.PendingDiskBytes,
	}
}

func viewAgent(a corral.Agent) agentView {
	return agentView{
		ID: a.ID, Name: a.Name, Instructions: a.Instructions, Model: a.Model, Driver: agentDriver(a),
		Owner:    userRefView{ID: a.Owner.ID, Name: a.Owner.Name},
		Access:   a.Access.String(),
		Accepted: a.Accepted,
		Policy: policyView{
			FS: a.Policy.FS, Changes: a.Policy.Changes, Network: a.Policy.Network, Library: a.Policy.Library,
			Egress:  viewEgress(a.Policy.Egress),
			Secrets: nonNil(a.Policy.Secrets), Protected: nonNil(a.Policy.Protected), Risky: nonNil(a.Policy.Risky),
		},
		Limits:    viewLimits(a.Limits),
		Budget:    budgetOf(a.Budget),
		State:     string(a.State),
		CreatedAt: rfc3339(a.CreatedAt),
		UpdatedAt: rfc3339(a.UpdatedAt),

		PendingChanges: a.PendingChanges,
		Can:            service.Allowed(a.Access),
	}
}

type grantView struct {
	User      contactView `json:"user"`
	Level     string      `json:"level"`
	CreatedAt string      `json:"created_at"`
	// Accepted: the user accepted the agent as a delegation target of
	// their runs (POST /api/agents/{id}/accept, or by joining a link).
	Accepted bool `json:"accepted"`
}

func viewGrant(g corral.Grant) grantView {
	return grantView{
		User:  contactView{ID: g.User.ID, Email: g.User.Email, Name: g.User.Name},
		Level: g.Level.String(), CreatedAt: rfc3339(g.CreatedAt), Accepted: g.Accepted,
	}
}

type linkView struct {
	ID        string `json:"id"`
	Level     string `json:"level"`
	Token     string `json:"token,omitempty"` // only in the answer that creates it
	CreatedAt string `json:"created_at"`
}

func viewLink(l corral.Link, token string) linkView {
	return linkView{ID: l.ID, Level: l.Level.String(), Token: token, CreatedAt: rfc3339(l.CreatedAt)}
}

type tokenView struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Token      string  `json:"token,omitempty"` // only in the answer that creates it
	CreatedAt  string  `json:"created_at"`
	LastUsedAt *string `json:"last_used_at"`
}

func viewToken(t corral.APIToken, secret string) tokenView {
	v := tokenView{ID: t.ID, Name: t.Name, Token: secret, CreatedAt: rfc3339(t.CreatedAt)}
	if !t.LastUsed.IsZero() {
		s := rfc3339(t.LastUsed)
		v.LastUsedAt = &s
	}
	return v
}

type inviteView struct {
	ID        string `json:"id"`
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

type messageView struct {
	ID        string       `json:"id"`
	Role      string       `json:"role"`
	Content   string       `json:"content"`
	Author    *userRefView `json:"author"`
	RunID     *string      `json:"run_id"`
	CreatedAt string       `json:"created_at"`
	// Sources: the documents an answer drew on; absent when none.
	Sources []sourceView `json:"sources,omitempty"`
}

type sourceView struct {
	DocumentID string  `json:"document_id"`
	Name       string  `json:"name"`
	Source     string  `json:"source"`
	Score      float64 `json:"score"`
	Confidence float64 `json:"confidence"`
}

func viewMessage(m corral.Message) messageView {
	v := messageView{ID: m.ID, Role: m.Role, Content: m.Content, CreatedAt: rfc3339(m.CreatedAt)}
	for _, s := range m.Sources {
		v.Sources = append(v.Sources, sourceView{DocumentID: s.DocumentID, Name: s.Name, Source: s.Source, Score: s.Score, Confidence: s.Confidence})
	}
	if m.Author != nil {
		v.Author = &userRefView{ID: m.Author.ID, Name: m.Author.Name}
	}
	if m.RunID != "" {
		v.RunID = &m.RunID
	}
	return v
}

type list[T any] struct {
	Items []T `json:"items"`
}

// viewAll maps a slice through a view, never answering null for an empty
// list.
func viewAll[D, V any](ds []D, view func(D) V) list[V] {
	out := make([]V, len(ds))
	for i, d := range ds {
		out[i] = view(d)
	}
	return list[V]{Items: out}
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// agentDriver is an agent's driver as the API names it: the domain's ""
// is the built-in loop.
func agentDriver(a corral.Agent) string {
	if a.Driver == "" {
		return corral.DriverBuiltin
	}
	return a.Driver
}
