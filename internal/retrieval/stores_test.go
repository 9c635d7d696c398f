package retrieval

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"corral"
)

func openStores(t *testing.T, dir string) *Stores {
	t.Helper()
	s, err := OpenStores(context.Background(), dir)
	if err != nil {
		t.Fatalf("OpenStores: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// files lists the regular files under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// dbFiles are the store files among files: SQLite's -wal and -shm come
// and go with the connections.
func dbFiles(all []string) []string {
	var out []string
	for _, f := range all {
		if strings.HasSuffix(f, ".db") {
			out = append(out, f)
		}
	}
	return out
}

func TestStoresLayout(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStores(t, dir)
	a, err := s.Private(ctx, "agt_a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Private(ctx, "agt_b")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.Private(ctx, "agt_a"); err != nil || again != a {
		t.Errorf("a second Private(agt_a) = %p, %v; want the same store %p", again, err, a)
	}
	want := []string{"agents/agt_a/documents.db", "agents/agt_b/documents.db", "library/documents.db"}
	if got := dbFiles(files(t, dir)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("store files %q, want %q", got, want)
	}
	// Each file holds its own documents only.
	addDoc(t, a, "doc_a", "leave.md", leaveDoc, false)
	addDoc(t, b, "doc_b", "leave.md", leaveDoc, false)
	addDoc(t, s.Library(), "doc_lib", "leave.md", leaveDoc, false)
	for _, tc := range []struct {
		name string
		x    *Index
		want string
	}{{"a", a, "doc_a"}, {"b", b, "doc_b"}, {"library", s.Library(), "doc_lib"}} {
		ds, err := tc.x.Documents(ctx)
		if err != nil || len(ds) != 1 || ds[0].ID != tc.want {
			t.Errorf("%s's documents: %v, %v; want %s alone", tc.name, ds, err, tc.want)
		}
		r := search(t, []Scope{{tc.x, corral.SourcePrivate}}, Query{Text: "parental leave", Weak: true, K: MaxK})
		for _, p := range r.Items {
			if p.DocumentID != tc.want {
				t.Errorf("%s's search found %s", tc.name, p.DocumentID)
			}
		}
	}
}

func TestStoresInvalidAgentID(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "documents")
	s := openStores(t, dir)
	before := files(t, root)
	for _, id := range []string{"", "../x", "..", ".", "A B", "agt/x", "agt\\x", "Agt_a", "agt_a\x00", "agt-a", strings.Repeat("a", 65), "../library"} {
		t.Run(id, func(t *testing.T) {
			if x, err := s.Private(ctx, id); corral.ErrorCode(err) != corral.EINVALID || x != nil {
				t.Errorf("Private(%q) = %v, %v; want %s", id, x, err, corral.EINVALID)
			}
			if err := s.Drop(id); corral.ErrorCode(err) != corral.EINVALID {
				t.Errorf("Drop(%q) = %v, want %s", id, err, corral.EINVALID)
			}
		})
	}
	if after := files(t, root); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("invalid ids changed the files: %q, before %q", after, before)
	}
	if _, err := os.Stat(filepath.Join(dir, "agents")); !os.IsNotExist(err) {
		t.Errorf("invalid ids made the agents directory: %v", err)
	}
	if _, err := s.Library().Documents(ctx); err != nil {
		t.Errorf("the library after the invalid drops: %v", err)
	}
	// The longest valid id passes.
	if _, err := s.Private(ctx, strings.Repeat("a", 64)); err != nil {
		t.Errorf("Private(64 letters): %v", err)
	}
}

func TestStoresDrop(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStores(t, dir)
	a, err := s.Private(ctx, "agt_a")
	if err != nil {
		t.Fatal(err)
	}
	addDoc(t, a, "doc_a", "leave.md", leaveDoc, true)
	b, err := s.Private(ctx, "agt_b")
	if err != nil {
		t.Fatal(err)
	}
	addDoc(t, b, "doc_b", "leave.md", leaveDoc, false)
	addDoc(t, s.Library(), "doc_lib", "leave.md", leaveDoc, false)

	if err := s.Drop("agt_a"); err != nil {
		t.Fatalf("Drop(agt_a): %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "agents", "agt_a")); !os.IsNotExist(err) {
		t.Errorf("agt_a's directory after Drop: %v, want gone", err)
	}
	if _, err := a.Documents(ctx); err == nil {
		t.Errorf("the dropped store still answers")
	}
	again, err := s.Private(ctx, "agt_a")
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := again.Documents(ctx); err != nil || len(ds) != 0 {
		t.Errorf("agt_a's documents after Drop: %v, %v; want none", ds, err)
	}
	if r := search(t, []Scope{{again, corral.SourcePrivate}}, Query{Text: "parental leave", Weak: true, Embed: embedder}); len(r.Items) != 0 {
		t.Errorf("agt_a's search after Drop found %v", docIDs(r))
	}
	// The others are untouched.
	for name, x := range map[string]*Index{"agt_b": b, "library": s.Library()} {
		if ds, err := x.Documents(ctx); err != nil || len(ds) != 1 {
			t.Errorf("%s's documents after agt_a's Drop: %v, %v", name, ds, err)
		}
	}
	// An agent whose store was never opened drops without error.
	if err := s.Drop("agt_never"); err != nil {
		t.Errorf("Drop(agt_never): %v", err)
	}
}

func TestStoresClose(t *testing.T) {
	ctx := context.Background()
	s, err := OpenStores(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var opened []*Index
	for _, id := range []string{"agt_a", "agt_b"} {
		x, err := s.Private(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, x)
	}
	opened = append(opened, s.Library())
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, x := range opened {
		if _, err := x.Documents(ctx); err == nil {
			t.Errorf("store %d answers after Close", i)
		}
	}
}
