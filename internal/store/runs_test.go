package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral"
)

func TestUpdateRun(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	r := mustAdmit(t, db, a, owner, 0)
	addUsage(t, db, r.ID, corral.Tokens{Input: 7, Output: 3})
	r.Tokens = corral.Tokens{Input: 7, Output: 3}

	// Steps run in order on the same run; a failing step must leave it as
	// the step before left it.
	steps := []struct {
		name   string
		change func(corral.Run) corral.Run
		from   []corral.RunStatus
		code   string // "" when the update must succeed
		kind   string // for ENOTFOUND
	}{
		{"start", func(r corral.Run) corral.Run {
			r.Status, r.StartedAt = corral.RunRunning, t0.Add(time.Second)
			return r
		}, []corral.RunStatus{corral.RunAdmitted}, "", ""},
		{"start again", func(r corral.Run) corral.Run {
			r.Status = corral.RunRunning
			return r
		}, []corral.RunStatus{corral.RunAdmitted}, corral.ECONFLICT, ""},
		{"no from", func(r corral.Run) corral.Run {
			r.Status = corral.RunCompleted
			return r
		}, nil, corral.EINVALID, ""},
		{"unknown run", func(r corral.Run) corral.Run {
			r.ID, r.Status = "run_nope", corral.RunCompleted
			return r
		}, []corral.RunStatus{corral.RunRunning}, corral.ENOTFOUND, "run"},
		{"unknown status", func(r corral.Run) corral.Run {
			r.Status = "sleeping"
			return r
		}, []corral.RunStatus{corral.RunRunning}, corral.EINTERNAL, ""},
		{"unknown violation", func(r corral.Run) corral.Run {
			r.Status, r.Violation = corral.RunErrored, "network"
			return r
		}, []corral.RunStatus{corral.RunRunning}, corral.EINTERNAL, ""},
		{"end with a violation, tokens ignored", func(r corral.Run) corral.Run {
			r.Status, r.Violation, r.Reason = corral.RunErrored, "memory", "the memory limit ended it"
			r.ChangeSetID, r.EndedAt = r.StageID, t0.Add(time.Minute)
			r.Tokens = corral.Tokens{Input: 1e6, Output: 1e6}
			return r
		}, []corral.RunStatus{corral.RunAdmitted, corral.RunRunning, corral.RunPaused}, "", ""},
		{"final is final", func(r corral.Run) corral.Run {
			r.Status = corral.RunRunning
			return r
		}, []corral.RunStatus{corral.RunAdmitted, corral.RunRunning, corral.RunPaused}, corral.ECONFLICT, ""},
		{"reconcile clears the times", func(r corral.Run) corral.Run {
			r.Status, r.StartedAt, r.EndedAt = corral.RunReconciled, time.Time{}, time.Time{}
			r.Violation, r.Reason, r.ChangeSetID = "", "", ""
			return r
		}, []corral.RunStatus{corral.RunErrored}, "", ""},
	}
	want := r
	for _, s := range steps {
		next := s.change(want)
		err := db.UpdateRun(ctx, next, s.from...)
		switch {
		case s.kind != "":
			wantNotFound(t, err, s.kind)
		case s.code != "":
			wantCode(t, err, s.code)
		case err != nil:
			t.Fatalf("%s: UpdateRun: %v", s.name, err)
		default:
			next.Tokens = want.Tokens // only Settle writes them
			want = next
		}
		got, err := db.Run(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Run = %+v\nwant    %+v", s.name, got, want)
		}
	}
}

