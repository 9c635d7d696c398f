package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"corral"
)

// TestWaitingChangeSets: the inbox's query lists the pending change sets
// of the agents named, newest first, with their entries counted and what
// they hold on disk, and each agent read counts its own pending sets.
func TestWaitingChangeSets(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "alpha", 0)
	b := mustAgent(t, db, owner, "beta", time.Second)
	other := mustAgent(t, db, owner, "gamma", 2*time.Second)

	set := func(agent corral.Agent, at time.Duration, status corral.ChangeStatus, states ...corral.EntryState) corral.ChangeSet {
		t.Helper()
		cs := corral.ChangeSet{ID: corral.NewID("chg"), AgentID: agent.ID, RunID: "run_" + agent.Name, Status: status,
			Mode: corral.ChangesReview, CreatedAt: t0.Add(at), ExpiresAt: t0.Add(at + time.Hour), DiskBytes: int64(at / time.Second)}
		for i, st := range states {
			cs.Entries = append(cs.Entries, corral.ChangeEntry{Path: string(rune('a'+i)) + ".txt", Op: "create", Class: corral.ClassOrdinary, State: st})
		}
		if err := db.CreateChangeSet(ctx, cs); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	older := set(a, time.Minute, corral.ChangePending, corral.EntryPending, corral.EntryApplied, corral.EntryPending)
	set(a, 2*time.Minute, corral.ChangeApplied, corral.EntryApplied) // decided: not waiting
	newer := set(b, 3*time.Minute, corral.ChangePending, corral.EntryPending)
	set(other, 4*time.Minute, corral.ChangePending, corral.EntryPending) // not asked about

	got, err := db.WaitingChangeSets(ctx, []string{a.ID, b.ID, "agt_none"})
	if err != nil {
		t.Fatal(err)
	}
	want := []corral.WaitingChangeSet{
		{ID: newer.ID, AgentID: b.ID, AgentName: "beta", RunID: "run_beta", CreatedAt: newer.CreatedAt, ExpiresAt: newer.ExpiresAt, Pending: 1, Entries: 1, DiskBytes: 180},
		{ID: older.ID, AgentID: a.ID, AgentName: "alpha", RunID: "run_alpha", CreatedAt: older.CreatedAt, ExpiresAt: older.ExpiresAt, Pending: 2, Entries: 3, DiskBytes: 60},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WaitingChangeSets = %+v\nwant %+v", got, want)
	}
	if none, err := db.WaitingChangeSets(ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("WaitingChangeSets(none) = %+v, %v; want an empty list", none, err)
	}

	counts := map[string]int{a.ID: 1, b.ID: 1, other.ID: 1}
	agents, err := db.AgentsFor(ctx, owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ag := range agents {
		if ag.PendingChanges != counts[ag.ID] {
			t.Errorf("AgentsFor: %s has PendingChanges %d, want %d", ag.Name, ag.PendingChanges, counts[ag.ID])
		}
	}
	// Deciding the older set takes it off both.
	decided := older
	decided.Status, decided.DecidedBy, decided.DecidedAt = corral.ChangeRejected, &corral.UserRef{ID: owner.ID, Name: owner.Name}, t0.Add(time.Hour)
	for i := range decided.Entries {
		if decided.Entries[i].State == corral.EntryPending {
			decided.Entries[i].State = corral.EntryRejected
		}
	}
	if err := db.UpdateChangeSet(ctx, decided, corral.ChangePending); err != nil {
		t.Fatal(err)
	}
	if ag, err := db.Agent(ctx, a.ID, owner.ID); err != nil || ag.PendingChanges != 0 {
		t.Fatalf("Agent after the decision: PendingChanges %d, %v; want 0", ag.PendingChanges, err)
	}
	if got, _ := db.WaitingChangeSets(ctx, []string{a.ID, b.ID}); len(got) != 1 || got[0].ID != newer.ID {
		t.Fatalf("WaitingChangeSets after the decision = %+v, want only %s", got, newer.ID)
	}
}

func TestHasUsers(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	if has, err := db.HasUsers(ctx); err != nil || has {
		t.Fatalf("HasUsers on a new database = %v, %v; want false", has, err)
	}
	mustUser(t, db, "first")
	if has, err := db.HasUsers(ctx); err != nil || !has {
		t.Fatalf("HasUsers after the first account = %v, %v; want true", has, err)
	}
}
