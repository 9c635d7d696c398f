package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"corral"
)

// call meters one model call as the gateway does: reserved, then settled
// at at with what the provider reported.
func call(t *testing.T, db *DB, h corral.Hold, spent corral.Tokens, at time.Time) {
	t.Helper()
	ctx := context.Background()
	if h.Tokens == 0 {
		h.Tokens = 1000
	}
	res, err := db.Reserve(ctx, h)
	if err != nil {
		t.Fatalf("Reserve(%+v): %v", h, err)
	}
	if _, err := db.Settle(ctx, res.ID, spent, at); err != nil {
		t.Fatalf("Settle: %v", err)
	}
}

func usageOf(t *testing.T, db *DB, q corral.UsageQuery) []corral.UsageTotal {
	t.Helper()
	got, err := db.Usage(context.Background(), q)
	if err != nil {
		t.Fatalf("Usage(%+v): %v", q, err)
	}
	return got
}

// count is what a group or day is expected to hold.
func countOf(in, out, calls, runs int64) corral.UsageCount {
	return corral.UsageCount{Tokens: corral.Tokens{Input: in, Output: out}, Calls: calls, Runs: runs}
}

func day(d int) time.Time { return time.Date(2025, 3, d, 0, 0, 0, 0, time.UTC) }

// TestUsageSumsSettlements: every settled call is kept with its agent, its
// run's trigger (or the hold's person outside a run), its model and its
// UTC day, and summed each way; calls that spent nothing are not calls;
// an owner sees only their agents; since and until bound by settlement
// time.
func TestUsageSumsSettlements(t *testing.T) {
	db := newDB(t)
	ann, bob := mustUser(t, db, "ann"), mustUser(t, db, "bob")
	annAgent, bobAgent := mustAgent(t, db, ann, "ann's", 0), mustAgent(t, db, bob, "bob's", 0)
	mustGrant(t, db, annAgent, bob, corral.LevelRunner)
	annRun := mustAdmit(t, db, annAgent, ann, 0)
	bobOnAnn := mustAdmit(t, db, annAgent, bob, time.Second) // bob's run on ann's agent: ann's budget pays
	bobRun := mustAdmit(t, db, bobAgent, bob, 2*time.Second)

	late := time.Date(2025, 3, 14, 23, 59, 59, 999_000_000, time.UTC) // the last millisecond of the 14th
	call(t, db, corral.Hold{AgentID: annAgent.ID, RunID: annRun.ID, Model: "m1"}, corral.Tokens{Input: 10, Output: 1}, day(14))
	call(t, db, corral.Hold{AgentID: annAgent.ID, RunID: annRun.ID, Model: "m1"}, corral.Tokens{Input: 20, Output: 2}, late)
	call(t, db, corral.Hold{AgentID: annAgent.ID, RunID: annRun.ID, Model: "m2"}, corral.Tokens{Input: 30, Output: 3}, day(15))
	call(t, db, corral.Hold{AgentID: annAgent.ID, RunID: bobOnAnn.ID, Model: "m1", UserID: "usr_ignored"}, corral.Tokens{Input: 40, Output: 4}, day(15).Add(time.Hour))
	call(t, db, corral.Hold{AgentID: bobAgent.ID, RunID: bobRun.ID, Model: "m2"}, corral.Tokens{Input: 50, Output: 5}, day(16))
	// An embedding outside any run, for the person who uploaded.
	call(t, db, corral.Hold{AgentID: bobAgent.ID, UserID: ann.ID, Model: "embed"}, corral.Tokens{Input: 7}, day(16))
	// A call that got no answer spent nothing: no usage.
	call(t, db, corral.Hold{AgentID: bobAgent.ID, RunID: bobRun.ID, Model: "m2"}, corral.Tokens{}, day(16))

	tests := []struct {
		name string
		q    corral.UsageQuery
		want []corral.UsageTotal
	}{
		{"by agent", corral.UsageQuery{GroupBy: corral.UsageByAgent}, []corral.UsageTotal{
			{Key: annAgent.ID, Name: "ann's", UsageCount: countOf(100, 10, 4, 2), Days: []corral.UsageDay{
				{Day: day(14), UsageCount: countOf(30, 3, 2, 1)}, {Day: day(15), UsageCount: countOf(70, 7, 2, 2)}}},
			{Key: bobAgent.ID, Name: "bob's", UsageCount: countOf(57, 5, 2, 1), Days: []corral.UsageDay{
				{Day: day(16), UsageCount: countOf(57, 5, 2, 1)}}},
		}},
		{"by user", corral.UsageQuery{GroupBy: corral.UsageByUser}, []corral.UsageTotal{
			{Key: bob.ID, Name: "bob", UsageCount: countOf(90, 9, 2, 2), Days: []corral.UsageDay{
				{Day: day(15), UsageCount: countOf(40, 4, 1, 1)}, {Day: day(16), UsageCount: countOf(50, 5, 1, 1)}}},
			{Key: ann.ID, Name: "ann", UsageCount: countOf(67, 6, 4, 1), Days: []corral.UsageDay{
				{Day: day(14), UsageCount: countOf(30, 3, 2, 1)}, {Day: day(15), UsageCount: countOf(30, 3, 1, 1)},
				{Day: day(16), UsageCount: countOf(7, 0, 1, 0)}}},
		}},
		{"by model", corral.UsageQuery{GroupBy: corral.UsageByModel}, []corral.UsageTotal{
			{Key: "m2", UsageCount: countOf(80, 8, 2, 2), Days: []corral.UsageDay{
				{Day: day(15), UsageCount: countOf(30, 3, 1, 1)}, {Day: day(16), UsageCount: countOf(50, 5, 1, 1)}}},
			{Key: "m1", UsageCount: countOf(70, 7, 3, 2), Days: []corral.UsageDay{
				{Day: day(14), UsageCount: countOf(30, 3, 2, 1)}, {Day: day(15), UsageCount: countOf(40, 4, 1, 1)}}},
			{Key: "embed", UsageCount: countOf(7, 0, 1, 0), Days: []corral.UsageDay{
				{Day: day(16), UsageCount: countOf(7, 0, 1, 0)}}},
		}},
		// Ann owns one agent: bob's run on it is hers to see, bob's own agent is not.
		{"ann's own, by user", corral.UsageQuery{GroupBy: corral.UsageByUser, Owner: ann.ID}, []corral.UsageTotal{
			{Key: ann.ID, Name: "ann", UsageCount: countOf(60, 6, 3, 1), Days: []corral.UsageDay{
				{Day: day(14), UsageCount: countOf(30, 3, 2, 1)}, {Day: day(15), UsageCount: countOf(30, 3, 1, 1)}}},
			{Key: bob.ID, Name: "bob", UsageCount: countOf(40, 4, 1, 1), Days: []corral.UsageDay{
				{Day: day(15), UsageCount: countOf(40, 4, 1, 1)}}},
		}},
		{"since is included", corral.UsageQuery{GroupBy: corral.UsageByAgent, Since: late, Owner: ann.ID}, []corral.UsageTotal{
			{Key: annAgent.ID, Name: "ann's", UsageCount: countOf(90, 9, 3, 2), Days: []corral.UsageDay{
				{Day: day(14), UsageCount: countOf(20, 2, 1, 1)}, {Day: day(15), UsageCount: countOf(70, 7, 2, 2)}}},
		}},
		{"until is excluded", corral.UsageQuery{GroupBy: corral.UsageByAgent, Until: late, Owner: ann.ID}, []corral.UsageTotal{
			{Key: annAgent.ID, Name: "ann's", UsageCount: countOf(10, 1, 1, 1), Days: []corral.UsageDay{
				{Day: day(14), UsageCount: countOf(10, 1, 1, 1)}}},
		}},
		{"nothing in the span", corral.UsageQuery{GroupBy: corral.UsageByModel, Since: day(17)}, []corral.UsageTotal{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := usageOf(t, db, tt.q)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Usage(%+v) =\n%+v\nwant\n%+v", tt.q, got, tt.want)
			}
		})
	}
	if _, err := db.Usage(context.Background(), corral.UsageQuery{GroupBy: "day"}); corral.ErrorCode(err) != corral.EINVALID {
		t.Errorf("Usage grouped by day: %v, want invalid", err)
	}
}

