package store

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"corral"
)

func mustCredential(t *testing.T, db *DB, owner corral.User, name, host string, offset time.Duration) corral.CodeCredential {
	t.Helper()
	c := corral.CodeCredential{ID: corral.NewID("crd"), UserID: owner.ID, Name: name, Host: host,
		Username: "u-" + name, Repositories: []string{host + "/team/*"}, CreatedAt: t0.Add(offset)}
	if err := db.CreateCodeCredential(context.Background(), c, []byte("sealed-"+name)); err != nil {
		t.Fatalf("CreateCodeCredential(%s): %v", name, err)
	}
	return c
}

func TestCodeCredentialCRUD(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	alice, bob := mustUser(t, db, "alice"), mustUser(t, db, "bob")
	old := mustCredential(t, db, alice, "old", "github.com", 0)
	newer := mustCredential(t, db, alice, "new", "gitlab.com", time.Minute)
	mustCredential(t, db, bob, "old", "github.com", 0) // names are per user

	err := db.CreateCodeCredential(ctx, corral.CodeCredential{ID: corral.NewID("crd"), UserID: alice.ID, Name: "old", Host: "x.org", Username: "u"}, []byte("s"))
	wantCode(t, err, corral.ECONFLICT)
	err = db.CreateCodeCredential(ctx, corral.CodeCredential{ID: corral.NewID("crd"), UserID: "usr_nobody", Name: "n", Host: "x.org", Username: "u"}, []byte("s"))
	wantNotFound(t, err, "user")

	got, err := db.CodeCredentials(ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0], newer) || !reflect.DeepEqual(got[1], old) {
		t.Fatalf("CodeCredentials(alice) = %+v, want [%+v %+v] (newest first)", got, newer, old)
	}

	// Only its owner sets what it may be used for.
	_, err = db.SetCredentialRepositories(ctx, bob.ID, old.ID, []string{"github.com/bob/*"})
	wantNotFound(t, err, "credential")
	set, err := db.SetCredentialRepositories(ctx, alice.ID, old.ID, []string{"github.com/a/b", "github.com/c/*"})
	if err != nil || !reflect.DeepEqual(set.Repositories, []string{"github.com/a/b", "github.com/c/*"}) || set.Name != "old" {
		t.Fatalf("SetCredentialRepositories = %+v, %v", set, err)
	}
	if got, _ := db.CodeCredentials(ctx, alice.ID); !reflect.DeepEqual(got[1], set) {
		t.Fatalf("after SetCredentialRepositories: %+v, want %+v", got[1], set)
	}
	if set, err := db.SetCredentialRepositories(ctx, alice.ID, old.ID, nil); err != nil || set.Repositories == nil || len(set.Repositories) != 0 {
		t.Fatalf("none: %+v, %v; want an empty list", set.Repositories, err)
	}

	wantNotFound(t, db.DeleteCodeCredential(ctx, bob.ID, old.ID), "credential")
	if err := db.DeleteCodeCredential(ctx, alice.ID, old.ID); err != nil {
		t.Fatalf("DeleteCodeCredential(own): %v", err)
	}
	wantNotFound(t, db.DeleteCodeCredential(ctx, alice.ID, old.ID), "credential")
	if got, _ := db.CodeCredentials(ctx, alice.ID); len(got) != 1 || got[0].ID != newer.ID {
		t.Fatalf("after delete, CodeCredentials(alice) = %+v, want only %s", got, newer.ID)
	}
	if got, _ := db.CodeCredentials(ctx, bob.ID); len(got) != 1 {
		t.Fatalf("alice's delete touched bob's credentials: %+v", got)
	}
}

// TestCredentialForAgentUsesTheOwners: the credential comes from the
// agent's owner, whoever asks; an editor's own credential for the host is
// never used, nor one named by id that is not the owner's.
func TestCredentialForAgentUsesTheOwners(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner, editor := mustUser(t, db, "owner"), mustUser(t, db, "editor")
	agent := mustAgent(t, db, owner, "pusher", 0)
	mustGrant(t, db, agent, editor, corral.LevelEditor)
	bare := mustAgent(t, db, editor, "editor's own", 0)

	editors := mustCredential(t, db, editor, "mine", "github.com", 2*time.Minute) // the newest of all
	older := mustCredential(t, db, owner, "older", "github.com", 0)
	newest := mustCredential(t, db, owner, "newest", "github.com", time.Minute)
	other := mustCredential(t, db, owner, "other host", "git.example.org:8443", 0)

	cases := []struct {
		name         string
		agent        string
		credentialID string
		host         string
		want         string // credential id; "" for ENOTFOUND
	}{
		{"no credential named: none (no pick by host)", agent.ID, "", "github.com", ""},
		{"an explicit credential of the owner", agent.ID, older.ID, "github.com", older.ID},
		{"the newest, named", agent.ID, newest.ID, "github.com", newest.ID},
		{"the owner's for another host", agent.ID, other.ID, "git.example.org:8443", other.ID},
		{"the editor's own, by id", agent.ID, editors.ID, "github.com", ""},
		{"the owner's, named for the wrong host", agent.ID, other.ID, "github.com", ""},
		{"a host that differs by its port", agent.ID, other.ID, "git.example.org", ""},
		{"the editor's agent finds the editor's", bare.ID, editors.ID, "github.com", editors.ID},
		{"the editor's agent cannot take the owner's by id", bare.ID, newest.ID, "github.com", ""},
		{"no such agent", "agt_missing", newest.ID, "github.com", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := db.CredentialForAgent(ctx, c.agent, c.credentialID, c.host)
			if c.want == "" {
				wantNotFound(t, err, "credential")
				return
			}
			if err != nil {
				t.Fatalf("CredentialForAgent = %v, want %s", err, c.want)
			}
			if got.ID != c.want || !bytes.Equal(got.Sealed, []byte("sealed-"+got.Name)) {
				t.Fatalf("CredentialForAgent = %s (%s) sealed %q, want %s", got.ID, got.Name, got.Sealed, c.want)
			}
		})
	}
}

func TestCodeCredentialsGoWithTheirUser(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	alice := mustUser(t, db, "alice")
	mustCredential(t, db, alice, "c", "github.com", 0)
	if _, err := db.exec(ctx, `DELETE FROM users WHERE id = ?`, alice.ID); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.w.QueryRowContext(ctx, `SELECT count(*) FROM credentials`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("credentials left after their user was deleted: %d (%v)", n, err)
	}
}
