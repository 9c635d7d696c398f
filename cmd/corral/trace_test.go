package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/store/sqlite"
	"corral/internal/trace"
)

func TestTraceVerify(t *testing.T) {
	data := t.TempDir()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(data, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	rec := trace.NewRecorder(db, nil)
	for _, run := range []string{"run_1", "run_2"} {
		for _, typ := range []string{trace.Admitted, trace.Started, trace.ToolCall, trace.Ended} {
			if _, err := rec.Append(ctx, run, typ, map[string]string{"what": typ}); err != nil {
				t.Fatal(err)
			}
		}
	}
	db.Close()

	verify := func() (int, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"trace", "verify", "--data", data}, strings.NewReader(""), &out, &errOut, noenv)
		return code, out.String() + errOut.String()
	}
	if code, out := verify(); code != 0 || out != "ok: 8 events in 2 runs\n" {
		t.Fatalf("verify = %d %q, want 0 and ok: 8 events in 2 runs", code, out)
	}

	// Tamper as an attacker with the database file would: around the
	// store's own refusal.
	raw, err := sql.Open("sqlite", filepath.Join(data, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tamper := []struct {
		name, sql, want string
	}{
		{"flipped byte", `UPDATE trace_events SET data = replace(data, 'tool_call', 'tool_calk') WHERE run_id = 'run_2' AND seq = 3`, "run run_2: event 3 does not match its hash"},
		{"deleted event", `DELETE FROM trace_events WHERE run_id = 'run_1' AND seq = 2`, "run run_1: event 2 has sequence number 3"},
	}
	if _, err := raw.Exec(`DROP TRIGGER trace_events_no_update; DROP TRIGGER trace_events_no_delete`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tamper {
		if _, err := raw.Exec(tt.sql); err != nil {
			t.Fatal(err)
		}
		if code, out := verify(); code != 1 || !strings.Contains(out, tt.want) {
			t.Fatalf("%s: verify = %d %q, want 1 naming %q", tt.name, code, out, tt.want)
		}
	}
}