func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	b := mustAgent(t, db, owner, "b", 0)
	// r2 is admitted after r1 but created earlier: admission order wins.
	r1 := mustAdmit(t, db, a, owner, time.Hour)
	r2 := mustAdmit(t, db, a, owner, 0)
	rb := mustAdmit(t, db, b, owner, 0)
	big := bytes.Repeat([]byte("checkpoint "), 100_000) // past SQLite's page size

	if got, err := db.Checkpoint(ctx, r1.ID); err != nil || got != nil {
		t.Errorf("Checkpoint of a new run = %q, %v; want nil", got, err)
	}
	if id, got, err := db.LastCheckpoint(ctx, a.ID); err != nil || id != "" || got != nil {
		t.Errorf("LastCheckpoint with none = %q, %q, %v; want none", id, got, err)
	}

	steps := []struct {
		name     string
		run      string
		data     []byte
		wantRun  []byte // Checkpoint(run) afterwards
		wantLast string // LastCheckpoint(a) afterwards
		wantData []byte
	}{
		{"first run", r1.ID, []byte("one"), []byte("one"), r1.ID, []byte("one")},
		{"replace", r1.ID, []byte("one, more"), []byte("one, more"), r1.ID, []byte("one, more")},
		{"newer run", r2.ID, []byte("two"), []byte("two"), r2.ID, []byte("two")},
		{"older run again", r1.ID, []byte("one, again"), []byte("one, again"), r2.ID, []byte("two")},
		{"large", r2.ID, big, big, r2.ID, big},
		{"another agent's", rb.ID, []byte("b"), []byte("b"), r2.ID, big},
		{"empty removes", r2.ID, []byte{}, nil, r1.ID, []byte("one, again")},
		{"nil removes", r1.ID, nil, nil, "", nil},
	}
	for _, s := range steps {
		if err := db.SaveCheckpoint(ctx, s.run, s.data); err != nil {
			t.Fatalf("%s: SaveCheckpoint: %v", s.name, err)
		}
		got, err := db.Checkpoint(ctx, s.run)
		if err != nil || !bytes.Equal(got, s.wantRun) || (got == nil) != (s.wantRun == nil) {
			t.Errorf("%s: Checkpoint = %.20q (%d bytes), %v; want %.20q", s.name, got, len(got), err, s.wantRun)
		}
		id, data, err := db.LastCheckpoint(ctx, a.ID)
		if err != nil || id != s.wantLast || !bytes.Equal(data, s.wantData) {
			t.Errorf("%s: LastCheckpoint = %q, %.20q, %v; want %q, %.20q", s.name, id, data, err, s.wantLast, s.wantData)
		}
	}

	wantNotFound(t, db.SaveCheckpoint(ctx, "run_nope", []byte("x")), "run")
	_, err := db.Checkpoint(ctx, "run_nope")
	wantNotFound(t, err, "run")
	if id, data, err := db.LastCheckpoint(ctx, "agt_nope"); err != nil || id != "" || data != nil {
		t.Errorf("LastCheckpoint(unknown agent) = %q, %q, %v; want none", id, data, err)
	}
}

func TestSetAgentState(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	stale := a // a settings edit read before the state changes
	later := t0.Add(time.Hour)
	db.now = func() time.Time { return later }

	steps := []struct {
		name      string
		agent     string
		to        corral.AgentState
		from      []corral.AgentState
		want      bool
		code      string
		wantState corral.AgentState
	}{
		{"pause", a.ID, corral.StatePaused, []corral.AgentState{corral.StateActive}, true, "", corral.StatePaused},
		{"pause again", a.ID, corral.StatePaused, []corral.AgentState{corral.StateActive}, false, "", corral.StatePaused},
		{"resume only from quarantine", a.ID, corral.StateActive, []corral.AgentState{corral.StateQuarantined}, false, "", corral.StatePaused},
		{"quarantine", a.ID, corral.StateQuarantined, []corral.AgentState{corral.StateActive, corral.StatePaused}, true, "", corral.StateQuarantined},
		{"unknown state", a.ID, "sleeping", []corral.AgentState{corral.StateQuarantined}, false, corral.EINVALID, corral.StateQuarantined},
		{"unknown from", a.ID, corral.StateActive, []corral.AgentState{corral.StateQuarantined, "sleeping"}, false, corral.EINVALID, corral.StateQuarantined},
		{"no from", a.ID, corral.StateActive, nil, false, corral.EINVALID, corral.StateQuarantined},
		{"unknown agent", "agt_nope", corral.StateActive, []corral.AgentState{corral.StateQuarantined}, false, corral.ENOTFOUND, corral.StateQuarantined},
	}
	for _, s := range steps {
		got, err := db.SetAgentState(ctx, s.agent, s.to, s.from...)
		if s.code != "" {
			wantCode(t, err, s.code)
		} else if err != nil {
			t.Fatalf("%s: SetAgentState: %v", s.name, err)
		}
		if got != s.want {
			t.Errorf("%s: SetAgentState = %v, want %v", s.name, got, s.want)
		}
		stored, err := db.Agent(ctx, a.ID, owner.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.State != s.wantState {
			t.Errorf("%s: state = %q, want %q", s.name, stored.State, s.wantState)
		}
	}

	// Only the state and the time of the change moved.
	want := a
	want.State, want.UpdatedAt = corral.StateQuarantined, later
	got, err := db.Agent(ctx, a.ID, owner.ID)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Agent = %+v, %v\nwant    %+v", got, err, want)
	}

	// A settings edit from before the quarantine cannot undo it.
	stale.Name = "renamed"
	if err := db.UpdateAgent(ctx, stale); err != nil {
		t.Fatal(err)
	}
	got, err = db.Agent(ctx, a.ID, owner.ID)
	if err != nil || got.Name != "renamed" || got.State != corral.StateQuarantined {
		t.Errorf("after a stale UpdateAgent: name %q, state %q, %v; want renamed, quarantined", got.Name, got.State, err)
	}
}

