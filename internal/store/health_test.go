package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"corral"
)

// TestCounts: the runs counted active are those corral.RunActive names,
// the change sets those pending; both counts come from an index.
func TestCounts(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping on an empty store: %v", err)
	}
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	active := 0
	for i, s := range corral.AllRunStatuses {
		r := mustAdmit(t, db, a, owner, time.Duration(i)*time.Second)
		if s != corral.RunAdmitted {
			r.Status = s
			if !corral.RunActive(s) {
				r.EndedAt = t0.Add(time.Hour)
			}
			if err := db.UpdateRun(ctx, r, corral.RunAdmitted); err != nil {
				t.Fatalf("run to %s: %v", s, err)
			}
		}
		if corral.RunActive(s) {
			active++
		}
	}
	pending := 0
	for _, s := range corral.AllChangeStatuses {
		cs := corral.ChangeSet{ID: corral.NewID("chg"), AgentID: a.ID, RunID: "run_1", Status: s, Mode: corral.ChangesAuto,
			CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		if err := db.CreateChangeSet(ctx, cs); err != nil {
			t.Fatalf("change set %s: %v", s, err)
		}
		if s == corral.ChangePending {
			pending++
		}
	}
	runs, sets, err := db.Counts(ctx)
	if err != nil || runs != active || sets != pending {
		t.Fatalf("Counts() = %d, %d, %v; want %d active runs, %d pending change sets", runs, sets, err, active, pending)
	}
	if onPostgres() {
		return // the plan is SQLite's
	}
	plan := queryPlan(t, db, countsQuery)
	for _, index := range []string{"runs_status_seq", "change_sets_pending"} {
		if !strings.Contains(plan, "INDEX "+index) {
			t.Errorf("plan %q does not use %s", plan, index)
		}
	}
}
