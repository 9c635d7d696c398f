package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"corral"
	"corral/internal/service"
)

// Operating the server: usage, the audit log, the runs in flight and
// every agent's budget (service.Operations).

// NextCursorHeader carries, on a page of the audit log, the cursor the
// next page starts after.
const NextCursorHeader = "Corral-Next-Cursor"

// ndjson is the audit log's media type: one JSON object per line.
const ndjson = "application/x-ndjson"

func (s *Server) opsService() (*service.Operations, error) {
	if s.ops == nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "this server does not serve usage, audit or runs in flight")
	}
	return s.ops, nil
}

// params reads a query string that may name only allowed, each at most
// once: a misspelt or repeated parameter is refused, never ignored.
func params(q url.Values, allowed ...string) (map[string]string, error) {
	out := map[string]string{}
	var unknown []string
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
			continue
		}
		if len(vs) > 1 {
			return nil, corral.Errorf(corral.EINVALID, "%s is given %d times: give it once", k, len(vs))
		}
		out[k] = vs[0]
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		takes := "no query parameters"
		if len(allowed) > 0 {
			takes = strings.Join(allowed, ", ")
		}
		return nil, corral.Errorf(corral.EINVALID, "unknown query parameter %s: this endpoint takes %s", strings.Join(unknown, ", "), takes)
	}
	return out, nil
}

type usageTokensView struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Total  int64 `json:"total"`
}

type usageCountView struct {
	Tokens usageTokensView `json:"tokens"`
	Calls  int64           `json:"calls"`
	Runs   int64           `json:"runs"`
}

func viewUsageCount(c corral.UsageCount) usageCountView {
	return usageCountView{Tokens: usageTokensView{Input: c.Tokens.Input, Output: c.Tokens.Output, Total: c.Tokens.Input + c.Tokens.Output},
		Calls: c.Calls, Runs: c.Runs}
}

type usageDayView struct {
	Day string `json:"day"`
	usageCountView
}

type usageGroupView struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	usageCountView
	Days []usageDayView `json:"days"`
}

type usageView struct {
	GroupBy string           `json:"group_by"`
	Scope   string           `json:"scope"`
	Since   *string          `json:"since"`
	Until   *string          `json:"until"`
	Groups  []usageGroupView `json:"groups"`
}

func viewUsage(u service.Usage) usageView {
	v := usageView{GroupBy: string(u.Query.GroupBy), Scope: "all", Groups: []usageGroupView{}}
	if u.Query.Owner != "" {
		v.Scope = "own"
	}
	if !u.Query.Since.IsZero() {
		s := rfc3339(u.Query.Since)
		v.Since = &s
	}
	if !u.Query.Until.IsZero() {
		s := rfc3339(u.Query.Until)
		v.Until = &s
	}
	for _, t := range u.Totals {
		g := usageGroupView{Key: t.Key, Name: t.Name, usageCountView: viewUsageCount(t.UsageCount), Days: []usageDayView{}}
		for _, d := range t.Days {
			g.Days = append(g.Days, usageDayView{Day: d.Day.Format(time.DateOnly), usageCountView: viewUsageCount(d.UsageCount)})
		}
		v.Groups = append(v.Groups, g)
	}
	return v
}

func (s *Server) usage(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	ops, err := s.opsService()
	if err != nil {
		return err
	}
	p, err := params(r.URL.Query(), "group_by", "since", "until")
	if err != nil {
		return err
	}
	u, err := ops.Usage(r.Context(), actor, service.UsageInput{GroupBy: p["group_by"], Since: p["since"], Until: p["until"]})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewUsage(u))
	return nil
}

// auditTraceView is a trace event in the audit log: traceView and the
// chain it belongs to.
type auditTraceView struct {
	Chain string `json:"chain"`
	traceView
}

type accountEventView struct {
	At     string  `json:"at"`
	Type   string  `json:"type"`
	Actor  *string `json:"actor_id"`
	User   *string `json:"user_id"`
	Agent  *string `json:"agent_id"`
	Object *string `json:"object"`
	Detail *string `json:"detail"`
}

// auditLineView is one line of the audit log.
type auditLineView struct {
	Cursor  string            `json:"cursor"`
	Kind    string            `json:"kind"`
	Trace   *auditTraceView   `json:"trace,omitempty"`
	Account *accountEventView `json:"account,omitempty"`
}

func viewAuditLine(e corral.AuditEvent) auditLineView {
	v := auditLineView{Cursor: service.AuditCursor(e.Seq)}
	if e.Trace != nil {
		v.Kind = "trace"
		v.Trace = &auditTraceView{Chain: e.Trace.RunID, traceView: viewTrace(*e.Trace)}
		return v
	}
	a := e.Account
	v.Kind = "account"
	v.Account = &accountEventView{At: rfc3339(a.At), Type: a.Type, Actor: optional(a.Actor), User: optional(a.User),
		Agent: optional(a.Agent), Object: optional(a.Object), Detail: optional(a.Detail)}
	return v
}

func (s *Server) audit(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	ops, err := s.opsService()
	if err != nil {
		return err
	}
	p, err := params(r.URL.Query(), "after", "limit")
	if err != nil {
		return err
	}
	limit := 100
	if v, ok := p["limit"]; ok {
		if limit, err = strconv.Atoi(v); err != nil {
			return corral.Errorf(corral.EINVALID, "limit must be a whole number from 1 to %d", service.MaxAuditPage)
		}
	}
	page, err := ops.Audit(r.Context(), actor, p["after"], limit)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", ndjson)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(NextCursorHeader, page.Next)
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(true)
	for _, e := range page.Events {
		// The status is sent: a broken connection is the client's to
		// notice (its last line does not parse, or is missing).
		if err := enc.Encode(viewAuditLine(e)); err != nil {
			return nil
		}
	}
	bw.Flush()
	return nil
}

// runInFlightView is an active run with its agent's name and owner.
type runInFlightView struct {
	runView
	AgentName string      `json:"agent_name"`
	Owner     userRefView `json:"owner"`
}

func viewRunInFlight(r service.RunInFlight) runInFlightView {
	return runInFlightView{runView: viewRun(r.Run), AgentName: r.AgentName, Owner: userRefView{ID: r.Owner.ID, Name: r.Owner.Name}}
}

// runsInFlight is GET /api/runs?status=active. Active is the one status
// asked about across agents.
func (s *Server) runsInFlight(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	ops, err := s.opsService()
	if err != nil {
		return err
	}
	p, err := params(r.URL.Query(), "status")
	if err != nil {
		return err
	}
	if p["status"] != "active" {
		return corral.Errorf(corral.EINVALID, "status must be %q: the runs admitted, running or paused", "active")
	}
	runs, err := ops.RunsInFlight(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(runs, viewRunInFlight))
	return nil
}

type agentBudgetView struct {
	AgentID          string      `json:"agent_id"`
	AgentName        string      `json:"agent_name"`
	Owner            userRefView `json:"owner"`
	Budget           budgetView  `json:"budget"`
	OpenReservations int64       `json:"open_reservations"`
}

func viewAgentBudget(b corral.AgentBudget) agentBudgetView {
	return agentBudgetView{AgentID: b.AgentID, AgentName: b.AgentName, Owner: userRefView{ID: b.Owner.ID, Name: b.Owner.Name},
		Budget: budgetOf(b.Budget), OpenReservations: b.Open}
}

func (s *Server) budgets(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	ops, err := s.opsService()
	if err != nil {
		return err
	}
	if _, err := params(r.URL.Query()); err != nil {
		return err
	}
	bs, err := ops.Budgets(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(bs, viewAgentBudget))
	return nil
}