func TestCountViolations(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	b := mustAgent(t, db, owner, "b", 0)
	end := func(agent corral.Agent, violation corral.Violation, ended time.Duration) {
		r := mustAdmit(t, db, agent, owner, 0)
		if ended < 0 {
			mustUpdateRun(t, db, r, corral.RunRunning, violation, time.Time{}) // has not ended
			return
		}
		mustUpdateRun(t, db, r, corral.RunErrored, violation, t0.Add(ended))
	}
	end(a, "timeout", 1*time.Hour)
	end(a, "memory", 2*time.Hour)
	end(a, "pids", 3*time.Hour)
	end(a, "", 4*time.Hour)       // ended without a violation
	end(a, "cpu", -1)             // a violation, but no end yet
	end(b, "output", 3*time.Hour) // another agent's

	cases := []struct {
		name  string
		agent string
		since time.Duration
		want  int64
	}{
		{"all", a.ID, 0, 3},
		{"at the first end", a.ID, 1 * time.Hour, 3},
		{"just after it", a.ID, 1*time.Hour + time.Millisecond, 2},
		{"at the last", a.ID, 3 * time.Hour, 1},
		{"after the last", a.ID, 3*time.Hour + time.Millisecond, 0},
		{"other agent", b.ID, 0, 1},
		{"unknown agent", "agt_nope", 0, 0},
	}
	for _, c := range cases {
		got, err := db.CountViolations(ctx, c.agent, t0.Add(c.since))
		if err != nil || got != c.want {
			t.Errorf("%s: CountViolations(since +%v) = %d, %v; want %d", c.name, c.since, got, err, c.want)
		}
	}
}

func TestRunsOrder(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	b := mustAgent(t, db, owner, "b", 0)
	// Creation times run backwards and repeat: the order is admission's.
	var ra []corral.Run
	for i := range 4 {
		ra = append(ra, mustAdmit(t, db, a, owner, -time.Duration(i/2)*time.Second))
	}
	rb := mustAdmit(t, db, b, owner, 0)
	ra[1] = mustUpdateRun(t, db, ra[1], corral.RunRunning, "", time.Time{})
	ra[2] = mustUpdateRun(t, db, ra[2], corral.RunCompleted, "", t0)

	ids := func(runs []corral.Run) []string {
		var s []string
		for _, r := range runs {
			s = append(s, r.ID)
		}
		return s
	}
	cases := []struct {
		name string
		call func() ([]corral.Run, error)
		want []corral.Run
	}{
		{"newest first", func() ([]corral.Run, error) { return db.Runs(ctx, a.ID, 0) }, []corral.Run{ra[3], ra[2], ra[1], ra[0]}},
		{"limited", func() ([]corral.Run, error) { return db.Runs(ctx, a.ID, 2) }, []corral.Run{ra[3], ra[2]}},
		{"other agent", func() ([]corral.Run, error) { return db.Runs(ctx, b.ID, -1) }, []corral.Run{rb}},
		{"unknown agent", func() ([]corral.Run, error) { return db.Runs(ctx, "agt_nope", 0) }, nil},
		{"active, oldest first", func() ([]corral.Run, error) {
			return db.RunsIn(ctx, corral.RunAdmitted, corral.RunRunning, corral.RunPaused)
		}, []corral.Run{ra[0], ra[1], ra[3], rb}},
		{"one status", func() ([]corral.Run, error) { return db.RunsIn(ctx, corral.RunCompleted) }, []corral.Run{ra[2]}},
		{"no status", func() ([]corral.Run, error) { return db.RunsIn(ctx) }, nil},
	}
	for _, c := range cases {
		got, err := c.call()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: runs %v, want %v\ngot  %+v\nwant %+v", c.name, ids(got), ids(c.want), got, c.want)
		}
	}
	_, err := db.Run(ctx, "run_nope")
	wantNotFound(t, err, "run")
}

