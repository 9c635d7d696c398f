package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"corral"
	"corral/internal/auth"
	"corral/internal/pgtest"
	"corral/internal/secrets"
	"corral/internal/service"
	"corral/internal/store"
)

// TestDocumentsSurviveATakeover: controls sharing a PostgreSQL store, each
// with a data directory of its own. A document published and one uploaded
// on the first are found on the second once it serves, though its disk
// never held them; one deleted on the second is gone from the first's
// index when the first serves again. An installation moved from SQLite
// (store copy) keeps the documents its index held: the first control on
// the new store copies them in, and a control elsewhere then has them.
func TestDocumentsSurviveATakeover(t *testing.T) {
	ctx := context.Background()
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, secrets.KeySize))
	serve := func(data, db string) *App {
		t.Helper()
		a, err := New(ctx, Config{Role: "control", Data: data, Database: db, SecretKey: key}, WithPasswordParams(auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	names := func(a *App, actor corral.User, agentID string) string {
		t.Helper()
		var docs []service.ListedDocument
		var err error
		if agentID == "" {
			docs, err = a.Documents.Library(ctx, actor)
		} else {
			docs, err = a.Documents.Documents(ctx, actor, agentID)
		}
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range docs {
			out = append(out, d.Name)
		}
		return strings.Join(out, ",")
	}

	// An installation on SQLite, with a library document.
	oldData := t.TempDir()
	old := serve(oldData, "")
	alice, err := old.Accounts.CreateUser(ctx, "alice@example.com", "Alice", "correct horse battery", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Documents.Publish(ctx, alice, "handbook.md", strings.NewReader("# Leave\n\nEveryone gets thirty days of leave.\n")); err != nil {
		t.Fatal(err)
	}
	old.Close()
	// Moved to PostgreSQL, the old data directory kept.
	db := pgtest.NewDatabase(t)
	from, err := store.Open(ctx, filepath.Join(oldData, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	to, err := store.OpenPostgres(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Copy(ctx, from, to, nil); err != nil {
		t.Fatal(err)
	}
	from.Close()
	to.Close()

	first := serve(oldData, db)
	name := "notes"
	agent, err := first.Agents.Create(ctx, alice, service.AgentInput{Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Documents.Upload(ctx, alice, agent.ID, "plan.md", strings.NewReader("The launch is on a Tuesday.\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Documents.Publish(ctx, alice, "faq.md", strings.NewReader("Parking is free on weekends.\n")); err != nil {
		t.Fatal(err)
	}
	first.Close() // the next takes the lease at once

	secondData := t.TempDir()
	second := serve(secondData, db)
	if got := names(second, alice, ""); got != "faq.md,handbook.md" {
		t.Fatalf("the library on a control that never indexed it = %q, want faq.md and handbook.md", got)
	}
	if got := names(second, alice, agent.ID); got != "plan.md" {
		t.Fatalf("the agent's documents there = %q, want plan.md", got)
	}
	found, err := second.Documents.Search(ctx, alice, agent.ID, "when is the launch", 3)
	if err != nil || len(found.Items) == 0 || found.Items[0].Name != "plan.md" {
		t.Fatalf("a search there = %+v, %v; want plan.md first", found.Items, err)
	}
	docs, err := second.Documents.Library(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Name == "faq.md" {
			if err := second.Documents.Unpublish(ctx, alice, d.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	second.Close()

	again := serve(oldData, db)
	defer again.Close()
	if got := names(again, alice, ""); got != "handbook.md" {
		t.Fatalf("the library on the first control again = %q, want handbook.md alone (faq.md was deleted elsewhere)", got)
	}
}
