package service

// Admission: whether a message, a delegated hop or a terminal may start a
// run, decided and recorded in the store's transaction. It only admits:
// starting an admitted run is its caller's (Runs, or the runner for a
// delegated hop), so admission depends on nothing that runs.

import (
	"context"

	"corral"
	"corral/internal/sanitize"
)

// DefaultMaxPrompt is the prompt limit of agents that set none.
const DefaultMaxPrompt = sanitize.MaxContent

// AdmissionStore is what admission needs from storage.
type AdmissionStore interface {
	Admit(ctx context.Context, m corral.Message, r corral.Run, ev corral.Admission, decide func(corral.AdmissionFacts) string) (corral.Admission, error)
	PendingDiskStore
}

// Admissions decides whether runs may start.
type Admissions struct {
	store AdmissionStore
	ready Ready
	cfg   Config
}

// NewAdmissions returns admission over store; ready says whether runs can
// happen at all.
func NewAdmissions(store AdmissionStore, ready Ready, cfg Config) *Admissions {
	cfg.defaults()
	return &Admissions{store: store, ready: ready, cfg: cfg}
}

// Admit adds content as a message to agent a's thread and admits a run
// for it if admission allows; the caller starts it. Send and a delegated
// hop share it, once the caller has checked the actor's access. run carries who
// triggered it and its place in a tree; its ids, times, stage and driver
// are filled here. hop, when not nil, decides before the agent's own
// rules (a delegated run's tree caps), in the same transaction; words
// says a refusal.
func (s *Admissions) Admit(ctx context.Context, actor corral.User, a corral.Agent, content string, run corral.Run,
	hop func(corral.AdmissionFacts) string, words func(corral.Admission) string) (corral.Admitted, error) {
	content, err := sanitize.Content(content, sanitize.MaxContent)
	if err != nil {
		return corral.Admitted{}, err
	}
	// Readiness last: a request that is wrong in itself hears so (400,
	// 403, 404) whatever the server's state, and a 503 means only that
	// this good message cannot run now.
	if err := s.ready(); err != nil {
		return corral.Admitted{}, err
	}
	now := s.cfg.Now().UTC()
	run.ID, run.AgentID, run.Status, run.CreatedAt = corral.NewID("run"), a.ID, corral.RunAdmitted, now
	run.StageID = corral.NewID("chg")
	// The agent's driver when the message came: a change of driver
	// meanwhile is for the next run.
	run.Driver = a.Driver
	msg := corral.Message{
		ID: corral.NewID("msg"), AgentID: a.ID, Role: corral.RoleUser, Content: content,
		Author: run.TriggeredBy, RunID: run.ID, CreatedAt: now,
	}
	run.MessageID = msg.ID
	size := int64(len(content))
	ev := corral.Admission{ID: corral.NewID("adm"), AgentID: a.ID, UserID: actor.ID, PromptBytes: size, At: now}
	decided, err := s.store.Admit(ctx, msg, run, ev, func(f corral.AdmissionFacts) string {
		if hop != nil {
			if reason := hop(f); reason != "" {
				return reason
			}
		}
		return Admit(f, size, DefaultMaxPrompt, s.cfg.PendingDisk)
	})
	if err != nil {
		return corral.Admitted{}, err
	}
	if decided.Reason != "" {
		return corral.Admitted{}, s.refused(ctx, actor, a, decided, words)
	}
	return corral.Admitted{Run: run, Message: msg, Admission: decided}, nil
}
