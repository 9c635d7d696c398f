package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/api"
	"corral/internal/modeltest"
)

// usageOf is what the scripted provider reports for one call to each
// model.
var usageOf = map[string]modeltest.Usage{"model-a": {Input: 101, Output: 7}, "model-b": {Input: 202, Output: 13}}

func (c *client) usage(query string) api.UsageView {
	c.e.t.Helper()
	var u api.UsageView
	c.do("GET", "/api/usage"+query, nil).want(http.StatusOK).decode(&u)
	return u
}

// usageLine is one group or day of a usage answer, flattened for
// comparison: key (or day), tokens in and out, calls, runs.
type usageLine struct {
	key                  string
	in, out, calls, runs int64
}

func flatten(u api.UsageView) map[string][]usageLine {
	out := map[string][]usageLine{}
	for _, g := range u.Groups {
		if g.Tokens.Total != g.Tokens.Input+g.Tokens.Output {
			panic(fmt.Sprintf("group %s: total %d is not input + output", g.Key, g.Tokens.Total))
		}
		lines := []usageLine{{"total", g.Tokens.Input, g.Tokens.Output, g.Calls, g.Runs}}
		for _, d := range g.Days {
			lines = append(lines, usageLine{d.Day, d.Tokens.Input, d.Tokens.Output, d.Calls, d.Runs})
		}
		out[g.Key+" "+g.Name] = lines
	}
	return out
}

