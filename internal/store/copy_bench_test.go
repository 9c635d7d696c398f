package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"corral"
	"corral/internal/trace"
)

// BenchmarkCopy measures `corral store copy`: a SQLite store of 20 runs
// of 500 trace events each (and their audit entries) copied into an empty
// PostgreSQL database, against, in the same run, the same events read the
// same way and written into a table of their shape without triggers by
// INSERTs of 1000 rows each (the floor: moving the bytes, no round trip
// per row, no chain to check). Reported: events per second of each and
// the ratio of the two times.
//
//	go test -run '^$' -bench BenchmarkCopy -benchtime 3x ./internal/store/
func BenchmarkCopy(b *testing.B) {
	ctx := context.Background()
	src := openAt(b, filepath.Join(b.TempDir(), "corral.db"))
	owner := mustUser(b, src, "owner")
	a := corral.Agent{ID: corral.NewID("agt"), Name: "a", Owner: corral.UserRef{ID: owner.ID},
		Policy: corral.Policy{FS: corral.DefaultFS, Changes: corral.DefaultChanges, Network: corral.NetworkNone}, State: corral.StateActive, CreatedAt: t0}
	if err := src.CreateAgent(ctx, a); err != nil {
		b.Fatal(err)
	}
	const runs, perRun = 20, 500
	rec := trace.NewRecorder(src, func() time.Time { return t0 })
	for r := range runs {
		for i := range perRun {
			if _, err := rec.Append(ctx, fmt.Sprintf("run_%02d", r), trace.ToolCall, map[string]any{"i": i, "argv": []string{"sh", "-c", "echo something of a typical length"}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	events := float64(runs * perRun)
	var copyTime, floorTime time.Duration
	b.ResetTimer()
	for range b.N {
		dst := openPG(b, newPGDatabase(b))
		start := time.Now()
		if err := Copy(ctx, src, dst, nil); err != nil {
			b.Fatal(err)
		}
		copyTime += time.Since(start)

		// The floor: the same rows, read the same way, written in one
		// statement per 1000 to a table without triggers.
		start = time.Now()
		if _, err := dst.w.ExecContext(ctx, `CREATE TABLE floor (run_id TEXT, seq BIGINT, at TEXT, type TEXT, data TEXT, prev_hash TEXT, hash TEXT)`); err != nil {
			b.Fatal(err)
		}
		rows, err := src.r.QueryContext(ctx, `SELECT run_id, seq, at, type, data, prev_hash, hash FROM trace_events`)
		if err != nil {
			b.Fatal(err)
		}
		var batch []any
		flush := func() {
			if len(batch) == 0 {
				return
			}
			q := `INSERT INTO floor VALUES `
			for i := 0; i < len(batch)/7; i++ {
				if i > 0 {
					q += ", "
				}
				q += fmt.Sprintf("($%d, $%d, $%d, $%d, $%d, $%d, $%d)", 7*i+1, 7*i+2, 7*i+3, 7*i+4, 7*i+5, 7*i+6, 7*i+7)
			}
			if _, err := dst.w.ExecContext(ctx, q, batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
		for rows.Next() {
			var run, at, typ, data, prev, hash string
			var seq int64
			if err := rows.Scan(&run, &seq, &at, &typ, &data, &prev, &hash); err != nil {
				b.Fatal(err)
			}
			batch = append(batch, run, seq, at, typ, data, prev, hash)
			if len(batch) == 7*1000 {
				flush()
			}
		}
		rows.Close()
		flush()
		floorTime += time.Since(start)
	}
	b.ReportMetric(events*float64(b.N)/copyTime.Seconds(), "copy-events/s")
	b.ReportMetric(events*float64(b.N)/floorTime.Seconds(), "floor-events/s")
	b.ReportMetric(copyTime.Seconds()/floorTime.Seconds(), "copy/floor")
}
