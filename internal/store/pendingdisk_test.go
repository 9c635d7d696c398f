package store

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"corral"
	"corral/internal/service"
)

// Admission sums, in its transaction, what pending change sets hold on
// disk: the agent's, its owner's (every agent they own) and the server's;
// decided and expired sets hold nothing. The policy (service.Admit, as the
// server runs it) refuses with the owner's bound, then the server's, and
// the evidence keeps the figures.
func TestAdmitPendingDiskBounds(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	alice, bob, carol := mustUser(t, db, "alice"), mustUser(t, db, "bob"), mustUser(t, db, "carol")
	a1 := mustAgent(t, db, alice, "a1", 0)
	a2 := mustAgent(t, db, alice, "a2", time.Second)
	a3 := mustAgent(t, db, alice, "a3", 2*time.Second)
	b1 := mustAgent(t, db, bob, "b1", 3*time.Second)
	c1 := mustAgent(t, db, carol, "c1", 4*time.Second)
	bounds := service.PendingDiskBounds{PerUser: 1000, Total: 2500}

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
	var a1Big corral.ChangeSet

	steps := []struct {
		name   string
		before func()
		agent  corral.Agent
		want   [3]int64 // the agent's, the owner's and the server's sums
		reason string
	}{
		{"nothing pending", nil, a1, [3]int64{0, 0, 0}, ""},
		{"one agent's sets", func() {
			a1Big = newSet(a1, corral.ChangePending, 300)
			newSet(a1, corral.ChangePending, 150)
		}, a1, [3]int64{450, 450, 450}, ""},
		{"summed across the owner's agents", func() {
			newSet(a2, corral.ChangePending, 350)
		}, a3, [3]int64{0, 800, 800}, ""},
		{"another owner's sets are not the owner's", func() {
			newSet(b1, corral.ChangePending, 900)
		}, a3, [3]int64{0, 800, 1700}, ""},
		{"decided and expired sets hold nothing", func() {
			for _, st := range []corral.ChangeStatus{corral.ChangeApplied, corral.ChangeRejected, corral.ChangeExpired, corral.ChangeDenied, corral.ChangeConflicted} {
				newSet(a3, st, 5000)
				newSet(b1, st, 5000)
			}
		}, a3, [3]int64{0, 800, 1700}, ""},
		{"the owner's bound refuses any agent of theirs", func() {
			newSet(a3, corral.ChangePending, 200)
		}, a2, [3]int64{350, 1000, 1900}, corral.ReasonPendingDiskUser},
		{"another owner is still admitted", nil, b1, [3]int64{900, 900, 1900}, ""},
		{"the server's bound refuses everyone", func() {
			newSet(c1, corral.ChangePending, 700)
		}, b1, [3]int64{900, 900, 2600}, corral.ReasonPendingDiskServer},
		{"even an owner who holds little", nil, c1, [3]int64{700, 700, 2600}, corral.ReasonPendingDiskServer},
		{"deciding a set frees its bytes", func() {
			a1Big.Status = corral.ChangeRejected
			if err := db.UpdateChangeSet(ctx, a1Big, corral.ChangePending); err != nil {
				t.Fatal(err)
			}
		}, a2, [3]int64{350, 700, 2300}, ""},
	}
	for i, s := range steps {
		if s.before != nil {
			s.before()
		}
		owner := corral.User{ID: s.agent.Owner.ID, Name: s.agent.Owner.Name}
		m, r, ev := admission(s.agent, owner, "go", time.Duration(i)*time.Second)
		ev.OwnerPendingDiskBytes, ev.ServerPendingDiskBytes = 99, 99 // the store's, whatever the caller says
		var seen [3]int64
		got, err := db.Admit(ctx, m, r, ev, func(f corral.AdmissionFacts) string {
			seen = [3]int64{f.PendingDiskBytes, f.OwnerPendingDiskBytes, f.ServerPendingDiskBytes}
			return service.Admit(f, 0, 1<<20, bounds)
		})
		if err != nil {
			t.Fatalf("%s: Admit: %v", s.name, err)
		}
		if seen != s.want || got.Reason != s.reason {
			t.Errorf("%s: facts %v, reason %q; want %v, %q", s.name, seen, got.Reason, s.want, s.reason)
		}
		if stored := [3]int64{got.PendingDiskBytes, got.OwnerPendingDiskBytes, got.ServerPendingDiskBytes}; stored != s.want {
			t.Errorf("%s: evidence holds %v, want %v", s.name, stored, s.want)
		}
		evs, err := db.Admissions(ctx, s.agent.ID, 1)
		if err != nil || len(evs) != 1 || evs[0] != got {
			t.Errorf("%s: Admissions = %+v, %v; want %+v", s.name, evs, err, got)
		}
		if got.RunID != "" { // the next message to this agent is not busy
			run, err := db.Run(ctx, got.RunID)
			if err != nil {
				t.Fatal(err)
			}
			mustUpdateRun(t, db, run, corral.RunCompleted, "", t0.Add(time.Minute))
		}
	}
}

