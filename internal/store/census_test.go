package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"corral"
)

func TestCensus(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	got, err := db.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, Census{}) {
		t.Fatalf("Census of a new database = %+v, want zeros", got)
	}

	alice, bob := mustUser(t, db, "alice"), mustUser(t, db, "bob")
	a := mustAgent(t, db, alice, "a", 0)
	b := mustAgent(t, db, bob, "b", time.Minute)
	mustCredential(t, db, alice, "gh", "github.com", 0)
	if err := db.CreateSecret(ctx, corral.Secret{ID: corral.NewID("sec"), AgentID: a.ID, Name: "npm", Host: "registry.npmjs.org", Header: "Authorization"}, []byte("sealed"), alice.ID); err != nil {
		t.Fatal(err)
	}
	done := mustAdmit(t, db, a, alice, 0)
	mustUpdateRun(t, db, done, corral.RunCompleted, "", t0.Add(time.Minute))
	mustAdmit(t, db, b, bob, time.Second) // still admitted: in progress
	for i, status := range []corral.ChangeStatus{corral.ChangePending, corral.ChangeApplied} {
		cs := corral.ChangeSet{ID: corral.NewID("chg"), AgentID: a.ID, Status: status, Mode: "review",
			Entries:   []corral.ChangeEntry{{Path: "f.txt", Op: "create", NewSHA256: "ab", Class: corral.ClassOrdinary, State: corral.EntryPending}},
			CreatedAt: t0.Add(time.Duration(i) * time.Second), ExpiresAt: t0.Add(time.Hour)}
		if status == corral.ChangeApplied {
			cs.Entries[0].State = corral.EntryApplied
		}
		if err := db.CreateChangeSet(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}

	got, err = db.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{a.ID, b.ID}
	if ids[0] > ids[1] {
		ids[0], ids[1] = ids[1], ids[0]
	}
	want := Census{Users: 2, Agents: 2, Runs: 2, RunsInProgress: 1, ChangeSets: 2, PendingChangeSets: 1,
		Messages: 2, Sealed: 2, AgentIDs: ids}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Census = %+v, want %+v", got, want)
	}
}

// TestSchemaVersion: the release's version read from the embedded
// migrations is the one goose migrates a new database to.
func TestSchemaVersion(t *testing.T) {
	sqliteOnly(t)
	db := newDB(t)
	p, err := migrator(db.w)
	if err != nil {
		t.Fatal(err)
	}
	current, target, err := p.GetVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v := SchemaVersion(); v != current || v != target {
		t.Fatalf("SchemaVersion() = %d, want %d (goose: current %d)", v, target, current)
	}
}
