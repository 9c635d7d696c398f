package store

import (
	"context"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"corral"
)

// reopenUnmigrated stores users with the emails given, as a server before
// migration 8 could have (lower-cased, not NFC), forgets that migration 8
// ran, and opens the file again, which runs it.
func reopenUnmigrated(t *testing.T, emails ...string) (*DB, []string, error) {
	return reopenBefore(t, 8, emails...)
}

// reopenBefore is reopenUnmigrated for the migration of version v.
func reopenBefore(t *testing.T, v int64, emails ...string) (*DB, []string, error) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, email := range emails {
		id := corral.NewID("usr")
		if _, err := db.exec(ctx, `
			INSERT INTO users (id, email, name, password_hash, admin, disabled, created_at)
			VALUES (?, ?, 'n', 'h', 0, 0, ?)`, id, email, i); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Back to version 7 the way goose goes down, so the migrations after 8
	// are undone too and run again after it (goose refuses to apply a
	// missing version below the current one).
	downTo(t, db, v-1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(ctx, path)
	if err == nil {
		t.Cleanup(func() { db.Close() })
	}
	return db, ids, err
}

func TestMigrationNormalisesEmails(t *testing.T) {
	ctx := context.Background()
	stored := []string{
		"a\u030asa@x.se",        // decomposed å: found by no lookup before the migration
		"ada@bu\u0308cher.de",   // a decomposed ü in the domain
		"\u1e96@x.se",           // already the new form
		"plain@example.com",     // ASCII, untouched
		"h\u0331ello@x.se",      // h + macron below, composes
		"not-an-email-any-more", // refused by today's rules: left as it is
	}
	want := []string{"\u00e5sa@x.se", "ada@b\u00fccher.de", "\u1e96@x.se", "plain@example.com", "\u1e96ello@x.se", "not-an-email-any-more"}
	db, ids, err := reopenUnmigrated(t, stored...)
	if err != nil {
		t.Fatalf("Open with migration 8 pending: %v", err)
	}
	for i, id := range ids {
		u, err := db.UserByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if u.Email != want[i] {
			t.Errorf("email %+q after the migration = %+q, want %+q", stored[i], u.Email, want[i])
		}
		if c, err := db.Credential(ctx, want[i]); err != nil || c.UserID != id {
			t.Errorf("Credential(%+q) = %+v, %v; want account %s", want[i], c, err, id)
		}
	}
}

func TestMigrationRefusesEmailCollision(t *testing.T) {
	_, ids, err := reopenUnmigrated(t, "other@example.com", "\u00e5sa@x.se", "a\u030asa@x.se")
	if err == nil {
		t.Fatal("Open succeeded with two accounts whose emails are one address in NFC, want it refused")
	}
	if !strings.Contains(err.Error(), ids[1]) || !strings.Contains(err.Error(), ids[2]) {
		t.Errorf("error %q does not name both accounts %s and %s", err, ids[1], ids[2])
	}
	if strings.Contains(err.Error(), "sa@x.se") {
		t.Errorf("error %q shows an email: it names accounts by id", err)
	}
}

// TestMigrationOneMailbox: migration 17 gives stored emails the form
// sanitize.Email has since it folds compatibility forms and gives a domain
// one IDNA form; two accounts of one mailbox refuse the start, named by id.
func TestMigrationOneMailbox(t *testing.T) {
	ctx := context.Background()
	stored := []string{"victim1@xn--exmple-4nf.com", "\uff56ictim2@example.com", "ada@xn--bcher-kva.de"}
	want := []string{"victim1@ex\u0430mple.com", "victim2@example.com", "ada@b\u00fccher.de"}
	db, ids, err := reopenBefore(t, 17, stored...)
	if err != nil {
		t.Fatalf("Open with migration 17 pending: %v", err)
	}
	for i, id := range ids {
		if u, err := db.UserByID(ctx, id); err != nil || u.Email != want[i] {
			t.Errorf("email %+q after the migration = %+q (%v), want %+q", stored[i], u.Email, err, want[i])
		}
	}

	_, ids, err = reopenBefore(t, 17, "victim1@xn--exmple-4nf.com", "victim1@ex\u0430mple.com")
	if err == nil || !strings.Contains(err.Error(), ids[0]) || !strings.Contains(err.Error(), ids[1]) {
		t.Fatalf("Open with two accounts of one mailbox: %v, want it refused naming %s and %s", err, ids[0], ids[1])
	}
}

// TestGoMigrationsAreFrozen: the file of the Go migrations imports nothing
// of this module, whose code may change; what a migration needs is copied
// into the file, frozen (frozenEmail).
func TestGoMigrationsAreFrozen(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "emails.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p == "corral" || strings.HasPrefix(p, "corral/") {
			t.Errorf("emails.go, the Go migrations, imports %s: copy what a migration needs into the file instead", p)
		}
	}
}
