package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"corral"
)

// The disk limits are stored with the other limits.
func TestAgentDiskLimits(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	a.Limits.DiskBytes, a.Limits.DiskInodes, a.Limits.PendingDiskBytes = 16<<20, 500, 1<<30
	if err := db.UpdateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := db.Agent(ctx, a.ID, owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Limits != a.Limits {
		t.Errorf("Limits = %+v, want %+v", got.Limits, a.Limits)
	}
}

// Admission reads what the agent's pending change sets hold, and only
// theirs, in its transaction, and keeps it as evidence.
func TestAdmitPendingDiskBytes(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	other := mustAgent(t, db, owner, "other", time.Second)
	newSet := func(agent corral.Agent, status corral.ChangeStatus, bytes int64) corral.ChangeSet {
		t.Helper()
		cs := corral.ChangeSet{
			ID: corral.NewID("chg"), AgentID: agent.ID, Status: status, Mode: corral.ChangesReview,
			CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), DiskBytes: bytes,
		}
		if err := db.CreateChangeSet(ctx, cs); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	first := newSet(a, corral.ChangePending, 100<<20)
	newSet(a, corral.ChangePending, 250<<20)
	newSet(a, corral.ChangeApplied, 1<<30)
	newSet(a, corral.ChangeRejected, 1<<30)
	newSet(other, corral.ChangePending, 7<<30)

	if got, err := db.ChangeSet(ctx, first.ID); err != nil || got.DiskBytes != 100<<20 {
		t.Fatalf("ChangeSet = %+v, %v; want DiskBytes %d", got, err, 100<<20)
	}

	admit := func(reason string) (int64, corral.Admission) {
		t.Helper()
		var seen int64 = -1
		m, r, ev := admission(a, owner, "go", 0)
		ev.PendingDiskBytes = 99 // the store's, whatever the caller says
		got, err := db.Admit(ctx, m, r, ev, func(f corral.AdmissionFacts) string {
			seen = f.PendingDiskBytes
			return reason
		})
		if err != nil {
			t.Fatalf("Admit: %v", err)
		}
		return seen, got
	}
	seen, ev := admit(corral.ReasonDiskQuota)
	if seen != 350<<20 || ev.PendingDiskBytes != 350<<20 || ev.Reason != corral.ReasonDiskQuota {
		t.Errorf("facts.PendingDiskBytes = %d, evidence = %+v; want %d refused disk_quota", seen, ev, 350<<20)
	}
	evs, err := db.Admissions(ctx, a.ID, 0)
	if err != nil || len(evs) != 1 || evs[0] != ev {
		t.Errorf("Admissions = %+v, %v; want %+v", evs, err, ev)
	}

	// Deciding a change set gives its bytes back.
	first.Status = corral.ChangeRejected
	if err := db.UpdateChangeSet(ctx, first, corral.ChangePending); err != nil {
		t.Fatal(err)
	}
	if seen, _ := admit(""); seen != 250<<20 {
		t.Errorf("after a decision, facts.PendingDiskBytes = %d, want %d", seen, 250<<20)
	}
}

// A database made before disk limits keeps every row, its sequence
// counters, indexes and foreign keys through migration 6, and takes the
// new values afterwards.
func TestMigrateToDiskKeepsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	w, err := openPool(ctx, dsn(path, "&_txlock=immediate"), 1)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := fs.Sub(migrations, "migrations/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, w, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 5); err != nil {
		t.Fatalf("migrate to 5: %v", err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := w.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO users (id, email, name, password_hash, created_at) VALUES
		('usr_a', 'a@example.com', 'A', 'h', 1), ('usr_b', 'b@example.com', 'B', 'h', 1)`)
	exec(`INSERT INTO agents (id, owner_id, name, fs, changes, network, state, created_at, updated_at, memory_bytes)
		VALUES ('agt_1', 'usr_a', 'one', 'read-write', 'review', 'none', 'active', 1, 1, 4096)`)
	exec(`INSERT INTO runs (id, agent_id, status, triggered_by, message_id, stage_id, tokens_input, violation, reason, created_at, started_at, ended_at, checkpoint) VALUES
		('run_1', 'agt_1', 'errored', 'usr_b', 'msg_1', 'chg_1', 5, 'memory', 'limit', 10, 11, 12, x'00ff'),
		('run_2', 'agt_1', 'completed', NULL, 'msg_2', 'chg_2', 0, '', '', 20, 21, 22, NULL),
		('run_3', 'agt_1', 'paused', 'usr_a', 'msg_3', 'chg_3', 0, '', '', 30, 31, NULL, NULL),
		('run_4', 'agt_1', 'completed', 'usr_a', 'msg_4', 'chg_4', 0, '', '', 40, 41, 42, NULL)`)
	exec(`DELETE FROM runs WHERE id = 'run_4'`) // the counter stays at 4
	exec(`INSERT INTO admissions (id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
		tokens_used, tokens_budget, agent_state, at) VALUES
		('adm_1', 'agt_1', 'usr_b', 'run_1', '', 3, 0, 0, 0, 0, 'active', 10),
		('adm_2', 'agt_1', 'usr_b', '', 'busy', 3, 1, 1, 5, 0, 'active', 11)`)
	exec(`INSERT INTO change_sets (id, agent_id, run_id, status, mode, stage_dir, created_at, expires_at)
		VALUES ('chg_1', 'agt_1', 'run_1', 'pending', 'review', '/s', 1, 2)`)
	const runCols = `seq, id, agent_id, status, triggered_by, parent_run_id, message_id, stage_id, change_set_id,
		tokens_input, tokens_output, violation, reason, created_at, started_at, ended_at, checkpoint`
	const admissionCols = `seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
		tokens_used, tokens_budget, agent_state, at`
	beforeRuns := dumpRows(t, w, `SELECT `+runCols+` FROM runs ORDER BY seq`)
	beforeAdmissions := dumpRows(t, w, `SELECT `+admissionCols+` FROM admissions ORDER BY seq`)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	db := openAt(t, path) // migrates to the newest
	if got := dumpRows(t, db.r, `SELECT `+runCols+` FROM runs ORDER BY seq`); !slices.Equal(got, beforeRuns) {
		t.Errorf("runs after migration:\n%q\nwant\n%q", got, beforeRuns)
	}
	if got := dumpRows(t, db.r, `SELECT `+admissionCols+` FROM admissions ORDER BY seq`); !slices.Equal(got, beforeAdmissions) {
		t.Errorf("admissions after migration:\n%q\nwant\n%q", got, beforeAdmissions)
	}
	wantIndexes := []string{"admissions_agent_seq", "admissions_user_id",
		"runs_agent_seq", "runs_agent_violations", "runs_parent_call", "runs_root", "runs_status_seq", "runs_token_hash", "runs_triggered_by"}
	if got := dumpRows(t, db.r, `SELECT name FROM sqlite_master WHERE type = 'index'
		AND tbl_name IN ('runs', 'admissions') AND sql IS NOT NULL ORDER BY name`); !slices.Equal(got, wantIndexes) {
		t.Errorf("indexes after migration = %q, want %q", got, wantIndexes)
	}
	if got := dumpRows(t, db.r, `SELECT name FROM sqlite_master WHERE name LIKE '%_v6' OR name LIKE '%_v14' OR name LIKE '%_v21'`); len(got) != 0 {
		t.Errorf("left over from the rebuild: %q", got)
	}
	for _, check := range []string{`PRAGMA integrity_check`, `PRAGMA foreign_key_check`} {
		if got := dumpRows(t, db.r, check); !slices.Equal(got, []string{"ok"}) && len(got) != 0 {
			t.Errorf("%s = %q", check, got)
		}
	}
	a, err := db.Agent(ctx, "agt_1", "usr_a")
	if err != nil || a.Limits != (corral.Limits{MemoryBytes: 4096}) {
		t.Errorf("agent after migration = %+v, %v; want its limits, the disk ones 0", a.Limits, err)
	}
	if cs, err := db.ChangeSet(ctx, "chg_1"); err != nil || cs.DiskBytes != 0 || cs.Status != corral.ChangePending {
		t.Errorf("change set after migration = %+v, %v", cs, err)
	}

	// The new values are accepted; the counter goes on past the run that
	// was deleted.
	run, err := db.Run(ctx, "run_3")
	if err != nil {
		t.Fatal(err)
	}
	run.Status, run.Violation, run.EndedAt = corral.RunErrored, corral.ViolationDisk, t0
	if err := db.UpdateRun(ctx, run, corral.RunPaused); err != nil {
		t.Fatalf("UpdateRun with violation disk: %v", err)
	}
	m, r, ev := admission(a, corral.User{ID: "usr_a"}, "hi", 0)
	if got, err := db.Admit(ctx, m, r, ev, func(corral.AdmissionFacts) string { return corral.ReasonDiskQuota }); err != nil || got.Reason != corral.ReasonDiskQuota {
		t.Fatalf("Admit refusing disk_quota = %+v, %v", got, err)
	}
	m, r, ev = admission(a, corral.User{ID: "usr_a"}, "hi", 0)
	if _, err := db.Admit(ctx, m, r, ev, admitAll); err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := db.queryRow(ctx, `SELECT seq FROM runs WHERE id = ?`, r.ID).Scan(&seq); err != nil || seq != 5 {
		t.Errorf("new run's seq = %d, %v; want 5 (4 was taken before the migration)", seq, err)
	}

	// Foreign keys hold on the rebuilt tables.
	if err := db.DeleteAgent(ctx, "agt_1"); err == nil {
		t.Fatalf("deleted an agent with an active run")
	}
	if _, err := db.exec(ctx, `UPDATE runs SET status = 'completed'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.exec(ctx, `INSERT INTO runs (id, agent_id, status, created_at) VALUES ('run_x', 'agt_none', 'completed', 1)`); !isForeignKey(err) {
		t.Errorf("a run of no agent: %v, want a foreign key error", err)
	}
	if err := db.DeleteAgent(ctx, "agt_1"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"runs", "admissions"} {
		if n := count(t, db, table, "1"); n != 0 {
			t.Errorf("%d %s outlived their agent", n, table)
		}
	}
}

// dumpRows renders every row of a query as one string.
func dumpRows(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = fmt.Sprintf("%x", b)
			}
			parts[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Migration 6 can be undone: what the old constraints cannot hold (a disk
// violation, a disk_quota refusal) is dropped, everything else kept.
func TestMigrateDiskDown(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	w, err := openPool(ctx, dsn(path, "&_txlock=immediate"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fsys, err := fs.Sub(migrations, "migrations/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, w, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO users (id, email, name, password_hash, created_at) VALUES ('usr_a', 'a@example.com', 'A', 'h', 1)`,
		`INSERT INTO agents (id, owner_id, name, fs, changes, network, state, created_at, updated_at, disk_bytes)
			VALUES ('agt_1', 'usr_a', 'one', 'read-write', 'review', 'none', 'active', 1, 1, 4096)`,
		`INSERT INTO runs (id, agent_id, status, violation, created_at) VALUES
			('run_1', 'agt_1', 'errored', 'disk', 1), ('run_2', 'agt_1', 'errored', 'memory', 2)`,
		`INSERT INTO admissions (id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
			tokens_used, tokens_budget, agent_state, at, pending_disk_bytes) VALUES
			('adm_1', 'agt_1', 'usr_a', 'run_1', '', 3, 0, 0, 0, 0, 'active', 1, 0),
			('adm_2', 'agt_1', 'usr_a', '', 'disk_quota', 3, 2, 0, 0, 0, 'active', 2, 9999)`,
	} {
		if _, err := w.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatalf("down to 5: %v", err)
	}
	if got := dumpRows(t, w, `SELECT id, violation FROM runs ORDER BY seq`); !slices.Equal(got, []string{"run_1|", "run_2|memory"}) {
		t.Errorf("runs after down = %q", got)
	}
	if got := dumpRows(t, w, `SELECT id FROM admissions ORDER BY seq`); !slices.Equal(got, []string{"adm_1"}) {
		t.Errorf("admissions after down = %q", got)
	}
	if _, err := w.ExecContext(ctx, `UPDATE runs SET violation = 'disk'`); err == nil {
		t.Errorf("the old constraint took a disk violation")
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
