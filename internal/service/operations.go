package service

import (
	"context"
	"strconv"
	"strings"
	"time"

	"corral"
	"corral/internal/access"
)

// OperationsStore is what operating the server reads from storage.
type OperationsStore interface {
	corral.UsageStore
	corral.AuditStore
	corral.BudgetStore
	agentReader
	RunsIn(ctx context.Context, statuses ...corral.RunStatus) ([]corral.Run, error)
}

// Operations is what operating the server reads across agents and
// accounts: token usage, the audit log, the runs in flight and every
// agent's budget. access.Oversee decides how far each reaches for the
// caller.
type Operations struct {
	store OperationsStore
	cfg   Config
}

// NewOperations returns the operations' use cases.
func NewOperations(store OperationsStore, cfg Config) *Operations {
	cfg.defaults()
	return &Operations{store: store, cfg: cfg}
}

// reach asks the policy how far action goes for actor; ReachNone is an
// error.
func reach(actor corral.User, action access.ServerAction) (access.Reach, error) {
	r := access.Oversee(actor.ID != "", actor.Admin, action)
	switch {
	case r != access.ReachNone:
		return r, nil
	case actor.ID == "":
		return r, errUnauthenticated()
	default:
		return r, corral.Errorf(corral.EFORBIDDEN, "only an administrator can do this")
	}
}

// UsageInput is a usage query as a person writes it: group_by one of
// corral.UsageGroups ("" is agent), since and until RFC 3339 times or
// dates (a date is its midnight UTC), each optional.
type UsageInput struct {
	GroupBy, Since, Until string
}

// Usage is the answer to a usage query: the query as understood, and the
// sums.
type Usage struct {
	Query  corral.UsageQuery // Owner set when the caller sees only their own agents
	Totals []corral.UsageTotal
}

// Usage sums the tokens and runs of settled model calls per group and per
// UTC day: an admin's over every agent, anyone else's over the agents
// they own.
func (o *Operations) Usage(ctx context.Context, actor corral.User, in UsageInput) (Usage, error) {
	r, err := reach(actor, access.ReadUsage)
	if err != nil {
		return Usage{}, err
	}
	q, err := usageQuery(in)
	if err != nil {
		return Usage{}, err
	}
	if r == access.ReachOwn {
		q.Owner = actor.ID
	}
	totals, err := o.store.Usage(ctx, q)
	if err != nil {
		return Usage{}, err
	}
	return Usage{Query: q, Totals: totals}, nil
}

// usageQuery checks and reads in.
func usageQuery(in UsageInput) (corral.UsageQuery, error) {
	q := corral.UsageQuery{GroupBy: corral.UsageByAgent}
	if in.GroupBy != "" {
		q.GroupBy = corral.UsageGroup(in.GroupBy)
		ok := false
		for _, g := range corral.UsageGroups {
			ok = ok || g == q.GroupBy
		}
		if !ok {
			return corral.UsageQuery{}, corral.Errorf(corral.EINVALID, "group_by must be one of agent, user, model (got %q)", in.GroupBy)
		}
	}
	var err error
	if q.Since, err = usageTime("since", in.Since); err != nil {
		return corral.UsageQuery{}, err
	}
	if q.Until, err = usageTime("until", in.Until); err != nil {
		return corral.UsageQuery{}, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return corral.UsageQuery{}, corral.Errorf(corral.EINVALID, "since (%s) must be before until (%s)",
			q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	return q, nil
}

// usageTime reads a bound: "" (none), an RFC 3339 time, or a date, its
// midnight UTC.
func usageTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, corral.Errorf(corral.EINVALID, "%s must be an RFC 3339 time (2026-11-29T12:00:00Z) or a date (2026-11-29), not %q", name, s)
}

// AuditPage is one page of the audit log, and the cursor that follows it.
type AuditPage struct {
	Events []corral.AuditEvent
	// Next is where the next page starts: the last event's cursor, or the
	// one asked with when the page is empty (nothing newer yet).
	Next string
}

// MaxAuditPage is the most events one page of the audit log holds.
const MaxAuditPage = 1000

// Audit returns up to limit events of the audit log (admins only) after
// cursor after ("" for the first event), in order: every trace event and
// account event exactly once across pages, while new ones are written.
func (o *Operations) Audit(ctx context.Context, actor corral.User, after string, limit int) (AuditPage, error) {
	if _, err := reach(actor, access.ReadAudit); err != nil {
		return AuditPage{}, err
	}
	seq, err := auditCursor(after)
	if err != nil {
		return AuditPage{}, err
	}
	if limit < 1 || limit > MaxAuditPage {
		return AuditPage{}, corral.Errorf(corral.EINVALID, "limit must be a whole number from 1 to %d", MaxAuditPage)
	}
	evs, err := o.store.Audit(ctx, seq, limit)
	if err != nil {
		return AuditPage{}, err
	}
	if len(evs) > 0 {
		seq = evs[len(evs)-1].Seq
	}
	return AuditPage{Events: evs, Next: AuditCursor(seq)}, nil
}

// AuditCursor is the cursor of the audit event at seq: where a page that
// starts after it begins.
func AuditCursor(seq int64) string { return strconv.FormatInt(seq, 10) }

// auditCursor reads a cursor AuditCursor made; "" is the start.
func auditCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(s, "+") {
		return 0, corral.Errorf(corral.EINVALID, "after must be a cursor this API gave (Corral-Next-Cursor), or empty for the first event")
	}
	return n, nil
}

// RunInFlight is an active run with what the operators' page shows of
// its agent.
type RunInFlight struct {
	corral.Run
	AgentName string
	Owner     corral.UserRef
}

// RunsInFlight lists the runs admitted, running or paused, oldest first:
// an admin's every one, anyone else's those of the agents whose runs they
// may view.
func (o *Operations) RunsInFlight(ctx context.Context, actor corral.User) ([]RunInFlight, error) {
	r, err := reach(actor, access.ListRuns)
	if err != nil {
		return nil, err
	}
	runs, err := o.store.RunsIn(ctx, corral.RunAdmitted, corral.RunRunning, corral.RunPaused)
	if err != nil {
		return nil, err
	}
	asker := actor.ID
	if r == access.ReachAll {
		asker = "" // the agent as it is, whoever asks: nothing is decided by a level
	}
	agents := map[string]*corral.Agent{} // nil: not shown
	out := []RunInFlight{}
	for _, run := range runs {
		a, seen := agents[run.AgentID]
		if !seen {
			got, err := o.store.Agent(ctx, run.AgentID, asker)
			switch {
			case corral.ErrorCode(err) == corral.ENOTFOUND: // deleted since
			case err != nil:
				return nil, err
			case r == access.ReachAll || access.Check(got.Access, access.ViewRuns) == access.Allow:
				a = &got
			}
			agents[run.AgentID] = a
		}
		if a != nil {
			out = append(out, RunInFlight{Run: run, AgentName: a.Name, Owner: a.Owner})
		}
	}
	return out, nil
}

// Budgets lists every agent's budget with its open reservations (admins
// only).
func (o *Operations) Budgets(ctx context.Context, actor corral.User) ([]corral.AgentBudget, error) {
	if _, err := reach(actor, access.ReadBudgets); err != nil {
		return nil, err
	}
	return o.store.AgentBudgets(ctx)
}
