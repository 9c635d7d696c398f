package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"corral"
)

// addUsage meters tokens on a run as a call does: reserved, then settled.
func addUsage(t *testing.T, db *DB, runID string, tk corral.Tokens) corral.Budget {
	t.Helper()
	ctx := context.Background()
	run, err := db.Run(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Reserve(ctx, corral.Hold{AgentID: run.AgentID, RunID: runID, Tokens: max(1, tk.Input+tk.Output)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.Settle(ctx, res.ID, tk, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReserveAndSettle(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	b := mustAgent(t, db, owner, "b", 0)
	a.Budget.Tokens = 100
	a.UpdatedAt = t0.Add(time.Hour)
	if err := db.UpdateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	r1 := mustAdmit(t, db, a, owner, 0)
	r2 := mustAdmit(t, db, a, owner, time.Second)

	held := map[string]string{} // step name -> reservation id
	steps := []struct {
		name    string
		reserve int64  // > 0: reserve this much on run (or the agent, run "")
		settle  string // else: settle the reservation of this step
		run     string
		tokens  corral.Tokens
		code    string
		want    corral.Budget
	}{
		{name: "a call's ceiling", reserve: 40, run: r1.ID, want: corral.Budget{Tokens: 100, Reserved: 40}},
		{name: "another at once", reserve: 50, run: r2.ID, want: corral.Budget{Tokens: 100, Reserved: 90}},
		{name: "a third does not fit", reserve: 11, run: r1.ID, code: corral.EADMISSION},
		{name: "one that fits exactly", reserve: 10, run: "", want: corral.Budget{Tokens: 100, Reserved: 100}},
		{name: "settled below its ceiling", settle: "a call's ceiling", tokens: corral.Tokens{Input: 10, Output: 5}, want: corral.Budget{Tokens: 100, Used: 15, Reserved: 60}},
		{name: "settled twice", settle: "a call's ceiling", code: corral.ENOTFOUND},
		{name: "more than reserved", settle: "another at once", tokens: corral.Tokens{Input: 30, Output: 21}, code: corral.EINVALID},
		{name: "negative", settle: "another at once", tokens: corral.Tokens{Input: -1}, code: corral.EINVALID},
		{name: "settled at its ceiling", settle: "another at once", tokens: corral.Tokens{Input: 30, Output: 20}, want: corral.Budget{Tokens: 100, Used: 65, Reserved: 10}},
		{name: "released (the call failed)", settle: "one that fits exactly", want: corral.Budget{Tokens: 100, Used: 65}},
		{name: "what is freed can be held", reserve: 35, run: r1.ID, want: corral.Budget{Tokens: 100, Used: 65, Reserved: 35}},
		{name: "no token", reserve: -1, run: r1.ID, code: corral.EINVALID},
	}
	for _, s := range steps {
		var got corral.Budget
		var err error
		if s.settle != "" {
			got, err = db.Settle(ctx, held[s.settle], s.tokens, time.Time{})
		} else {
			var res corral.Reservation
			res, err = db.Reserve(ctx, corral.Hold{AgentID: a.ID, RunID: s.run, Tokens: s.reserve})
			held[s.name], got = res.ID, res.Budget
		}
		if s.code != "" {
			if corral.ErrorCode(err) != s.code {
				t.Fatalf("%s: error %v, want %s", s.name, err, s.code)
			}
			continue
		}
		if err != nil || got != s.want {
			t.Fatalf("%s: budget %+v, %v; want %+v", s.name, got, err, s.want)
		}
	}
	for _, c := range []struct {
		run  string
		want corral.Tokens
	}{{r1.ID, corral.Tokens{Input: 10, Output: 5}}, {r2.ID, corral.Tokens{Input: 30, Output: 20}}} {
		if got, err := db.Run(ctx, c.run); err != nil || got.Tokens != c.want {
			t.Errorf("Run(%s).Tokens = %+v, %v; want %+v", c.run, got.Tokens, err, c.want)
		}
	}
	got, err := db.Agent(ctx, a.ID, owner.ID)
	if err != nil || got.Budget != (corral.Budget{Tokens: 100, Used: 65, Reserved: 35}) || !got.UpdatedAt.Equal(a.UpdatedAt) {
		t.Errorf("agent = %+v at %v, %v; metering is not an edit of the settings", got.Budget, got.UpdatedAt, err)
	}

	// An unlimited budget holds anything; a missing agent is not found.
	if res, err := db.Reserve(ctx, corral.Hold{AgentID: b.ID, Tokens: 1 << 40}); err != nil || res.Budget.Reserved != 1<<40 {
		t.Errorf("unlimited: %+v, %v", res, err)
	}
	if _, err := db.Reserve(ctx, corral.Hold{AgentID: "agt_nope", Tokens: 1}); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Errorf("a missing agent: %v", err)
	}

	// What a stopped server left is settled at its ceiling.
	n, err := db.SettleLeftover(ctx)
	if err != nil || n != 2 {
		t.Fatalf("SettleLeftover = %d, %v; want 2", n, err)
	}
	if got, _ := db.Agent(ctx, a.ID, owner.ID); got.Budget != (corral.Budget{Tokens: 100, Used: 100}) {
		t.Errorf("after SettleLeftover: %+v, want the 35 held counted as used", got.Budget)
	}
	if got, _ := db.Run(ctx, r1.ID); got.Tokens != (corral.Tokens{Input: 45, Output: 5}) {
		t.Errorf("the run's tokens after SettleLeftover: %+v", got.Tokens)
	}
}

// TestReserveConcurrently: 100 calls at once, through two handles on one
// file (two servers), on a budget that holds 10 of them: 10 go out, the
// rest are refused, and what is spent never passes the budget.
// TestReserveConcurrently: 100 calls at once through two handles on one
// store (two servers: two processes on one SQLite file, or two controls
// on one PostgreSQL database) never hold more than the budget.
func TestReserveConcurrently(t *testing.T) {
	ctx := context.Background()
	dbs := newDBs(t, 2)
	owner := mustUser(t, dbs[0], "owner")
	a := mustAgent(t, dbs[0], owner, "a", 0)
	a.Budget.Tokens = 1000
	if err := dbs[0].UpdateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	run := mustAdmit(t, dbs[0], a, owner, 0)
	var wg sync.WaitGroup
	var went, refused atomic.Int64
	start := make(chan struct{})
	for i := range 100 {
		wg.Go(func() {
			db := dbs[i%2]
			<-start
			res, err := db.Reserve(ctx, corral.Hold{AgentID: a.ID, RunID: run.ID, Tokens: 100})
			if corral.ErrorCode(err) == corral.EADMISSION {
				refused.Add(1)
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			went.Add(1)
			if _, err := db.Settle(ctx, res.ID, corral.Tokens{Input: 60, Output: 40}, time.Time{}); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	got, err := dbs[1].Agent(ctx, a.ID, owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Budget.Used > got.Budget.Tokens || got.Budget.Reserved != 0 {
		t.Fatalf("budget %+v after %d calls went out: spent past it", got.Budget, went.Load())
	}
	if went.Load() != 10 || refused.Load() != 90 || got.Budget.Used != 1000 {
		t.Fatalf("%d went, %d refused, %d used; want 10, 90, 1000", went.Load(), refused.Load(), got.Budget.Used)
	}
}

// TestCreateAgentFrom: a created agent's budget is carved out of its
// parent's remainder, never added beside it.
func TestCreateAgentFrom(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	parent := mustAgent(t, db, owner, "parent", 0)
	parent.Budget.Tokens = 5000
	if err := db.UpdateAgent(ctx, parent); err != nil {
		t.Fatal(err)
	}
	run := mustAdmit(t, db, parent, owner, 0)
	addUsage(t, db, run.ID, corral.Tokens{Input: 40})
	if _, err := db.Reserve(ctx, corral.Hold{AgentID: parent.ID, RunID: run.ID, Tokens: 60}); err != nil {
		t.Fatal(err)
	}
	child := func(name string, tokens int64) corral.Agent {
		a := mustAgentValue(owner, name)
		a.Budget.Tokens = tokens
		return a
	}
	for _, c := range []struct {
		name   string
		tokens int64
		code   string
		used   int64 // the parent's after
	}{
		{"first", 4000, "", 4040},
		{"more than is left", 901, corral.EADMISSION, 4040},
		{"exactly what is left", 900, "", 4940},
		{"nothing left", 1, corral.EADMISSION, 4940},
		{"no budget", 0, corral.EINVALID, 4940},
	} {
		err := db.CreateAgentFrom(ctx, child(c.name, c.tokens), parent.ID)
		if corral.ErrorCode(err) != c.code {
			t.Fatalf("%s: %v, want %q", c.name, err, c.code)
		}
		got, _ := db.Agent(ctx, parent.ID, owner.ID)
		if got.Budget.Used != c.used {
			t.Fatalf("%s: the parent's used = %d, want %d", c.name, got.Budget.Used, c.used)
		}
	}
	// An unlimited parent gives without carving.
	free := mustAgent(t, db, owner, "free", 0)
	if err := db.CreateAgentFrom(ctx, child("of free", 7), free.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Agent(ctx, free.ID, owner.ID); got.Budget.Used != 0 {
		t.Fatalf("an unlimited parent's used = %d", got.Budget.Used)
	}
}

// TestReserveLeavesTheWriterFull: a reservation commits without waiting
// for the disk, and the writer goes back to synchronous FULL after it,
// for everything else.
func TestReserveLeavesTheWriterFull(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	for range 3 {
		if _, err := db.Reserve(ctx, corral.Hold{AgentID: a.ID, Tokens: 10}); err != nil {
			t.Fatal(err)
		}
		var mode int
		if err := db.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&mode); err != nil || mode != 2 {
			t.Fatalf("synchronous = %d, %v after a reservation; want 2 (FULL)", mode, err)
		}
	}
}
