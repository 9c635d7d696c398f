package store

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"corral"
	"corral/internal/trace"
)

// TestCopyToPostgres: an installation on SQLite, with accounts, grants,
// runs and their traces, messages, usage and an audit log, copied into
// PostgreSQL: the same counts, every trace verifies, the audit log in the
// same order with the same seq, the same threads; the copy serves on
// (its identities go on from the copied rows); and a second copy into it
// is refused.
func TestCopyToPostgres(t *testing.T) {
	ctx := context.Background()
	src := openAt(t, filepath.Join(t.TempDir(), "corral.db"))
	alice, bob := mustUser(t, src, "alice"), mustUser(t, src, "bob")
	a := mustAgent(t, src, alice, "a", 0)
	if err := src.PutGrant(ctx, a.ID, bob.ID, corral.LevelRunner, t0, alice.ID); err != nil {
		t.Fatal(err)
	}
	rec := trace.NewRecorder(src, func() time.Time { return t0 })
	for i := range 3 {
		r := mustAdmit(t, src, a, bob, time.Duration(i)*time.Minute)
		r = mustUpdateRun(t, src, r, corral.RunRunning, "", time.Time{})
		for j := range 4 {
			if _, err := rec.Append(ctx, r.ID, trace.ToolCall, map[string]int{"j": j}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := src.Reserve(ctx, corral.Hold{AgentID: a.ID, RunID: r.ID, Tokens: 100, Model: "m", UserID: bob.ID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Settle(ctx, res.ID, corral.Tokens{Input: 10, Output: 5}, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := rec.Append(ctx, r.ID, trace.Ended, map[string]string{"status": "completed"}); err != nil {
			t.Fatal(err)
		}
		mustUpdateRun(t, src, r, corral.RunCompleted, "", t0.Add(time.Hour))
	}
	if err := src.SetDisabled(ctx, bob.ID, true, alice.ID); err != nil {
		t.Fatal(err)
	}

	dst := openPG(t, newPGDatabase(t))
	var tables []string
	if err := Copy(ctx, src, dst, func(table string, _ int64) { tables = append(tables, table) }); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if len(tables) == 0 {
		t.Error("Copy reported no progress")
	}

	want, err := src.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dst.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the copy's census = %+v, want the source's %+v", got, want)
	}
	if events, runs, err := trace.VerifyStore(ctx, dst, dst); err != nil || events != 15 || runs != 3 {
		t.Errorf("VerifyStore on the copy = %d events, %d runs, %v; want 15 in 3, ok", events, runs, err)
	}
	srcLog, err := src.Audit(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	dstLog, err := dst.Audit(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(auditKeys(srcLog)) != fmt.Sprint(auditKeys(dstLog)) {
		t.Errorf("the copy's audit log = %v, want the source's %v", auditKeys(dstLog), auditKeys(srcLog))
	}
	srcMsgs, err := src.Messages(ctx, a.ID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	dstMsgs, err := dst.Messages(ctx, a.ID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dstMsgs, srcMsgs) {
		t.Errorf("the copy's thread = %+v, want %+v", dstMsgs, srcMsgs)
	}

	// The copy serves on: a new run's message and run come after the
	// copied ones, and the log goes on from the copied seq.
	r := mustAdmit(t, dst, a, alice, time.Hour)
	runs, err := dst.Runs(ctx, a.ID, 10)
	if err != nil || len(runs) != 4 || runs[0].ID != r.ID {
		t.Errorf("Runs after a new run on the copy = %d runs (newest %v), %v; want 4, the new one first", len(runs), runs, err)
	}
	if err := dst.SetDisabled(ctx, bob.ID, false, alice.ID); err != nil {
		t.Fatal(err)
	}
	after, err := dst.Audit(ctx, 0, 1000)
	if err != nil || len(after) != len(dstLog)+1 || after[len(after)-1].Seq <= dstLog[len(dstLog)-1].Seq {
		t.Errorf("the copy's log after one more event = %d entries, %v; want %d, the new one last", len(after), err, len(dstLog)+1)
	}

	wantCode(t, Copy(ctx, src, dst, nil), corral.ECONFLICT)
	wantCode(t, Copy(ctx, dst, src, nil), corral.EINVALID)
}

// auditKeys is each entry's seq and what it tells of, without times.
func auditKeys(log []corral.AuditEvent) []string {
	var keys []string
	for _, e := range log {
		keys = append(keys, fmt.Sprint(e.Seq, " ", auditKey(e)))
	}
	return keys
}