// An owner's largest pending change sets, largest first, each with its
// agent's name and size: what a refusal names. Other owners' sets and
// decided ones are not among them.
func TestLargestPendingChangeSets(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	alice, bob := mustUser(t, db, "alice"), mustUser(t, db, "bob")
	a1 := mustAgent(t, db, alice, "a1", 0)
	a2 := mustAgent(t, db, alice, "a2", time.Second)
	b1 := mustAgent(t, db, bob, "b1", 2*time.Second)
	ids := map[string]string{}
	for _, s := range []struct {
		name   string
		agent  corral.Agent
		status corral.ChangeStatus
		bytes  int64
	}{
		{"a1 small", a1, corral.ChangePending, 100},
		{"a1 large", a1, corral.ChangePending, 900},
		{"a2 middle", a2, corral.ChangePending, 500},
		{"a2 decided", a2, corral.ChangeApplied, 5000},
		{"b1 other owner", b1, corral.ChangePending, 9000},
	} {
		cs := corral.ChangeSet{
			ID: corral.NewID("chg"), AgentID: s.agent.ID, Status: s.status, Mode: corral.ChangesReview,
			CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), DiskBytes: s.bytes,
		}
		if err := db.CreateChangeSet(ctx, cs); err != nil {
			t.Fatal(err)
		}
		ids[s.name] = cs.ID
	}
	for _, c := range []struct {
		owner corral.User
		limit int
		want  []string // "set agent bytes"
	}{
		{alice, 0, []string{ids["a1 large"] + " a1 900", ids["a2 middle"] + " a2 500", ids["a1 small"] + " a1 100"}},
		{alice, 2, []string{ids["a1 large"] + " a1 900", ids["a2 middle"] + " a2 500"}},
		{bob, 5, []string{ids["b1 other owner"] + " b1 9000"}},
	} {
		sets, err := db.LargestPendingChangeSets(ctx, c.owner.ID, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(sets))
		for i, cs := range sets {
			got[i] = fmt.Sprintf("%s %s %d", cs.ID, cs.AgentName, cs.DiskBytes)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("LargestPendingChangeSets(%s, %d) = %q, want %q", c.owner.Name, c.limit, got, c.want)
		}
	}
}

// Migration 21 can be undone: refusals for the new bounds go, every other
// admission stays, and the agent's pending sum keeps an index.
func TestMigratePendingDiskBoundsDown(t *testing.T) {
	ctx := context.Background()
	w, err := openPool(ctx, dsn(filepath.Join(t.TempDir(), "corral.db"), "&_txlock=immediate"), 1)
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
		`INSERT INTO agents (id, owner_id, name, fs, changes, network, state, created_at, updated_at)
			VALUES ('agt_1', 'usr_a', 'one', 'read-write', 'review', 'none', 'active', 1, 1)`,
		`INSERT INTO admissions (id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
			tokens_used, tokens_budget, agent_state, at, pending_disk_bytes, owner_pending_disk_bytes, server_pending_disk_bytes) VALUES
			('adm_1', 'agt_1', 'usr_a', '', 'disk_quota', 3, 0, 0, 0, 0, 'active', 1, 10, 20, 30),
			('adm_2', 'agt_1', 'usr_a', '', 'pending_disk_user', 3, 0, 0, 0, 0, 'active', 2, 10, 20, 30),
			('adm_3', 'agt_1', 'usr_a', '', 'pending_disk_server', 3, 0, 0, 0, 0, 'active', 3, 10, 20, 30)`,
	} {
		if _, err := w.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := p.DownTo(ctx, 18); err != nil {
		t.Fatalf("down to 18: %v", err)
	}
	if got := dumpRows(t, w, `SELECT id, reason, pending_disk_bytes FROM admissions ORDER BY seq`); !slices.Equal(got, []string{"adm_1|disk_quota|10"}) {
		t.Errorf("admissions after down = %q", got)
	}
	if got := dumpRows(t, w, `SELECT name FROM sqlite_master WHERE name LIKE 'change_sets_%pending%' ORDER BY name`); !slices.Equal(got, []string{"change_sets_agent_pending", "change_sets_pending"}) {
		t.Errorf("indexes after down = %q", got)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
