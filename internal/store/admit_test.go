package store

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
)

// admitAll is a decision that admits everything.
func admitAll(corral.AdmissionFacts) string { return "" }

// admission builds what a service hands Admit for one message of user to
// agent, sent at t0 plus offset.
func admission(agent corral.Agent, user corral.User, content string, offset time.Duration) (corral.Message, corral.Run, corral.Admission) {
	at := t0.Add(offset)
	runID := corral.NewID("run")
	m := corral.Message{
		ID: corral.NewID("msg"), AgentID: agent.ID, Role: corral.RoleUser, Content: content,
		Author: &corral.UserRef{ID: user.ID}, RunID: runID, CreatedAt: at,
	}
	r := corral.Run{
		ID: runID, AgentID: agent.ID, TriggeredBy: &corral.UserRef{ID: user.ID, Name: user.Name},
		MessageID: m.ID, StageID: corral.NewID("chg"), CreatedAt: at,
	}
	ev := corral.Admission{
		ID: corral.NewID("adm"), AgentID: agent.ID, UserID: user.ID,
		PromptBytes: int64(len(content)), At: at,
	}
	return m, r, ev
}

// mustAdmit admits a run of agent for user and returns it as it is stored.
func mustAdmit(t *testing.T, db *DB, agent corral.Agent, user corral.User, offset time.Duration) corral.Run {
	t.Helper()
	m, r, ev := admission(agent, user, "do the thing", offset)
	got, err := db.Admit(context.Background(), m, r, ev, admitAll)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	if got.RunID != r.ID || got.Reason != "" {
		t.Fatalf("Admit = run %q, reason %q; want run %q admitted", got.RunID, got.Reason, r.ID)
	}
	r.Status = corral.RunAdmitted
	return r
}

// mustUpdateRun moves r to status, stamping the times a real run would get.
func mustUpdateRun(t *testing.T, db *DB, r corral.Run, status corral.RunStatus, violation corral.Violation, ended time.Time) corral.Run {
	t.Helper()
	from := r.Status
	r.Status, r.Violation, r.EndedAt = status, violation, ended
	if err := db.UpdateRun(context.Background(), r, from); err != nil {
		t.Fatalf("UpdateRun(%s → %s): %v", from, status, err)
	}
	return r
}