// TestUsageFromRealRuns: runs through the gateway on two users' agents
// with two models, on two days; usage grouped by agent, user and model,
// and per UTC day, is what the provider reported, call for call. An admin
// sees everyone's; an owner sees their agents' (including another
// person's runs on them) and nothing of other agents; since and until
// bound it; a query it cannot read is 400 and says why.
func TestUsageFromRealRuns(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	admin := e.signup("admin@example.com", "Admin")
	ann := e.signup("ann@example.com", "Ann")
	bob := e.signup("bob@example.com", "Bob")
	a1, b1 := ann.createAgent("ann's"), bob.createAgent("bob's")
	ann.do("PATCH", "/api/agents/"+a1, map[string]any{"model": "model-a"}).want(http.StatusOK)
	bob.do("PATCH", "/api/agents/"+b1, map[string]any{"model": "model-b"}).want(http.StatusOK)
	ann.grant(a1, bob.user.ID, "runner")

	var mu sync.Mutex
	reported := map[string]corral.Tokens{} // by model, as the provider said
	e.answer(func(r modeltest.Request) modeltest.Reply {
		u, ok := usageOf[r.Model]
		if !ok {
			t.Errorf("a call to model %q", r.Model)
		}
		mu.Lock()
		got := reported[r.Model]
		reported[r.Model] = corral.Tokens{Input: got.Input + u.Input, Output: got.Output + u.Output}
		mu.Unlock()
		reply := modeltest.Text("done")
		if r.Model == "model-b" && len(r.LastToolResults()) == 0 {
			reply = modeltest.Calls(modeltest.ShellCall("c1", "true")) // model-b's runs make two calls
		}
		reply.Usage = &u
		return reply
	})
	run := func(c *client, agent string) {
		t.Helper()
		r := c.send(agent, "go")
		if done := c.waitRun(r.ID, "completed", "errored", "paused"); done.Status != "completed" {
			t.Fatalf("run %s: %s (%s)", r.ID, done.Status, done.Reason)
		}
	}
	// 2026-11-29: ann on her agent; bob on his (two calls).
	run(ann, a1)
	run(bob, b1)
	// 2026-11-30: bob on ann's agent, and ann on hers again.
	e.clock.Advance(24 * time.Hour)
	run(bob, a1)
	run(ann, a1)

	a, b := usageOf["model-a"], usageOf["model-b"]
	aAgent := "ann's"
	want := map[string]map[string][]usageLine{
		"?group_by=agent": {
			a1 + " " + aAgent: {{"total", 3 * a.Input, 3 * a.Output, 3, 3},
				{"2026-11-29", a.Input, a.Output, 1, 1}, {"2026-11-30", 2 * a.Input, 2 * a.Output, 2, 2}},
			b1 + " bob's": {{"total", 2 * b.Input, 2 * b.Output, 2, 1}, {"2026-11-29", 2 * b.Input, 2 * b.Output, 2, 1}},
		},
		"?group_by=user": {
			ann.user.ID + " Ann": {{"total", 2 * a.Input, 2 * a.Output, 2, 2},
				{"2026-11-29", a.Input, a.Output, 1, 1}, {"2026-11-30", a.Input, a.Output, 1, 1}},
			bob.user.ID + " Bob": {{"total", 2*b.Input + a.Input, 2*b.Output + a.Output, 3, 2},
				{"2026-11-29", 2 * b.Input, 2 * b.Output, 2, 1}, {"2026-11-30", a.Input, a.Output, 1, 1}},
		},
		"?group_by=model": {
			"model-a ": {{"total", 3 * a.Input, 3 * a.Output, 3, 3},
				{"2026-11-29", a.Input, a.Output, 1, 1}, {"2026-11-30", 2 * a.Input, 2 * a.Output, 2, 2}},
			"model-b ": {{"total", 2 * b.Input, 2 * b.Output, 2, 1}, {"2026-11-29", 2 * b.Input, 2 * b.Output, 2, 1}},
		},
	}
	for query, groups := range want {
		got := admin.usage(query)
		if got.Scope != "all" || !reflect.DeepEqual(flatten(got), groups) {
			t.Errorf("admin's usage%s: scope %s\n%v\nwant\n%v", query, got.Scope, flatten(got), groups)
		}
	}
	// What the provider reported, summed per model, is what usage says.
	for _, g := range admin.usage("?group_by=model").Groups {
		if r := reported[g.Key]; r.Input != g.Tokens.Input || r.Output != g.Tokens.Output {
			t.Errorf("model %s: usage %+v, the provider reported %+v", g.Key, g.Tokens, r)
		}
	}

	// Ann owns one agent: its usage, bob's run on it included; bob sees
	// his own agent's only, not his run on ann's.
	if got := flatten(ann.usage("")); !reflect.DeepEqual(got, map[string][]usageLine{a1 + " " + aAgent: want["?group_by=agent"][a1+" "+aAgent]}) {
		t.Errorf("ann's usage: %v", got)
	}
	annByUser := ann.usage("?group_by=user")
	wantAnn := map[string][]usageLine{
		ann.user.ID + " Ann": want["?group_by=user"][ann.user.ID+" Ann"],
		bob.user.ID + " Bob": {{"total", a.Input, a.Output, 1, 1}, {"2026-11-30", a.Input, a.Output, 1, 1}},
	}
	if annByUser.Scope != "own" || !reflect.DeepEqual(flatten(annByUser), wantAnn) {
		t.Errorf("ann's usage by user: scope %s, %v\nwant %v", annByUser.Scope, flatten(annByUser), wantAnn)
	}
	if got := flatten(bob.usage("?group_by=model")); !reflect.DeepEqual(got, map[string][]usageLine{"model-b ": want["?group_by=model"]["model-b "]}) {
		t.Errorf("bob's usage by model: %v", got)
	}

	// since is included, until excluded; both are echoed.
	day2 := admin.usage("?group_by=model&since=2026-11-30")
	if got := flatten(day2); !reflect.DeepEqual(got, map[string][]usageLine{"model-a ": {{"total", 2 * a.Input, 2 * a.Output, 2, 2},
		{"2026-11-30", 2 * a.Input, 2 * a.Output, 2, 2}}}) || day2.Since == nil || *day2.Since != "2026-11-30T00:00:00Z" || day2.Until != nil {
		t.Errorf("since the 30th: %v (since %v, until %v)", got, day2.Since, day2.Until)
	}
	day1 := admin.usage("?group_by=model&until=2026-11-30T00:00:00Z")
	if got := flatten(day1); !reflect.DeepEqual(got, map[string][]usageLine{"model-a ": {{"total", a.Input, a.Output, 1, 1},
		{"2026-11-29", a.Input, a.Output, 1, 1}}, "model-b ": want["?group_by=model"]["model-b "]}) {
		t.Errorf("until the 30th: %v", got)
	}
	if got := admin.usage("?since=2026-12-01"); len(got.Groups) != 0 {
		t.Errorf("since a day with no usage: %+v, want no groups", got.Groups)
	}

	for _, tt := range []struct{ query, says string }{
		{"?group_by=day", `group_by must be one of agent, user, model (got "day")`},
		{"?since=yesterday", `since must be an RFC 3339 time (2026-11-29T12:00:00Z) or a date (2026-11-29), not "yesterday"`},
		{"?until=2026-13-01", `until must be an RFC 3339 time (2026-11-29T12:00:00Z) or a date (2026-11-29), not "2026-13-01"`},
		{"?since=2026-11-30&until=2026-11-29", "since (2026-11-30T00:00:00Z) must be before until (2026-11-29T00:00:00Z)"},
		{"?groupby=agent", "unknown query parameter groupby: this endpoint takes group_by, since, until"},
		{"?group_by=agent&group_by=user", "group_by is given 2 times: give it once"},
	} {
		res := ann.do("GET", "/api/usage"+tt.query, nil).want(http.StatusBadRequest)
		var body api.ErrorBody
		res.decode(&body)
		if body.Error.Code != corral.EINVALID || body.Error.Message != tt.says {
			t.Errorf("usage%s: %+v, want invalid_input %q", tt.query, body.Error, tt.says)
		}
	}
}