func TestRunsLimitCap(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	// Filled in one transaction: 1001 single commits would only be slow.
	tx, err := db.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxRuns + 1 {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO runs (id, agent_id, status, created_at) VALUES (?, ?, 'completed', 0)`,
			fmt.Sprint("run_", i), a.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO admissions (id, agent_id, reason, prompt_bytes, runs_admitted, active_runs,
				tokens_used, tokens_budget, agent_state, at)
			VALUES (?, ?, 'busy', 0, 0, 0, 0, 0, 'active', 0)`,
			fmt.Sprint("adm_", i), a.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		limit, want int
	}{
		{0, defaultRuns},
		{-5, defaultRuns},
		{7, 7},
		{maxRuns, maxRuns},
		{maxRuns + 1, maxRuns},
		{1 << 30, maxRuns},
	} {
		runs, err := db.Runs(ctx, a.ID, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != c.want || runs[0].ID != fmt.Sprint("run_", maxRuns) {
			t.Errorf("Runs(limit %d) = %d runs from %s, want %d from the newest", c.limit, len(runs), runs[0].ID, c.want)
		}
		evs, err := db.Admissions(ctx, a.ID, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != c.want || evs[0].ID != fmt.Sprint("adm_", maxRuns) {
			t.Errorf("Admissions(limit %d) = %d from %s, want %d from the newest", c.limit, len(evs), evs[0].ID, c.want)
		}
	}
}

func TestRunsCascade(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	member := mustUser(t, db, "member")
	doomed := mustAgent(t, db, owner, "doomed", 0)
	kept := mustAgent(t, db, owner, "kept", 0)
	for _, a := range []corral.Agent{doomed, kept} {
		r := mustAdmit(t, db, a, member, 0)
		if err := db.SaveCheckpoint(ctx, r.ID, []byte("state")); err != nil {
			t.Fatal(err)
		}
		m, r, ev := admission(a, member, "refused", 0)
		if _, err := db.Admit(ctx, m, r, ev, func(corral.AdmissionFacts) string { return corral.ReasonBusy }); err != nil {
			t.Fatal(err)
		}
	}

	// Not while a run is active.
	if err := db.DeleteAgent(ctx, doomed.ID); corral.ErrorCode(err) != corral.ECONFLICT {
		t.Fatalf("DeleteAgent with an active run = %v, want a conflict", err)
	}
	runs, err := db.Runs(ctx, doomed.ID, 0)
	if err != nil || len(runs) != 1 {
		t.Fatal(runs, err)
	}
	ended := runs[0]
	ended.Status, ended.EndedAt = corral.RunCompleted, time.Now()
	if err := db.UpdateRun(ctx, ended, corral.RunAdmitted); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAgent(ctx, doomed.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAgent(ctx, doomed.ID); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("DeleteAgent of a deleted agent = %v, want not found", err)
	}
	for _, tb := range []string{"runs", "admissions"} {
		for _, c := range []struct {
			agent string
			want  int
		}{{doomed.ID, 0}, {kept.ID, map[string]int{"runs": 1, "admissions": 2}[tb]}} {
			if got := count(t, db, tb, "agent_id = ?", c.agent); got != c.want {
				t.Errorf("%s rows of %s = %d, want %d", tb, c.agent, got, c.want)
			}
		}
	}

	// The account that sent a message can go; the run and the evidence
	// stay, no longer naming it.
	if _, err := db.exec(ctx, `DELETE FROM users WHERE id = ?`, member.ID); err != nil {
		t.Fatal(err)
	}
	runs, err = db.Runs(ctx, kept.ID, 0)
	if err != nil || len(runs) != 1 || runs[0].TriggeredBy != nil {
		t.Errorf("Runs after the account went = %+v, %v; want one run triggered by nobody", runs, err)
	}
	evs, err := db.Admissions(ctx, kept.ID, 0)
	if err != nil || len(evs) != 2 || evs[0].UserID != "" || evs[1].UserID != "" {
		t.Errorf("Admissions after the account went = %+v, %v; want two naming nobody", evs, err)
	}
}

// TestRunQueriesUseIndexes checks that the queries that grow with an
// agent's history read an index, not the whole table.
func TestRunQueriesUseIndexes(t *testing.T) {
	sqliteOnly(t)
	db := newDB(t)
	cases := []struct {
		name  string
		query string
		args  []any
		index string
	}{
		{"admission counts", admitCountsQuery, []any{"agt"}, "runs_agent_seq"},
		{"runs of an agent", agentRunsQuery, []any{"agt", 10}, "runs_agent_seq"},
		{"runs in statuses", runsInQuery(2), []any{"running", "paused"}, "runs_status_seq"},
		{"violations", violationsQuery, []any{"agt", 0}, "runs_agent_violations"},
		// The three sums, from the partial index alone; the owner's
		// through their agents, not through every pending set.
		{"pending disk", pendingDiskQuery, []any{"agt", "usr"}, "change_sets_pending_disk"},
		{"owner's pending disk", pendingDiskQuery, []any{"agt", "usr"}, "agents_owner_id"},
		{"owner's largest pending", largestPendingQuery, []any{"usr", 5}, "agents_owner_id"},
	}
	for _, c := range cases {
		plan := queryPlan(t, db, c.query, c.args...)
		if !strings.Contains(plan, "INDEX "+c.index) {
			t.Errorf("%s: plan %q does not use %s", c.name, plan, c.index)
		}
		// change_sets_pending leads to every pending set's row.
		if strings.Contains(plan, "INDEX change_sets_pending ") {
			t.Errorf("%s: plan %q reads every pending change set", c.name, plan)
		}
	}
}

// queryPlan is SQLite's plan of query, its steps joined by "; ".
func queryPlan(t *testing.T, db *DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.r.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatalf("plan of %s: %v", query, err)
	}
	details, err := collect(rows, func(s scanner) (string, error) {
		var id, parent, notused int
		var detail string
		return detail, s.Scan(&id, &parent, &notused, &detail)
	})
	if err != nil {
		t.Fatalf("plan of %s: %v", query, err)
	}
	return strings.Join(details, "; ")
}

func TestPageSize(t *testing.T) {
	for _, c := range []struct{ limit, want int }{
		{-1, defaultRuns}, {0, defaultRuns}, {1, 1}, {maxRuns, maxRuns}, {maxRuns + 1, maxRuns},
	} {
		if got := pageSize(c.limit); got != c.want {
			t.Errorf("pageSize(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
}

// TestRunToken: a run's gateway token is found only while the run is
// running, and goes when the run leaves running (paused or ended), so a
// CLI left behind can never call again with it.
func TestRunToken(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	r := mustAdmit(t, db, a, owner, 0)
	hash := sha256.Sum256([]byte("token"))
	other := sha256.Sum256([]byte("other"))
	if err := db.SetRunToken(ctx, r.ID, hash[:]); corral.ErrorCode(err) != corral.ECONFLICT {
		t.Fatalf("SetRunToken on an admitted run = %v, want ECONFLICT", err)
	}
	r.Status, r.StartedAt = corral.RunRunning, t0
	if err := db.UpdateRun(ctx, r, corral.RunAdmitted); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRunToken(ctx, r.ID, hash[:16]); corral.ErrorCode(err) != corral.EINVALID {
		t.Fatalf("SetRunToken with a short hash = %v, want EINVALID", err)
	}
	if err := db.SetRunToken(ctx, r.ID, hash[:]); err != nil {
		t.Fatal(err)
	}
	lookups := []struct {
		name string
		hash []byte
		want string // the run's id, or "" for ENOTFOUND
	}{
		{"its token", hash[:], r.ID},
		{"another token", other[:], ""},
		{"no token", nil, ""},
	}
	for _, l := range lookups {
		got, err := db.RunByToken(ctx, l.hash)
		if l.want == "" && corral.ErrorCode(err) != corral.ENOTFOUND || l.want != "" && (err != nil || got.ID != l.want) {
			t.Errorf("%s: RunByToken = %s, %v; want %q", l.name, got.ID, err, l.want)
		}
	}
	// Still running (a checkpoint's update keeps the status): kept.
	if err := db.UpdateRun(ctx, r, corral.RunRunning); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RunByToken(ctx, hash[:]); err != nil {
		t.Fatalf("after an update that stays running: %v", err)
	}
	r.Status = corral.RunPaused
	if err := db.UpdateRun(ctx, r, corral.RunRunning); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RunByToken(ctx, hash[:]); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("after the run paused, RunByToken = %v, want ENOTFOUND", err)
	}
	// Running again, the old token does not come back with it.
	r.Status = corral.RunRunning
	if err := db.UpdateRun(ctx, r, corral.RunPaused); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RunByToken(ctx, hash[:]); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("after a resume, the old token = %v, want ENOTFOUND", err)
	}
}