// count returns the number of rows of table matching where.
func count(t *testing.T, db *DB, table, where string, args ...any) int {
	t.Helper()
	var n int
	if err := db.queryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE `+where, args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestAdmit(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	a.Budget.Tokens = 1000
	if err := db.UpdateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}

	// Each step admits or refuses one message; the facts each decision
	// sees follow from the steps before it.
	var first corral.Run
	steps := []struct {
		name       string
		reason     string // what decide answers
		before     func() // run before Admit
		wantFacts  [2]int64
		wantState  corral.AgentState
		wantUsed   int64
		wantStored bool // the message and the run exist afterwards
	}{
		{"first is admitted", "", nil, [2]int64{0, 0}, corral.StateActive, 0, true},
		{"busy while the first is active", corral.ReasonBusy, nil, [2]int64{1, 1}, corral.StateActive, 0, false},
		{"admitted once the first completed", "", func() {
			addUsage(t, db, first.ID, corral.Tokens{Input: 30, Output: 12})
			mustUpdateRun(t, db, first, corral.RunCompleted, "", t0.Add(time.Minute))
		}, [2]int64{1, 0}, corral.StateActive, 42, true},
		{"refused while quarantined", corral.ReasonQuarantined, func() {
			if _, err := db.SetAgentState(ctx, a.ID, corral.StateQuarantined, corral.StateActive); err != nil {
				t.Fatal(err)
			}
		}, [2]int64{2, 1}, corral.StateQuarantined, 42, false},
	}
	var want []corral.Admission // newest first
	for i, s := range steps {
		if s.before != nil {
			s.before()
		}
		m, r, ev := admission(a, owner, fmt.Sprintf("message %d", i), time.Duration(i)*time.Second)
		ev.At = ev.At.Add(time.Microsecond) // stored in milliseconds: comes back truncated
		// Whatever the caller puts in the facts' fields is overwritten.
		ev.RunID, ev.Reason, ev.RunsAdmitted, ev.ActiveRuns = "bogus", "bogus", 99, 99
		ev.TokensUsed, ev.TokensBudget, ev.AgentState = 99, 99, "bogus"
		calls := 0
		got, err := db.Admit(ctx, m, r, ev, func(f corral.AdmissionFacts) string {
			calls++
			if f.Agent.ID != a.ID || f.Agent.Budget.Tokens != 1000 || f.Agent.State != s.wantState {
				t.Errorf("%s: facts' agent = %s %+v %s, want %s with a budget of 1000, %s",
					s.name, f.Agent.ID, f.Agent.Budget, f.Agent.State, a.ID, s.wantState)
			}
			if got := [2]int64{f.RunsAdmitted, f.ActiveRuns}; got != s.wantFacts {
				t.Errorf("%s: facts (admitted, active) = %v, want %v", s.name, got, s.wantFacts)
			}
			return s.reason
		})
		if err != nil {
			t.Fatalf("%s: Admit: %v", s.name, err)
		}
		if calls != 1 {
			t.Errorf("%s: decide called %d times, want 1", s.name, calls)
		}
		wantEv := corral.Admission{
			ID: ev.ID, AgentID: a.ID, UserID: owner.ID, Reason: s.reason, PromptBytes: int64(len(m.Content)),
			RunsAdmitted: s.wantFacts[0], ActiveRuns: s.wantFacts[1], TokensUsed: s.wantUsed, TokensBudget: 1000,
			AgentState: s.wantState, At: t0.Add(time.Duration(i) * time.Second),
		}
		if s.wantStored {
			wantEv.RunID = r.ID
		}
		if got != wantEv {
			t.Errorf("%s: Admit = %+v\nwant      %+v", s.name, got, wantEv)
		}
		want = append([]corral.Admission{wantEv}, want...)

		run, err := db.Run(ctx, r.ID)
		if !s.wantStored {
			wantNotFound(t, err, "run")
			if n := count(t, db, "messages", "id = ?", m.ID); n != 0 {
				t.Errorf("%s: a refused message was stored", s.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: Run: %v", s.name, err)
		}
		r.Status = corral.RunAdmitted
		if !reflect.DeepEqual(run, r) {
			t.Errorf("%s: Run = %+v\nwant    %+v", s.name, run, r)
		}
		if i == 0 {
			first = run
		}
		msgs, err := db.Messages(ctx, a.ID, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		last := msgs[len(msgs)-1]
		if last.ID != m.ID || last.Content != m.Content || last.RunID != r.ID || last.Author == nil || last.Author.ID != owner.ID {
			t.Errorf("%s: last message = %+v, want %+v", s.name, last, m)
		}
	}

	got, err := db.Admissions(ctx, a.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Admissions =\n%+v\nwant\n%+v", got, want)
	}
	if n := count(t, db, "runs", "agent_id = ?", a.ID); n != 2 {
		t.Errorf("%d runs stored, want 2", n)
	}
	if n := count(t, db, "messages", "agent_id = ?", a.ID); n != 2 {
		t.Errorf("%d messages stored, want 2", n)
	}
}

func TestAdmitErrors(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	b := mustAgent(t, db, owner, "b", 0)
	taken := mustAdmit(t, db, a, owner, 0)
	takenEv, err := db.Admissions(ctx, a.ID, 1)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		change func(*corral.Message, *corral.Run, *corral.Admission)
		reason string
		code   string
		kind   string // for ENOTFOUND
	}{
		{"unknown agent", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			m.AgentID, r.AgentID, ev.AgentID = "agt_nope", "agt_nope", "agt_nope"
		}, "", corral.ENOTFOUND, "agent"},
		{"unknown agent refused", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			ev.AgentID = "agt_nope"
		}, corral.ReasonBusy, corral.ENOTFOUND, "agent"},
		{"unknown user", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			ev.UserID = "usr_nope"
		}, "", corral.ENOTFOUND, "user"},
		{"unknown author", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			m.Author.ID = "usr_nope"
		}, "", corral.ENOTFOUND, "user"},
		{"unknown trigger", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			r.TriggeredBy.ID = "usr_nope"
		}, "", corral.ENOTFOUND, "user"},
		{"run of another agent", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			r.AgentID = b.ID
		}, "", corral.EINTERNAL, ""},
		{"message of another agent", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			m.AgentID = b.ID
		}, "", corral.EINTERNAL, ""},
		{"no evidence id", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			ev.ID = ""
		}, "", corral.EINTERNAL, ""},
		{"no run id", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			r.ID = ""
		}, "", corral.EINTERNAL, ""},
		{"run id taken", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			r.ID = taken.ID
		}, "", corral.ECONFLICT, ""},
		{"message id taken", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			m.ID = taken.MessageID
		}, "", corral.ECONFLICT, ""},
		{"evidence id taken", func(m *corral.Message, r *corral.Run, ev *corral.Admission) {
			ev.ID = takenEv[0].ID
		}, "", corral.ECONFLICT, ""},
		{"unknown reason", nil, "sleepy", corral.EINTERNAL, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, r, ev := admission(a, owner, "hello", time.Second)
			if c.change != nil {
				c.change(&m, &r, &ev)
			}
			_, err := db.Admit(ctx, m, r, ev, func(corral.AdmissionFacts) string { return c.reason })
			if c.kind != "" {
				wantNotFound(t, err, c.kind)
			} else {
				wantCode(t, err, c.code)
			}
			// Nothing of a failed admission stays: not even the rows written
			// before the failing one.
			for _, tb := range []string{"runs", "messages", "admissions"} {
				if n := count(t, db, tb, "true"); n != 1 {
					t.Errorf("%s rows = %d, want only the first admission's", tb, n)
				}
			}
		})
	}
}

// TestAdmissionsHoldNoPrompt checks that the evidence cannot carry the text
// of a prompt: no column could hold it, and none does.
func TestAdmissionsHoldNoPrompt(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)

	columns := `SELECT name FROM pragma_table_info('admissions') ORDER BY cid`
	if onPostgres() {
		columns = `SELECT column_name FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'admissions' ORDER BY ordinal_position`
	}
	rows, err := db.query(ctx, columns)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := collect(rows, func(s scanner) (string, error) {
		var name string
		return name, s.Scan(&name)
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCols := []string{"seq", "id", "agent_id", "user_id", "run_id", "reason", "prompt_bytes",
		"runs_admitted", "active_runs", "tokens_used", "tokens_budget", "agent_state", "at", "pending_disk_bytes",
		"owner_pending_disk_bytes", "server_pending_disk_bytes"}
	if !slices.Equal(cols, wantCols) {
		t.Errorf("admissions columns = %v, want exactly %v", cols, wantCols)
	}

	const secret = "the launch code is 0000"
	for _, reason := range []string{"", corral.ReasonPromptTooLarge, corral.ReasonBusy} {
		m, r, ev := admission(a, owner, secret, 0)
		if _, err := db.Admit(ctx, m, r, ev, func(corral.AdmissionFacts) string { return reason }); err != nil {
			t.Fatalf("Admit (reason %q): %v", reason, err)
		}
	}
	rows, err = db.query(ctx, `SELECT * FROM admissions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		vals := make([]any, len(wantCols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if s := fmt.Sprintf("%s", v); strings.Contains(s, "launch code") {
				t.Errorf("admissions.%s holds the prompt: %q", cols[i], s)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d admissions stored, want 3", n)
	}
	// The one admitted message is the only place the text lives.
	if got := count(t, db, "messages", "content = ?", secret); got != 1 {
		t.Errorf("%d messages hold the prompt, want 1", got)
	}
}

// TestAdmitConcurrent sends many messages at once through two handles on
// one file, as two server processes would: the last slot goes to exactly
// one of them.
func TestAdmitConcurrent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	dbs := []*DB{openAt(t, path), openAt(t, path)}
	owner := mustUser(t, dbs[0], "owner")
	a := mustAgent(t, dbs[0], owner, "a", 0)
	busy := func(f corral.AdmissionFacts) string {
		if f.ActiveRuns > 0 {
			return corral.ReasonBusy
		}
		return ""
	}

	const n = 20
	var wg sync.WaitGroup
	got := make([]corral.Admission, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			m, r, ev := admission(a, owner, fmt.Sprint("message ", i), 0)
			<-start
			got[i], errs[i] = dbs[i%2].Admit(ctx, m, r, ev, busy)
		})
	}
	close(start)
	wg.Wait()

	admitted := 0
	for i, ev := range got {
		if errs[i] != nil {
			t.Fatalf("Admit %d: %v", i, errs[i])
		}
		switch ev.Reason {
		case "":
			admitted++
			if ev.ActiveRuns != 0 || ev.RunsAdmitted != 0 {
				t.Errorf("admitted %d saw %d active of %d runs, want 0 of 0", i, ev.ActiveRuns, ev.RunsAdmitted)
			}
		case corral.ReasonBusy:
			if ev.ActiveRuns != 1 || ev.RunsAdmitted != 1 || ev.RunID != "" {
				t.Errorf("refused %d saw %d active of %d runs with run %q, want 1 of 1 and no run",
					i, ev.ActiveRuns, ev.RunsAdmitted, ev.RunID)
			}
		default:
			t.Errorf("Admit %d: reason %q", i, ev.Reason)
		}
	}
	if admitted != 1 {
		t.Errorf("%d admitted, want exactly 1", admitted)
	}
	if got := count(t, dbs[0], "runs", "agent_id = ?", a.ID); got != 1 {
		t.Errorf("%d runs stored, want 1", got)
	}
	if got := count(t, dbs[0], "messages", "agent_id = ?", a.ID); got != 1 {
		t.Errorf("%d messages stored, want 1", got)
	}
	if got := count(t, dbs[0], "admissions", "agent_id = ?", a.ID); got != n {
		t.Errorf("%d admissions stored, want %d", got, n)
	}
}
