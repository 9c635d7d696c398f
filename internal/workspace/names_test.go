//go:build linux

package workspace

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFlagNames(t *testing.T) {
	entry := func(p, op string) Entry { return Entry{Path: p, Op: op} }
	existing := map[string][]string{"": {"Docs", "README.md"}, "Docs": {"guide.md"}}
	list := func(dir string) ([]string, error) { return existing[dir], nil }
	tests := []struct {
		name  string
		m     Manifest
		flags map[string][]string // path -> flags wanted (nil: none)
	}{
		{"plain", Manifest{entry("src/a.go", OpCreate)}, map[string][]string{"src/a.go": nil}},
		{"dotfile", Manifest{entry(".gitignore", OpCreate)}, map[string][]string{".gitignore": nil}},
		{"control", Manifest{entry("a\x01b", OpCreate)}, map[string][]string{"a\x01b": {FlagName}}},
		{"not nfc", Manifest{entry("cafe\u0301", OpCreate)}, map[string][]string{"cafe\u0301": {FlagName}}},
		{"bad directory", Manifest{entry("GIT~1/x", OpModify)}, map[string][]string{"GIT~1/x": {FlagName}}},
		{"collide in set", Manifest{entry("a.txt", OpCreate), entry("A.TXT", OpCreate)},
			map[string][]string{"a.txt": {FlagCollision}, "A.TXT": {FlagCollision}}},
		{"collide by directory", Manifest{entry("src/a", OpCreate), entry("SRC/b", OpCreate)},
			map[string][]string{"src/a": {FlagCollision}, "SRC/b": {FlagCollision}}},
		{"nfc collision", Manifest{entry("caf\u00e9", OpCreate), entry("cafe\u0301", OpCreate)},
			map[string][]string{"caf\u00e9": {FlagCollision}, "cafe\u0301": {FlagName, FlagCollision}}},
		{"delete does not collide", Manifest{entry("a.txt", OpDelete), entry("A.txt", OpCreate)},
			map[string][]string{"a.txt": nil, "A.txt": nil}},
		{"collide with workspace", Manifest{entry("readme.md", OpCreate)}, map[string][]string{"readme.md": {FlagCollision}}},
		{"collide with workspace directory", Manifest{entry("docs/new.md", OpCreate)}, map[string][]string{"docs/new.md": {FlagCollision}}},
		{"deeper in an existing directory", Manifest{entry("Docs/GUIDE.md", OpCreate)}, map[string][]string{"Docs/GUIDE.md": {FlagCollision}}},
		{"modify of an existing file", Manifest{entry("README.md", OpModify)}, map[string][]string{"README.md": nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := slices.Clone(tc.m)
			if err := flagNames(m, list); err != nil {
				t.Fatal(err)
			}
			for _, e := range m {
				want := tc.flags[e.Path]
				if !slices.Equal(e.Flags, want) {
					t.Errorf("%q flags = %v, want %v (note %q)", e.Path, e.Flags, want, e.Note)
				}
				if (len(e.Flags) > 0) != (e.Note != "") {
					t.Errorf("%q: flags %v with note %q", e.Path, e.Flags, e.Note)
				}
			}
		})
	}
}

func TestClassifyNamesAndCollisions(t *testing.T) {
	tests := []struct {
		name string
		e    Entry
		want string
	}{
		{"a name flag protects", Entry{Path: "x", Op: OpCreate, Flags: []string{FlagName}}, ClassProtected},
		{"a bad name protects without its flag", Entry{Path: "evil\u202etxt", Op: OpCreate}, ClassProtected},
		{"invalid utf-8 protects", Entry{Path: "a\xff", Op: OpCreate}, ClassProtected},
		{"a collision is risky", Entry{Path: "a.txt", Op: OpCreate, Flags: []string{FlagCollision}}, ClassRisky},
		{"stale protects", Entry{Path: "a.txt", Op: OpDelete, Flags: []string{FlagStale}}, ClassProtected},
		{"a dotfile is ordinary", Entry{Path: ".gitignore", Op: OpCreate}, ClassOrdinary},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.e, ClassPolicy{}); got != tc.want {
				t.Fatalf("Classify(%+v) = %s, want %s", tc.e, got, tc.want)
			}
		})
	}
}

