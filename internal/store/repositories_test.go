package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"corral"
)

func TestRepositoryLifecycle(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	alice := mustUser(t, db, "alice")
	a := mustAgent(t, db, alice, "repo", 0)
	r := corral.Repository{AgentID: a.ID, URL: "https://example.com/r.git", Ref: "main", Status: corral.RepoCloning, CreatedBy: alice.ID, CreatedAt: t0}

	if _, err := db.Repository(ctx, a.ID); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("Repository before any = %v, want not found", err)
	}
	if err := db.CreateRepository(ctx, r); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		status corral.RepoStatus
		code   string
	}{
		{"while cloning", corral.RepoCloning, corral.ECONFLICT},
		{"when ready", corral.RepoReady, corral.ECONFLICT},
		{"after a failure", corral.RepoFailed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur, err := db.Repository(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			cur.Status = tt.status
			if err := db.UpdateRepository(ctx, cur); err != nil {
				t.Fatal(err)
			}
			err = db.CreateRepository(ctx, corral.Repository{AgentID: a.ID, URL: "https://example.com/other.git", Status: corral.RepoCloning, CreatedBy: alice.ID})
			if corral.ErrorCode(err) != tt.code {
				t.Fatalf("CreateRepository %s = %v, want code %q", tt.name, err, tt.code)
			}
		})
	}

	got, err := db.Repository(ctx, a.ID)
	if err != nil || got.URL != "https://example.com/other.git" || got.Status != corral.RepoCloning {
		t.Fatalf("after replacing a failed one: %+v, %v", got, err)
	}
	got.Status, got.Head, got.Error, got.Pending = corral.RepoReady, "abc", "commit failed", []string{"a.txt", ".env.example"}
	got.LastPush = &corral.Push{Branch: "main", Head: "abc", At: t0.Add(time.Hour), By: corral.UserRef{ID: alice.ID, Name: "alice"}}
	if err := db.UpdateRepository(ctx, got); err != nil {
		t.Fatal(err)
	}
	back, err := db.Repository(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if back.Head != "abc" || !slices.Equal(back.Pending, got.Pending) || back.LastPush == nil || *back.LastPush != *got.LastPush {
		t.Fatalf("Repository = %+v, want %+v", back, got)
	}

	// A restart fails what was cloning, and only that.
	b := mustAgent(t, db, alice, "cloning", time.Minute)
	if err := db.CreateRepository(ctx, corral.Repository{AgentID: b.ID, URL: "https://example.com/b.git", Status: corral.RepoCloning, CreatedBy: alice.ID}); err != nil {
		t.Fatal(err)
	}
	ids, err := db.FailCloning(ctx, "the server stopped during the clone", t0)
	if err != nil || !slices.Equal(ids, []string{b.ID}) {
		t.Fatalf("FailCloning = %v, %v; want [%s]", ids, err, b.ID)
	}
	if r, _ := db.Repository(ctx, b.ID); r.Status != corral.RepoFailed || r.Error != "the server stopped during the clone" {
		t.Fatalf("after FailCloning: %+v", r)
	}

	id, err := db.Identity(ctx, alice.ID)
	if err != nil || id.Name != "alice" || id.Email != alice.Email {
		t.Fatalf("Identity = %+v, %v", id, err)
	}
	if _, err := db.Identity(ctx, "usr_gone"); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("Identity(gone) = %v, want not found", err)
	}
}
