package retrieval

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"corral"
)

// TestTermsCompounds: a phrasal verb written apart, hyphenated or as one
// word is one term, whatever its tense or number; words a sentence end,
// a comma or a line break keeps apart stay apart.
func TestTermsCompounds(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"Rollbacks take about 4 minutes", "rollback take 4 minut"},
		{"to roll back a deploy", "rollback deploy"},
		{"we rolled back twice", "rollback twice"},
		{"a rolled-back release", "rollback releas"},
		{"Rolling  back", "rollback"},
		{"back up the database", "backup databas"},
		{"nightly backups", "night backup"},
		{"Set up quern; the setup takes a minute", "setup quern setup take minut"},
		{"log in, then log out", "login logout"},
		{"the on-call engineer is on call", "oncal engin oncal"},
		{"sign-in page", "signin page"},
		// Kept apart: punctuation or a line break between the words.
		{"we roll. Back to work", "roll back work"},
		{"roll, back", "roll back"},
		{"roll\nback", "roll back"},
		// The second word alone, or first, is only itself.
		{"back to the office", "back offic"},
		{"up front", "front"},
	} {
		var got []string
		terms(tc.text, func(s string) { got = append(got, s) })
		if strings.Join(got, " ") != tc.want {
			t.Errorf("terms(%q) = %q, want %q", tc.text, strings.Join(got, " "), tc.want)
		}
	}
}

// TestRollBackFindsRollback: a question that writes the compound one way
// finds a passage that writes it the other.
func TestRollBackFindsRollback(t *testing.T) {
	x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	addDoc(t, x, "doc_rb", "deploys.md", "# Deploys\n\nTo roll back a release, run `shipyard revert`. It restores the previous image.\n", false)
	addDoc(t, x, "doc_leave", "leave.md", leaveDoc, false)
	r := search(t, []Scope{{x, corral.SourcePrivate}}, Query{Text: "which command does a rollback?", Weak: true})
	if len(r.Items) == 0 || r.Items[0].DocumentID != "doc_rb" {
		t.Fatalf("passages %v, want doc_rb first", docIDs(r))
	}
}

// TestRetermVersion1: a store written by a build whose terms kept
// compounds apart (schema version 1) has its index terms made again from
// the chunks' stored text when it is opened, once.
func TestRetermVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "documents.db")
	x, err := Open(ctx, path, "agt_a")
	if err != nil {
		t.Fatal(err)
	}
	addDoc(t, x, "doc_rb", "deploys.md", "# Deploys\n\nRollbacks take about 4 minutes.\n", false)
	x.Close()

	// Make it a version 1 file whose index holds nothing this build would
	// look for: only the stored text can give the terms back.
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')`, `UPDATE chunks SET terms = 0`, `PRAGMA user_version = 1`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	x = openIndex(t, path, "agt_a")
	r := search(t, []Scope{{x, corral.SourcePrivate}}, Query{Text: "how long do rollbacks take", Weak: true})
	if len(r.Items) == 0 || r.Items[0].DocumentID != "doc_rb" {
		t.Fatalf("after reopening a version 1 store: passages %v, want doc_rb", docIDs(r))
	}
	var v, n int
	if err := x.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if err := x.db.QueryRow("SELECT terms FROM chunks").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if v != schemaVersion || n == 0 || x.terms != int64(n) {
		t.Fatalf("user_version %d (want %d), chunk terms %d, store terms %d", v, schemaVersion, n, x.terms)
	}
}