// auditPage reads one page of the audit log: its lines and the next
// cursor.
func (c *client) auditPage(after string, limit int) ([]api.AuditLineView, string) {
	c.e.t.Helper()
	res := c.do("GET", fmt.Sprintf("/api/audit?after=%s&limit=%d", after, limit), nil).want(http.StatusOK)
	if ct := res.header.Get("Content-Type"); ct != "application/x-ndjson" {
		c.e.t.Fatalf("audit page: Content-Type %q", ct)
	}
	var lines []api.AuditLineView
	sc := bufio.NewScanner(bytes.NewReader(res.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l api.AuditLineView
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			c.e.t.Fatalf("audit line %q: %v", sc.Bytes(), err)
		}
		if (l.Trace == nil) == (l.Account == nil) || (l.Trace != nil) != (l.Kind == "trace") {
			c.e.t.Fatalf("audit line %q: want exactly one of trace and account, as kind says", sc.Bytes())
		}
		lines = append(lines, l)
	}
	next := res.header.Get(api.NextCursorHeader)
	if len(lines) > 0 && next != lines[len(lines)-1].Cursor {
		c.e.t.Fatalf("%s %q, the page's last line's cursor is %q", api.NextCursorHeader, next, lines[len(lines)-1].Cursor)
	}
	if len(lines) == 0 && next != after && !(after == "" && next == "0") {
		c.e.t.Fatalf("an empty page after %q gives %s %q, want the same cursor", after, api.NextCursorHeader, next)
	}
	return lines, next
}

// auditLineKey names an audit line by its content.
func auditLineKey(l api.AuditLineView) string {
	if l.Trace != nil {
		return fmt.Sprintf("trace %s/%d", l.Trace.Chain, l.Trace.Seq)
	}
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	a := l.Account
	return fmt.Sprintf("account %s %s %s %s %s %s", a.Type, s(a.Actor), s(a.User), s(a.Agent), s(a.Object), s(a.Detail))
}

