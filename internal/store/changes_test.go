package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"corral"
)

func TestChangeSets(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	cs := corral.ChangeSet{
		ID: corral.NewID("chg"), AgentID: a.ID, RunID: "run_1", Status: corral.ChangePending, Mode: corral.ChangesAuto,
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
		Entries: []corral.ChangeEntry{
			{Path: "b.go", Op: "modify", OldSHA256: "aa", NewSHA256: "bb", Size: 3, Mode: 0o644, OldMode: 0o644, Class: "ordinary", State: corral.EntryApplied},
			{Path: "a/link", Op: "create", NewSHA256: "cc", Size: 1, Mode: 0o777, Class: "protected", Flags: []string{"symlink", "escape"}, State: corral.EntryDenied},
			{Path: "go.mod", Op: "delete", OldSHA256: "dd", OldMode: 0o644, Class: "risky", State: corral.EntryPending},
		},
	}
	if err := db.CreateChangeSet(ctx, cs); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.CreateChangeSet(ctx, cs), corral.ECONFLICT)
	got, err := db.ChangeSet(ctx, cs.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := cs
	want.Entries = []corral.ChangeEntry{cs.Entries[1], cs.Entries[0], cs.Entries[2]} // by path
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ChangeSet = %+v\nwant        %+v", got, want)
	}
	wantNotFound(t, errOf(db.ChangeSet(ctx, "chg_none")), "change set")

	// A decision applies only from the status it was made on.
	got.Status, got.DecidedBy, got.DecidedAt = corral.ChangeApplied, &corral.UserRef{ID: owner.ID, Name: owner.Name}, t0.Add(time.Minute)
	got.Entries[2].State = corral.EntryApplied
	if err := db.UpdateChangeSet(ctx, got, corral.ChangePending); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.UpdateChangeSet(ctx, got, corral.ChangePending), corral.ECONFLICT)
	again, _ := db.ChangeSet(ctx, cs.ID)
	if !reflect.DeepEqual(again, got) {
		t.Fatalf("after update = %+v\nwant %+v", again, got)
	}
	if pending, err := db.PendingChangeSets(ctx); err != nil || len(pending) != 0 {
		t.Fatalf("PendingChangeSets = %v, %v; want none", pending, err)
	}

	second := cs
	second.ID, second.CreatedAt, second.Entries = corral.NewID("chg"), t0.Add(time.Second), nil
	if err := db.CreateChangeSet(ctx, second); err != nil {
		t.Fatal(err)
	}
	list, err := db.ChangeSets(ctx, a.ID)
	if err != nil || len(list) != 2 || list[0].ID != second.ID || list[1].ID != cs.ID {
		t.Fatalf("ChangeSets = %+v, %v; want newest first", list, err)
	}
	if pending, _ := db.PendingChangeSets(ctx); len(pending) != 1 || pending[0].ID != second.ID {
		t.Fatalf("PendingChangeSets = %+v, want the second", pending)
	}
	if err := db.DeleteAgent(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := db.ChangeSets(ctx, a.ID); len(list) != 0 {
		t.Fatalf("change sets outlived their agent: %+v", list)
	}
	wantCode(t, db.CreateChangeSet(ctx, second), corral.ENOTFOUND)
}

func errOf[T any](_ T, err error) error { return err }

// TestChangeEntryBytes: a path, note and diff that are not UTF-8 (what a
// run may write) are kept byte for byte, sorted bytewise, and decided by
// path.
func TestChangeEntryBytes(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	cs := corral.ChangeSet{
		ID: corral.NewID("chg"), AgentID: a.ID, RunID: "run_1", Status: corral.ChangePending, Mode: corral.ChangesReview,
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
		Entries: []corral.ChangeEntry{
			{Path: "caf\xe9.txt", Op: "create", NewSHA256: "aa", Size: 5, Mode: 0o644, Class: "protected", Flags: []string{"name"},
				State: corral.EntryPending, Note: "named caf\xe9", Diff: "+caf\xe9\n"},
			{Path: "bad\xffname", Op: "create", NewSHA256: "bb", Size: 1, Mode: 0o644, Class: "protected", State: corral.EntryPending},
		},
	}
	if err := db.CreateChangeSet(ctx, cs); err != nil {
		t.Fatal(err)
	}
	got, err := db.ChangeSet(ctx, cs.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := cs
	want.Entries = []corral.ChangeEntry{cs.Entries[1], cs.Entries[0]} // bytewise: 'b' < 'c'
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ChangeSet = %#v\nwant        %#v", got.Entries, want.Entries)
	}
	got.Status, got.Entries[1].State = corral.ChangeRejected, corral.EntryRejected
	got.Entries[0].State = corral.EntryRejected
	if err := db.UpdateChangeSet(ctx, got, corral.ChangePending); err != nil {
		t.Fatal(err)
	}
	again, _ := db.ChangeSet(ctx, cs.ID)
	if again.Entries[0].State != corral.EntryRejected || again.Entries[1].State != corral.EntryRejected {
		t.Fatalf("entries after the decision = %#v", again.Entries)
	}
}
