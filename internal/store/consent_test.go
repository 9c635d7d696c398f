package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"corral"
)

// TestAccepted: whether a user accepted an agent as a delegation target,
// read with the agent (Agent, AgentsFor) and on the grant (Grants). A
// grant alone is not; accepting it, joining a link, or owning the agent
// is; changing a grant's level keeps the answer; revoking and granting
// again asks again.
func TestAccepted(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	accept := func(t *testing.T, a corral.Agent, u corral.User) {
		t.Helper()
		if err := db.AcceptGrant(ctx, a.ID, u.ID); err != nil {
			t.Fatalf("AcceptGrant: %v", err)
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, a corral.Agent, u corral.User)
		want  bool
		grant bool // the user has a grant, whose Accepted must read the same
	}{
		{"grant", func(t *testing.T, a corral.Agent, u corral.User) {
			mustGrant(t, db, a, u, corral.LevelRunner)
		}, false, true},
		{"grant accepted", func(t *testing.T, a corral.Agent, u corral.User) {
			mustGrant(t, db, a, u, corral.LevelRunner)
			accept(t, a, u)
		}, true, true},
		{"grant accepted twice", func(t *testing.T, a corral.Agent, u corral.User) {
			mustGrant(t, db, a, u, corral.LevelRunner)
			accept(t, a, u)
			accept(t, a, u)
		}, true, true},
		{"grant accepted, then its level changed", func(t *testing.T, a corral.Agent, u corral.User) {
			mustGrant(t, db, a, u, corral.LevelViewer)
			accept(t, a, u)
			mustGrant(t, db, a, u, corral.LevelEditor)
		}, true, true},
		{"grant accepted, revoked, granted again", func(t *testing.T, a corral.Agent, u corral.User) {
			mustGrant(t, db, a, u, corral.LevelRunner)
			accept(t, a, u)
			if err := db.DeleteGrant(ctx, a.ID, u.ID, ""); err != nil {
				t.Fatal(err)
			}
			mustGrant(t, db, a, u, corral.LevelRunner)
		}, false, true},
		{"link joined", func(t *testing.T, a corral.Agent, u corral.User) {
			mustLink(t, db, a, corral.LevelRunner, u)
		}, true, false},
		{"grant and a link joined", func(t *testing.T, a corral.Agent, u corral.User) {
			mustGrant(t, db, a, u, corral.LevelEditor)
			mustLink(t, db, a, corral.LevelViewer, u)
		}, true, true},
		{"another user's accepted grant", func(t *testing.T, a corral.Agent, u corral.User) {
			mustGrant(t, db, a, u, corral.LevelRunner)
			other := mustUser(t, db, "other")
			mustGrant(t, db, a, other, corral.LevelRunner)
			accept(t, a, other)
		}, false, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := mustAgent(t, db, owner, c.name, time.Duration(i+1)*time.Second)
			u := mustUser(t, db, "user")
			c.setup(t, a, u)
			got, err := db.Agent(ctx, a.ID, u.ID)
			if err != nil || got.Accepted != c.want {
				t.Errorf("Agent(...).Accepted = %v, %v; want %v", got.Accepted, err, c.want)
			}
			list, err := db.AgentsFor(ctx, u.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range list {
				if l.ID == a.ID && l.Accepted != c.want {
					t.Errorf("AgentsFor(...) lists it with Accepted %v, want %v", l.Accepted, c.want)
				}
			}
			grants, err := db.Grants(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, g := range grants {
				if g.User.ID == u.ID {
					found = true
					if g.Accepted != c.want {
						t.Errorf("Grants(...) has its grant with Accepted %v, want %v", g.Accepted, c.want)
					}
				}
			}
			if found != c.grant {
				t.Errorf("Grants(...) holds the user's grant: %v, want %v", found, c.grant)
			}
			if own, err := db.Agent(ctx, a.ID, owner.ID); err != nil || !own.Accepted {
				t.Errorf("the owner's Accepted = %v, %v; want true", own.Accepted, err)
			}
		})
	}

	a := mustAgent(t, db, owner, "no grant", time.Minute)
	u := mustUser(t, db, "stranger")
	wantNotFound(t, db.AcceptGrant(ctx, a.ID, u.ID), "grant")
	wantNotFound(t, db.AcceptGrant(ctx, "agt_nope", u.ID), "grant")
	mustLink(t, db, a, corral.LevelRunner, u)
	wantNotFound(t, db.AcceptGrant(ctx, a.ID, u.ID), "grant") // a link has no grant to accept
}

// TestMigrationConsent: migration 20 leaves every grant made before it
// not accepted (nobody was asked) and every agent made before it
// searching the library (as they did).
func TestMigrationConsent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	owner, grantee := mustUser(t, db, "owner"), mustUser(t, db, "grantee")
	off := mustAgent(t, db, owner, "library off", 0)
	on := mustAgentValue(owner, "library on")
	on.Policy.Library = true
	if err := db.CreateAgent(ctx, on); err != nil {
		t.Fatal(err)
	}
	mustGrant(t, db, off, grantee, corral.LevelRunner)
	mustGrant(t, db, on, grantee, corral.LevelRunner)
	if err := db.AcceptGrant(ctx, on.ID, grantee.ID); err != nil {
		t.Fatal(err)
	}

	// Back to before migration 20, as goose goes down, and open again,
	// which runs it on these rows.
	downTo(t, db, 19)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(ctx, path); err != nil {
		t.Fatalf("Open with migration 20 pending: %v", err)
	}
	t.Cleanup(func() { db.Close() })

	for _, a := range []corral.Agent{off, on} {
		got, err := db.Agent(ctx, a.ID, grantee.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Policy.Library {
			t.Errorf("agent %q after the migration: policy.library off, want on (it searched the library before)", a.Name)
		}
		if got.Accepted || got.Access != corral.LevelRunner {
			t.Errorf("agent %q after the migration: the grantee's access %v, accepted %v; want runner, not accepted", a.Name, got.Access, got.Accepted)
		}
		grants, err := db.Grants(ctx, a.ID)
		if err != nil || len(grants) != 1 || grants[0].Accepted {
			t.Errorf("agent %q after the migration: grants %+v, %v; want one, not accepted", a.Name, grants, err)
		}
	}
	// A new agent after the migration keeps what it was made with.
	fresh := mustAgent(t, db, owner, "new", time.Hour)
	if got, err := db.Agent(ctx, fresh.ID, owner.ID); err != nil || got.Policy.Library {
		t.Errorf("a new agent's policy.library = %v, %v; want off", got.Policy.Library, err)
	}
}