// TestAuditPagesExactlyOnceWhileWritten: while runs on three agents and
// account changes (logins and logouts, API tokens, grants, links,
// credentials and agent secrets) are made from several goroutines, an
// admin pages through the audit log three lines at a time; once the
// writers are done and the reader has caught up, the pages hold every
// trace event and account event the database holds, each once, in order.
// A non-admin is refused; no page carries a secret the test used.
func TestAuditPagesExactlyOnceWhileWritten(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	admin := e.signup("admin@example.com", "Admin")
	people := []*client{e.signup("ann@example.com", "Ann"), e.signup("bob@example.com", "Bob"), e.signup("cy@example.com", "Cy")}
	e.answer(func(r modeltest.Request) modeltest.Reply {
		if len(r.LastToolResults()) == 0 {
			return modeltest.Calls(modeltest.ShellCall("c1", "echo hi"))
		}
		return modeltest.Text("done")
	})
	admin.do("GET", "/api/audit", nil).want(http.StatusOK)
	people[0].do("GET", "/api/audit", nil).want(http.StatusForbidden)
	e.anon().do("GET", "/api/audit", nil).want(http.StatusUnauthorized)

	var mu sync.Mutex
	secrets := []string{"correct horse battery", testModelKey}
	keep := func(s ...string) {
		mu.Lock()
		secrets = append(secrets, s...)
		mu.Unlock()
	}
	for _, c := range append([]*client{admin}, people...) {
		keep(c.cookie)
	}
	var wg sync.WaitGroup
	for i, c := range people {
		agent := c.createAgent(fmt.Sprintf("agent %d", i))
		other := people[(i+1)%len(people)]
		wg.Add(2)
		go func() { // runs
			defer wg.Done()
			for range 2 {
				r := c.send(agent, "say hi")
				c.waitRun(r.ID, "completed", "errored")
			}
		}()
		go func() { // account changes
			defer wg.Done()
			for j := range 3 {
				login := e.anon().do("POST", "/api/auth/login", map[string]string{"email": c.user.Email, "password": "correct horse battery"}).want(http.StatusOK)
				s := &client{e: e, cookie: login.cookie(api.CookieName)}
				keep(s.cookie)
				var tok api.TokenView
				s.do("POST", "/api/tokens", map[string]string{"name": fmt.Sprintf("ci %d", j)}).want(http.StatusCreated).decode(&tok)
				keep(tok.Token)
				s.do("DELETE", "/api/tokens/"+tok.ID, nil).want(http.StatusNoContent)
				c.grant(agent, other.user.ID, []string{"viewer", "runner", "editor"}[j])
				l := c.link(agent, "viewer")
				keep(l.Token)
				c.do("DELETE", "/api/agents/"+agent+"/links/"+l.ID, nil).want(http.StatusNoContent)
				credSecret := fmt.Sprintf("forge-secret-%d-%d", i, j)
				keep(credSecret)
				var cred api.CredentialView
				c.do("POST", "/api/credentials", map[string]string{"name": fmt.Sprintf("forge %d", j), "host": "git.example.org",
					"username": "me", "secret": credSecret}).want(http.StatusCreated).decode(&cred)
				c.do("DELETE", "/api/credentials/"+cred.ID, nil).want(http.StatusNoContent)
				secretValue := fmt.Sprintf("Bearer agent-secret-%d-%d", i, j)
				keep(secretValue)
				var sv api.SecretView
				c.do("POST", "/api/agents/"+agent+"/secrets", map[string]string{"name": fmt.Sprintf("npm%d", j), "host": "registry.npmjs.org",
					"header": "Authorization", "value": secretValue}).want(http.StatusCreated).decode(&sv)
				c.do("DELETE", "/api/agents/"+agent+"/secrets/"+sv.ID, nil).want(http.StatusNoContent)
				s.do("POST", "/api/auth/logout", nil).want(http.StatusNoContent)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var pages []api.AuditLineView
	var bodies [][]byte
	after, pagesRead := "", 0
	for caughtUp := false; !caughtUp; {
		finished := false
		select {
		case <-done:
			finished = true
		default:
		}
		page, next := admin.auditPage(after, 3)
		pagesRead++
		pages = append(pages, page...)
		for _, l := range page {
			b, _ := json.Marshal(l)
			bodies = append(bodies, b)
		}
		after = next
		caughtUp = finished && len(page) < 3
	}
	if t.Failed() {
		return
	}

	// Every event the database holds, read apart from the API.
	db := e.rawDB(t)
	all := map[string]string{} // cursor → key
	rows, err := db.Query(`
		SELECT a.seq, t.run_id, t.seq, e.type, e.actor_id, e.user_id, e.agent_id, e.object, e.detail
		FROM audit a LEFT JOIN trace_events t ON t.run_id = a.run_id AND t.seq = a.trace_seq
		LEFT JOIN account_events e ON e.seq = a.account`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var seq int64
		var run, typ, actor, user, agent, object, detail *string
		var tseq *int64
		if err := rows.Scan(&seq, &run, &tseq, &typ, &actor, &user, &agent, &object, &detail); err != nil {
			t.Fatal(err)
		}
		s := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		if run != nil {
			all[fmt.Sprint(seq)] = fmt.Sprintf("trace %s/%d", *run, *tseq)
		} else {
			all[fmt.Sprint(seq)] = fmt.Sprintf("account %s %s %s %s %s %s", s(typ), s(actor), s(user), s(agent), s(object), s(detail))
		}
	}
	rows.Close()
	var traces, accounts int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM trace_events), (SELECT count(*) FROM account_events)`).Scan(&traces, &accounts); err != nil {
		t.Fatal(err)
	}
	if len(all) != traces+accounts {
		t.Fatalf("the audit log holds %d entries, the database %d trace events and %d account events", len(all), traces, accounts)
	}
	seen := map[string]bool{}
	var last int64
	for _, l := range pages {
		var n int64
		fmt.Sscan(l.Cursor, &n)
		if n <= last {
			t.Fatalf("cursor %s came after %d: out of order, or twice", l.Cursor, last)
		}
		last = n
		if seen[l.Cursor] {
			t.Fatalf("%s (cursor %s) came twice", auditLineKey(l), l.Cursor)
		}
		seen[l.Cursor] = true
		if want, ok := all[l.Cursor]; !ok || want != auditLineKey(l) {
			t.Errorf("cursor %s is %s in a page, %q in the database", l.Cursor, auditLineKey(l), want)
		}
	}
	for cursor, key := range all {
		if !seen[cursor] {
			t.Errorf("%s (cursor %s) never came in a page", key, cursor)
		}
	}
	// The writers made at least this much, while the reader read.
	// Four signups, each signed in; per person and round a login, a
	// token made and deleted, a grant, a link made and deleted, a
	// credential made and deleted, a secret made and deleted, a logout.
	if wantAccounts := 4*2 + 3*3*11; accounts != wantAccounts || traces < 3*2*5 {
		t.Errorf("%d account events and %d trace events: fewer than the writers made", accounts, traces)
	}
	t.Logf("%d entries in %d pages (%d trace events, %d account events)", len(pages), pagesRead, traces, accounts)

	for _, b := range bodies {
		for _, s := range secrets {
			if s != "" && strings.Contains(string(b), s) {
				t.Fatalf("an audit line carries a secret the test used (%.12s...): %s", s, b)
			}
		}
	}
	e.assertNoSecrets(t)
}

// TestRunsInFlightAndBudgets: a run waiting on its model call is in
// flight, with its agent, owner, trigger, start and the tokens it has
// spent so far, and its agent has an open reservation; once the call is
// answered the run leaves the list and the reservation is settled. The
// admin sees every run; the owner, and a viewer of the agent, see it; a
// stranger sees nothing; the budgets are the admin's alone.
func TestRunsInFlightAndBudgets(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	admin := e.signup("admin@example.com", "Admin")
	ann := e.signup("ann@example.com", "Ann")
	viewer := e.signup("viewer@example.com", "Viewer")
	stranger := e.signup("stranger@example.com", "Stranger")
	agent := ann.createAgent("busy")
	ann.grant(agent, viewer.user.ID, "viewer")
	release := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	e.answer(modeltest.Sequence(
		modeltest.Reply{ToolCalls: []modeltest.ToolCall{modeltest.ShellCall("c1", "true")}, Usage: &modeltest.Usage{Input: 300, Output: 20}},
		modeltest.Reply{Content: "done", Usage: &modeltest.Usage{Input: 400, Output: 5}, Block: release},
	))
	run := ann.send(agent, "take your time")
	waitFor(t, "the run's second model call", func() bool { return len(e.model.Requests()) == 2 })

	inFlight := func(c *client) []api.RunInFlightView {
		t.Helper()
		var l api.List[api.RunInFlightView]
		c.do("GET", "/api/runs?status=active", nil).want(http.StatusOK).decode(&l)
		return l.Items
	}
	for _, c := range []*client{admin, ann, viewer} {
		got := inFlight(c)
		if len(got) != 1 {
			t.Fatalf("%s sees %d runs in flight, want the one", c.user.Name, len(got))
		}
		r := got[0]
		if r.ID != run.ID || r.AgentID != agent || r.AgentName != "busy" || r.Owner.ID != ann.user.ID || r.Owner.Name != "Ann" ||
			r.Status != "running" || r.TriggeredBy == nil || r.TriggeredBy.ID != ann.user.ID || r.StartedAt == nil ||
			r.Tokens.Input != 300 || r.Tokens.Output != 20 {
			t.Errorf("%s sees %+v, want run %s of busy (Ann's), running, started by Ann, 300+20 tokens so far", c.user.Name, r, run.ID)
		}
	}
	if got := inFlight(stranger); len(got) != 0 {
		t.Errorf("a stranger sees %+v, want nothing", got)
	}
	budgets := func() map[string]api.AgentBudgetView {
		var l api.List[api.AgentBudgetView]
		admin.do("GET", "/api/admin/budgets", nil).want(http.StatusOK).decode(&l)
		out := map[string]api.AgentBudgetView{}
		for _, b := range l.Items {
			out[b.AgentID] = b
		}
		return out
	}
	b := budgets()[agent]
	if b.AgentName != "busy" || b.Owner.ID != ann.user.ID || b.OpenReservations != 1 || b.Budget.Used != 320 || b.Budget.Reserved == 0 {
		t.Errorf("budget during the call: %+v, want one open reservation, 320 used, something reserved", b)
	}
	ann.do("GET", "/api/admin/budgets", nil).want(http.StatusForbidden)

	close(release)
	ann.waitRun(run.ID, "completed")
	waitFor(t, "the run to leave the list", func() bool { return len(inFlight(admin)) == 0 })
	if got := inFlight(ann); len(got) != 0 {
		t.Errorf("after the run ended ann sees %+v", got)
	}
	b = budgets()[agent]
	if b.OpenReservations != 0 || b.Budget.Used != 725 || b.Budget.Reserved != 0 {
		t.Errorf("budget after the run: %+v, want nothing open, 725 used", b)
	}

	for _, q := range []string{"", "?status=running", "?status=active&status=active", "?status=active&agent=" + agent} {
		admin.do("GET", "/api/runs"+q, nil).want(http.StatusBadRequest)
	}
}