func TestEntryJSONKeepsBytes(t *testing.T) {
	for _, p := range []string{"plain.txt", "bad\xffname", "\xc3\x28", "caf\u00e9"} {
		b, err := json.Marshal(Entry{Path: p, Op: OpCreate})
		if err != nil {
			t.Fatal(err)
		}
		var e Entry
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		if e.Path != p {
			t.Errorf("%q came back as %q", p, e.Path)
		}
	}
}

// TestKeepBases: an edit to the persistent workspace while a run is staged
// makes the run's entry for that path keep what the run saw, so applying
// it conflicts instead of overwriting the edit.
func TestKeepBases(t *testing.T) {
	persistent := t.TempDir()
	writeFiles(t, persistent, map[string]string{"f.txt": "original\n", "gone.txt": "x\n", "del.txt": "d\n"})
	s := newTestStage(t, persistent, false, StageOptions{})
	tree := s.Tree()
	writeFiles(t, tree, map[string]string{"f.txt": "run\n", "new.txt": "run new\n", "appeared.txt": "by the run\n"})
	if err := os.Remove(filepath.Join(tree, "del.txt")); err != nil {
		t.Fatal(err)
	}
	// The editor, meanwhile: each write told to the stage first.
	if err := s.KeepBases([]string{"f.txt", "new.txt", "del.txt", "appeared.txt"}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, persistent, map[string]string{"f.txt": "editor\n", "new.txt": "editor new\n", "del.txt": "edited\n", "appeared.txt": "editor too\n"})
	// A second record of the same path keeps the first.
	if err := s.KeepBases([]string{"f.txt"}); err != nil {
		t.Fatal(err)
	}
	m, err := s.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Entry{}
	for _, e := range m {
		got[e.Path] = e
	}
	if e := got["f.txt"]; e.Op != OpModify || e.OldSHA256 != sha("original\n") {
		t.Errorf("f.txt = %s old %s, want a modify of what the run saw", e.Op, e.OldSHA256)
	}
	if e := got["new.txt"]; e.Op != OpCreate || e.OldSHA256 != "" {
		t.Errorf("new.txt = %s old %q, want a create (the run never saw the editor's file)", e.Op, e.OldSHA256)
	}
	if e := got["del.txt"]; e.Op != OpDelete || e.OldSHA256 != sha("d\n") {
		t.Errorf("del.txt = %s old %s, want a delete of what the run saw", e.Op, e.OldSHA256)
	}
	if e := got["appeared.txt"]; e.Op != OpCreate {
		t.Errorf("appeared.txt = %+v", e)
	}
	// Applying: everything the editor touched conflicts; nothing is lost.
	var entries []Entry
	for _, e := range ClassifyAll(m, ClassPolicy{}) {
		if e.Class != ClassProtected {
			entries = append(entries, e)
		}
	}
	conflicts, err := Conflicts(persistent, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"f.txt", "new.txt", "del.txt", "appeared.txt"} {
		if conflicts[p] == nil {
			t.Errorf("%s does not conflict", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(persistent, "f.txt")); string(b) != "editor\n" {
		t.Fatalf("f.txt = %q", b)
	}
	// Once taken, the manifest's bases are fixed: KeepBases is a no-op.
	if err := s.KeepBases([]string{"gone.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), stageBasesFile)); err != nil {
		t.Fatal(err)
	}
}

// TestKeepBasesStale: the run deletes a file that appeared while it worked:
// the delete is flagged stale, never applied.
func TestKeepBasesStale(t *testing.T) {
	persistent := t.TempDir()
	s := newTestStage(t, persistent, false, StageOptions{})
	if err := s.KeepBases([]string{"late.txt"}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, persistent, map[string]string{"late.txt": "editor\n"})
	// The run sees it (or not: overlayfs leaves that undefined) and deletes it.
	os.Remove(filepath.Join(s.Tree(), "late.txt"))
	m, err := s.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m {
		if e.Path == "late.txt" && (!slices.Contains(e.Flags, FlagStale) || Classify(e, ClassPolicy{}) != ClassProtected) {
			t.Fatalf("late.txt = %+v, want stale and protected", e)
		}
	}
}
