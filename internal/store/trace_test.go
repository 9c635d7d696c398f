package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"corral"
	"corral/internal/trace"
)

func TestTraceIsAppendOnlyAndChained(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	rec := trace.NewRecorder(db, nil)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		for _, run := range []string{"run_a", "run_b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := rec.Append(ctx, run, trace.ToolCall, map[string]int{"i": i}); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	events, runs, err := trace.VerifyAll(ctx, db)
	if err != nil || events != 40 || runs != 2 {
		t.Fatalf("VerifyAll = %d events, %d runs, %v; want 40 in 2, ok", events, runs, err)
	}

	evs, err := db.Trace(ctx, "run_a")
	if err != nil {
		t.Fatal(err)
	}
	forged := evs[len(evs)-1]
	forged.Seq, forged.PrevHash = forged.Seq+1, strings.Repeat("0", 64)
	forged.Hash = trace.HashOf(forged)
	wantCode(t, db.AppendTrace(ctx, forged), corral.ECONFLICT) // does not continue the chain
	wantCode(t, db.AppendTrace(ctx, evs[3]), corral.ECONFLICT) // a sequence number taken

	for _, stmt := range []string{
		`UPDATE trace_events SET data = '{}' WHERE run_id = 'run_a' AND seq = 3`,
		`DELETE FROM trace_events WHERE run_id = 'run_a' AND seq = 20`,
		`DELETE FROM trace_events`,
	} {
		if _, err := db.exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want refused as append-only", stmt, err)
		}
	}
	if _, _, err := trace.VerifyAll(ctx, db); err != nil {
		t.Fatalf("chain broken after refused tampering: %v", err)
	}
}

func BenchmarkTraceAppend(b *testing.B) {
	db, err := Open(context.Background(), b.TempDir()+"/corral.db")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rec := trace.NewRecorder(db, nil)
	data := map[string]string{"tool": "shell", "output": strings.Repeat("x", 512)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rec.Append(context.Background(), fmt.Sprintf("run_%d", i%4), trace.ToolResult, data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
