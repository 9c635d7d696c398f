package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/trace"
)

// BenchmarkAuditWrites measures what the audit log and the usage table add
// to the writes they ride on, each against a baseline in the same run,
// interleaved:
//
//	go test -run '^$' -bench BenchmarkAuditWrites -benchtime 500x -count 3 ./internal/store/
//
// trace-ratio: a trace event appended with the audit trigger ÷ on a twin
// database whose trigger was dropped. settle-ratio: a call reserved and
// settled with tokens (which writes its usage row) ÷ one settled with none
// (which writes none; the same statements otherwise). Every commit is
// fsynced, as in production.
func BenchmarkAuditWrites(b *testing.B) {
	ctx := context.Background()
	open := func() *DB {
		db, err := Open(ctx, b.TempDir()+"/corral.db")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return db
	}
	with, without := open(), open()
	if _, err := without.w.ExecContext(ctx, `DROP TRIGGER trace_events_audit`); err != nil {
		b.Fatal(err)
	}
	recWith, recWithout := trace.NewRecorder(with, nil), trace.NewRecorder(without, nil)
	data := map[string]string{"tool": "shell", "output": strings.Repeat("x", 512)}

	owner, err := with.CreateUser(ctx, corral.NewUser{Email: "bench@example.com", Name: "Bench", PasswordHash: "x"})
	if err != nil {
		b.Fatal(err)
	}
	agent := corral.Agent{ID: corral.NewID("agt"), Name: "bench", Owner: corral.UserRef{ID: owner.ID},
		Policy: corral.Policy{FS: corral.DefaultFS, Changes: corral.DefaultChanges, Network: corral.NetworkNone}, State: corral.StateActive}
	if err := with.CreateAgent(ctx, agent); err != nil {
		b.Fatal(err)
	}
	settle := func(t corral.Tokens) time.Duration {
		start := time.Now()
		res, err := with.Reserve(ctx, corral.Hold{AgentID: agent.ID, Model: "m", Tokens: 1000})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := with.Settle(ctx, res.ID, t, time.Time{}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	appendOn := func(rec *trace.Recorder, i int) time.Duration {
		start := time.Now()
		if _, err := rec.Append(ctx, fmt.Sprintf("run_%d", i%4), trace.ToolResult, data); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}

	// Each iteration is a pair, taken in alternating order; the median of
	// the pairs' ratios stands up to the bursts a shared disk and CPU
	// give one side or the other.
	var traceRatios, settleRatios []float64
	var traceWith, settleWith time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var tw, two, sw, swo time.Duration
		if i%2 == 0 {
			tw, two = appendOn(recWith, i), appendOn(recWithout, i)
			sw, swo = settle(corral.Tokens{Input: 100, Output: 10}), settle(corral.Tokens{})
		} else {
			two, tw = appendOn(recWithout, i), appendOn(recWith, i)
			swo, sw = settle(corral.Tokens{}), settle(corral.Tokens{Input: 100, Output: 10})
		}
		traceRatios, settleRatios = append(traceRatios, float64(tw)/float64(two)), append(settleRatios, float64(sw)/float64(swo))
		traceWith, settleWith = traceWith+tw, settleWith+sw
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(median(traceRatios), "trace-ratio")
	b.ReportMetric(median(settleRatios), "settle-ratio")
	b.ReportMetric(float64(traceWith)/1e3/n, "trace-us/event")
	b.ReportMetric(float64(settleWith)/1e3/n, "settle-us/call")
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// BenchmarkUsageQuery sums a month of usage (100,000 calls in 20,000 runs
// of 50 agents, 10 people, 4 models) per agent and per agent and day, with distinct
// runs, against the least any per-agent sum must do (one GROUP BY of the
// same rows, tokens and calls only), in the same run:
//
//	go test -run '^$' -bench BenchmarkUsageQuery -benchtime 20x -count 3 ./internal/store/
//
// Read ms/query (the whole answer of GET /api/usage?group_by=agent) and
// sum-ratio (that ÷ the bare sum: what the days and the distinct runs
// cost).
func BenchmarkUsageQuery(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, b.TempDir()+"/corral.db")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const calls = 100_000
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tx, err := db.begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for i := range calls {
		// Runs of five calls one after the other, each of one agent, made
		// for one person, with the agent's model.
		at, run := start.Add(time.Duration(i)*30*24*time.Hour/calls), i/5
		agent := run % 50
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage (at, agent_id, owner_id, user_id, run_id, model, input, output)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, millis(at), fmt.Sprintf("agt_%d", agent), fmt.Sprintf("usr_%d", agent%10),
			fmt.Sprintf("usr_%d", run%10), fmt.Sprintf("run_%d", run), fmt.Sprintf("model-%d", agent%4), 1000+i%500, 100+i%50); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	var grouped, bare time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		got, err := db.Usage(ctx, corral.UsageQuery{GroupBy: corral.UsageByAgent})
		if err != nil || len(got) != 50 {
			b.Fatalf("Usage = %d groups, %v", len(got), err)
		}
		grouped += time.Since(t0)
		t0 = time.Now()
		rows, err := db.query(ctx, `SELECT agent_id, sum(input), sum(output), count(*) FROM usage GROUP BY agent_id`)
		if err != nil {
			b.Fatal(err)
		}
		groups := 0
		for rows.Next() {
			groups++
		}
		if rows.Close(); groups != 50 {
			b.Fatalf("the bare sum: %d groups", groups)
		}
		bare += time.Since(t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(grouped)/1e6/float64(b.N), "ms/query")
	b.ReportMetric(float64(grouped)/float64(bare), "sum-ratio")
}
