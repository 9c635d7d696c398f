package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/store"
	"corral/internal/trace"
)

// traceData makes a data directory holding two runs' traces of four events
// each.
func traceData(t *testing.T) string {
	t.Helper()
	data := t.TempDir()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(data, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := trace.NewRecorder(db, nil)
	for _, run := range []string{"run_1", "run_2"} {
		for _, typ := range []string{trace.Admitted, trace.Started, trace.ToolCall, trace.Ended} {
			if _, err := rec.Append(ctx, run, typ, map[string]string{"what": typ}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return data
}

func verifyTraces(t *testing.T, data string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"trace", "verify", "--data", data}, strings.NewReader(""), &out, &errOut, noenv)
	return code, out.String() + errOut.String()
}

func TestTraceVerify(t *testing.T) {
	if code, out := verifyTraces(t, traceData(t)); code != 0 || out != "ok: 8 events in 2 runs\n" {
		t.Fatalf("verify = %d %q, want 0 and ok: 8 events in 2 runs", code, out)
	}

	// Tamper as an attacker with the database file would: around the
	// store's own refusal, which is dropped first.
	tamper := []struct {
		name, sql, want string
	}{
		{"flipped byte", `UPDATE trace_events SET data = replace(data, 'tool_call', 'tool_calk') WHERE run_id = 'run_2' AND seq = 3`,
			"run run_2: event 3 does not match its hash"},
		{"deleted event", `DELETE FROM trace_events WHERE run_id = 'run_1' AND seq = 2`,
			"run run_1: event 2 has sequence number 3"},
		{"reordered events", `UPDATE trace_events SET seq = 99 WHERE run_id = 'run_2' AND seq = 2;
			UPDATE trace_events SET seq = 2 WHERE run_id = 'run_2' AND seq = 3;
			UPDATE trace_events SET seq = 3 WHERE run_id = 'run_2' AND seq = 99`,
			"run run_2: event 2 does not follow event 1"},
		{"changed time", `UPDATE trace_events SET at = '2020-01-01T00:00:00Z' WHERE run_id = 'run_1' AND seq = 1`,
			"run run_1: event 1 does not match its hash"},
	}
	for _, tt := range tamper {
		t.Run(tt.name, func(t *testing.T) {
			data := traceData(t)
			raw, err := sql.Open("sqlite", filepath.Join(data, "corral.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.Exec(`DROP TRIGGER trace_events_no_update; DROP TRIGGER trace_events_no_delete`); err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Exec(tt.sql); err != nil {
				t.Fatal(err)
			}
			code, out := verifyTraces(t, data)
			if code != 1 || !strings.Contains(out, tt.want) {
				t.Fatalf("verify = %d %q, want 1 naming %q", code, out, tt.want)
			}
		})
	}
}

// TestTraceVerifyFindsACutOffEnd cuts the newest events off a finished
// run's trace: the chain that is left is whole, but the run's end state in
// the store shows that events are missing.
func TestTraceVerifyFindsACutOffEnd(t *testing.T) {
	data := t.TempDir()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(data, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := db.CreateUser(ctx, corral.NewUser{Email: "a@example.com", Name: "A", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	a := corral.Agent{ID: "agt_1", Name: "a", Owner: corral.UserRef{ID: u.ID}, State: corral.StateActive,
		Policy: corral.Policy{FS: corral.FSReadWrite, Changes: corral.ChangesReview, Network: corral.NetworkNone}}
	if err := db.CreateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	run := corral.Run{ID: "run_1", AgentID: a.ID, MessageID: "msg_1", StageID: "chg_1", TriggeredBy: &corral.UserRef{ID: u.ID}}
	msg := corral.Message{ID: "msg_1", AgentID: a.ID, Role: corral.RoleUser, Content: "hi", RunID: run.ID, Author: &corral.UserRef{ID: u.ID}}
	if _, err := db.Admit(ctx, msg, run, corral.Admission{ID: "adm_1", AgentID: a.ID, UserID: u.ID}, func(corral.AdmissionFacts) string { return "" }); err != nil {
		t.Fatal(err)
	}
	rec := trace.NewRecorder(db, nil)
	// A terminal open when the run ended closes after its ended event.
	for _, typ := range []string{trace.Admitted, trace.Started, trace.Message, trace.Ended, trace.TerminalClosed} {
		if _, err := rec.Append(ctx, run.ID, typ, map[string]string{"what": typ}); err != nil {
			t.Fatal(err)
		}
	}
	run.Status, run.EndedAt = corral.RunCompleted, time.Now()
	if err := db.UpdateRun(ctx, run, corral.RunAdmitted); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if code, out := verifyTraces(t, data); code != 0 {
		t.Fatalf("verify = %d %q", code, out)
	}

	raw, err := sql.Open("sqlite", filepath.Join(data, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`DROP TRIGGER trace_events_no_delete; DELETE FROM trace_events WHERE run_id = 'run_1' AND seq >= 3`); err != nil {
		t.Fatal(err)
	}
	code, out := verifyTraces(t, data)
	if code != 1 || !strings.Contains(out, "run run_1: the run is completed, but its trace (2 events) does not end with its ended event") {
		t.Fatalf("verify = %d %q, want 1 naming the cut-off run", code, out)
	}
}