// TestUsageAgreesWithBudgetAndOutlivesTheAgent: the usage rows are written
// with the settlement, so their sum is the agent's budget.used and the
// runs' tokens; a reservation a stopped server left is settled at its
// ceiling and counted so; the usage stays when the agent is deleted.
func TestUsageAgreesWithBudgetAndOutlivesTheAgent(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "spender", 0)
	run := mustAdmit(t, db, a, owner, 0)
	call(t, db, corral.Hold{AgentID: a.ID, RunID: run.ID, Model: "m"}, corral.Tokens{Input: 100, Output: 20}, t0)
	if _, err := db.Reserve(ctx, corral.Hold{AgentID: a.ID, RunID: run.ID, Model: "m", Tokens: 500}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.SettleLeftover(ctx); err != nil || n != 1 {
		t.Fatalf("SettleLeftover = %d, %v; want 1", n, err)
	}
	got, err := db.Agent(ctx, a.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Run(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []corral.UsageTotal{{Key: a.ID, Name: "spender", UsageCount: countOf(600, 20, 2, 1),
		Days: []corral.UsageDay{{Day: day(14), UsageCount: countOf(600, 20, 2, 1)}}}}
	if u := usageOf(t, db, corral.UsageQuery{GroupBy: corral.UsageByAgent}); !reflect.DeepEqual(u, want) {
		t.Errorf("usage = %+v, want %+v", u, want)
	}
	if got.Budget.Used != 620 || r.Tokens != (corral.Tokens{Input: 600, Output: 20}) {
		t.Errorf("budget.used %d, run's tokens %+v: want 620 and 600+20, as the usage says", got.Budget.Used, r.Tokens)
	}

	mustUpdateRun(t, db, run, corral.RunCompleted, "", t0)
	if err := db.DeleteAgent(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	want[0].Name = "" // gone, but its spend stays
	if u := usageOf(t, db, corral.UsageQuery{GroupBy: corral.UsageByAgent, Owner: owner.ID}); !reflect.DeepEqual(u, want) {
		t.Errorf("usage after the agent is deleted = %+v, want %+v", u, want)
	}
}

func TestAgentBudgets(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgentValue(owner, "a")
	a.Budget.Tokens = 1000
	if err := db.CreateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := mustAgent(t, db, owner, "b", 0)
	call(t, db, corral.Hold{AgentID: a.ID, Model: "m", Tokens: 100}, corral.Tokens{Input: 50}, t0)
	for range 2 {
		if _, err := db.Reserve(ctx, corral.Hold{AgentID: a.ID, Model: "m", Tokens: 200}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.AgentBudgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ref := corral.UserRef{ID: owner.ID, Name: owner.Name}
	want := []corral.AgentBudget{
		{AgentID: a.ID, AgentName: "a", Owner: ref, Budget: corral.Budget{Tokens: 1000, Used: 50, Reserved: 400}, Open: 2},
		{AgentID: b.ID, AgentName: "b", Owner: ref},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AgentBudgets =\n%+v\nwant\n%+v", got, want)
	}
}
