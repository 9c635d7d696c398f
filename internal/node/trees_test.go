package node_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"corral"
	"corral/internal/kerneltest"
	"corral/internal/node"
	"corral/internal/workspace"
)

// newNode is a node over a fresh data directory; its staged trees are
// removed (with their mounts) when the test ends.
func newNode(t *testing.T) (*node.Local, string) {
	t.Helper()
	data := t.TempDir()
	l, err := node.New(node.Config{Data: data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stages, _ := filepath.Glob(filepath.Join(data, "stages", "*"))
		for _, st := range stages {
			workspace.RemoveStage(st)
		}
	})
	return l, data
}

// TestIDsAreNeverPaths: every id that names a place on the node's disk is
// checked, so an agent or stage id can never reach outside the node's
// directories; nothing is made anywhere for a bad one.
func TestIDsAreNeverPaths(t *testing.T) {
	ctx := context.Background()
	l, data := newNode(t)
	for _, id := range []string{"", "..", "../x", "a/b", "/etc", ".hidden", "a\x00b"} {
		calls := []struct {
			name string
			call func() error
		}{
			{"Stage agent", func() error { return l.Stage(ctx, corral.StageSpec{ID: "stg_1", AgentID: id}) }},
			{"Stage stage", func() error { return l.Stage(ctx, corral.StageSpec{ID: id, AgentID: "agt_1"}) }},
			{"ReopenStage", func() error { return l.ReopenStage(ctx, id, "stg_1") }},
			{"Manifest", func() error { _, err := l.Manifest(ctx, id, "stg_1", corral.ClassPolicy{}); return err }},
			{"Diffs", func() error { _, err := l.Diffs(ctx, "agt_1", id, nil); return err }},
			{"Apply", func() error {
				_, err := l.Apply(ctx, corral.ApplyRequest{AgentID: id, StageID: "stg_1", ID: "chg_1", Entries: []corral.ChangeEntry{{Path: "f", Op: "create"}}})
				return err
			}},
			{"DiscardStage", func() error { return l.DiscardStage(ctx, id) }},
			{"DropAgent", func() error { return l.DropAgent(ctx, id) }},
			{"ReadFile", func() error { _, _, err := l.ReadFile(ctx, corral.FileScope{AgentID: id}, "f"); return err }},
			{"WriteFile", func() error {
				_, err := l.WriteFile(ctx, corral.FileWrite{AgentID: id, Path: "f", Content: []byte("x")})
				return err
			}},
			{"DeleteFile", func() error { _, err := l.DeleteFile(ctx, id, "f", false, nil); return err }},
			{"Import", func() error { _, err := l.Import(ctx, id, "application/x-tar", bytes.NewReader(nil), nil); return err }},
			{"Archive", func() error { return l.Archive(ctx, corral.FileScope{AgentID: id}, &bytes.Buffer{}) }},
			{"CanClone", func() error { return l.CanClone(ctx, id) }},
			{"Commit", func() error { _, err := l.Commit(ctx, id, corral.CommitSpec{Paths: []string{"f"}}); return err }},
			{"Log", func() error { _, err := l.Log(ctx, id, 1); return err }},
			{"Push", func() error { _, err := l.Push(ctx, id, "https://example.com/r.git", "main", nil); return err }},
			{"Session", func() error { _, err := l.Session(ctx, id); return err }},
		}
		for _, c := range calls {
			if err := c.call(); corral.ErrorCode(err) != corral.EINVALID {
				t.Errorf("%s with id %q: %v, want EINVALID", c.name, id, err)
			}
		}
	}
	for _, d := range []string{"workspaces", "stages", "journals"} {
		ents, _ := os.ReadDir(filepath.Join(data, d))
		if len(ents) != 0 {
			t.Errorf("%s/ holds %d entries after bad ids only", d, len(ents))
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(data), "x")); !os.IsNotExist(err) {
		t.Errorf("something was made beside the data directory (%v)", err)
	}
}

// TestAnEditUnderARunIsNeverOverwritten: a person uploads a file while a
// run works on a copy of the workspace that changes the same file; the
// run's change set then conflicts on it, nothing of it is applied, and the
// upload stays. Without the stage hearing of the upload (keepBases), the
// run's manifest would take the uploaded file as its base and overwrite it.
func TestAnEditUnderARunIsNeverOverwritten(t *testing.T) {
	ctx := context.Background()
	l, data := newNode(t)
	const agent, stage = "agt_edit", "chg_edit"
	if _, err := l.WriteFile(ctx, corral.FileWrite{AgentID: agent, Path: "notes.txt", Content: []byte("one\n")}); err != nil {
		t.Fatal(err)
	}
	if err := l.Stage(ctx, corral.StageSpec{ID: stage, AgentID: agent}); err != nil {
		kerneltest.Skip(t, "staging needs overlayfs or a copy: %v", err)
	}
	// The run edits its tree; the person uploads meanwhile.
	if err := os.WriteFile(filepath.Join(data, "stages", stage, "tree", "notes.txt"), []byte("run's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "stages", stage, "tree", "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteFile(ctx, corral.FileWrite{AgentID: agent, Path: "notes.txt", Content: []byte("person's\n")}); err != nil {
		t.Fatal(err)
	}
	m, err := l.Manifest(ctx, agent, stage, corral.ClassPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 2 {
		t.Fatalf("manifest = %+v, want notes.txt and new.txt", m.Entries)
	}
	// A diff never shows content the run did not see: notes.txt's base is
	// gone from the workspace, so it has none.
	for _, e := range m.Entries {
		if wantDiff := e.Path == "new.txt"; e.Class != corral.ClassOrdinary || (e.Diff != "") != wantDiff {
			t.Errorf("entry %s: class %q, diff %q; want an ordinary entry, with a diff: %v", e.Path, e.Class, e.Diff, wantDiff)
		}
	}
	res, err := l.Apply(ctx, corral.ApplyRequest{AgentID: agent, StageID: stage, ID: stage, Entries: m.Entries})
	if corral.ErrorCode(err) != corral.ECONFLICT {
		t.Fatalf("Apply = %v, want ECONFLICT", err)
	}
	if _, ok := res.Conflicts["notes.txt"]; !ok || len(res.Conflicts) != 1 {
		t.Fatalf("conflicts = %v, want notes.txt only", res.Conflicts)
	}
	_, b, err := l.ReadFile(ctx, corral.FileScope{AgentID: agent}, "notes.txt")
	if err != nil || string(b) != "person's\n" {
		t.Fatalf("notes.txt = %q, %v; want the upload", b, err)
	}
	if _, _, err := l.ReadFile(ctx, corral.FileScope{AgentID: agent}, "new.txt"); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("new.txt after a refused apply: %v, want ENOTFOUND (all or nothing)", err)
	}
	// The entry that did not conflict applies on its own.
	var rest []corral.ChangeEntry
	for _, e := range m.Entries {
		if e.Path == "new.txt" {
			rest = append(rest, e)
		}
	}
	if _, err := l.Apply(ctx, corral.ApplyRequest{AgentID: agent, StageID: stage, ID: stage, Entries: rest}); err != nil {
		t.Fatalf("Apply of new.txt: %v", err)
	}
	if _, b, err := l.ReadFile(ctx, corral.FileScope{AgentID: agent}, "new.txt"); err != nil || string(b) != "new\n" {
		t.Fatalf("new.txt = %q, %v", b, err)
	}
	if err := l.DiscardStage(ctx, stage); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, "stages", stage)); !os.IsNotExist(err) {
		t.Fatalf("the discarded stage is still there (%v)", err)
	}
}

// TestSecretsAreTheEditors: a scope that does not show secrets never
// sees a secret file, by name or in a listing; one that does, sees it.
func TestSecretsAreTheEditors(t *testing.T) {
	ctx := context.Background()
	l, _ := newNode(t)
	const agent = "agt_sec"
	for _, f := range []string{".env", "keys/id.pem", "readme.md"} {
		if _, err := l.WriteFile(ctx, corral.FileWrite{AgentID: agent, Path: f, Content: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		scope corral.FileScope
		see   map[string]bool
	}{
		{"viewer", corral.FileScope{AgentID: agent, Secrets: []string{"*.pem"}}, map[string]bool{".env": false, "keys/id.pem": false, "readme.md": true}},
		{"editor", corral.FileScope{AgentID: agent, Secrets: []string{"*.pem"}, ShowSecrets: true}, map[string]bool{".env": true, "keys/id.pem": true, "readme.md": true}},
		{"viewer, no globs", corral.FileScope{AgentID: agent}, map[string]bool{".env": false, "keys/id.pem": true, "readme.md": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for p, want := range tt.see {
				_, _, err := l.ReadFile(ctx, tt.scope, p)
				if got := err == nil; got != want {
					t.Errorf("ReadFile(%s) = %v, want seen %v", p, err, want)
				}
			}
			list, _, err := l.ReadFile(ctx, tt.scope, "")
			if err != nil {
				t.Fatal(err)
			}
			listed := map[string]bool{}
			for _, f := range list {
				listed[f.Name] = true
			}
			if listed[".env"] != tt.see[".env"] || !listed["readme.md"] {
				t.Errorf("listing = %v", list)
			}
		})
	}
}

// mounted says whether anything is mounted at or under dir.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte(" "+dir))
}

// TestDropAgent: a deleted agent's node keeps nothing of it: its
// workspace, its staged trees (one still open for a run, one kept for a
// change set's review, both mounted) and its journal go, their mounts
// first; another agent's workspace and staged tree stay. Dropping again,
// or an agent the node never held, is not an error.
func TestDropAgent(t *testing.T) {
	ctx := context.Background()
	l, data := newNode(t)
	for _, agent := range []string{"agt_gone", "agt_kept"} {
		if _, err := l.WriteFile(ctx, corral.FileWrite{AgentID: agent, Path: "notes.txt", Content: []byte(agent + "\n")}); err != nil {
			t.Fatal(err)
		}
		if err := l.Stage(ctx, corral.StageSpec{ID: "chg_review_" + agent, AgentID: agent}); err != nil {
			kerneltest.Skip(t, "staging needs overlayfs or a copy: %v", err)
		}
		tree := filepath.Join(data, "stages", "chg_review_"+agent, "tree")
		if err := os.WriteFile(filepath.Join(tree, "changed.txt"), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Manifest(ctx, agent, "chg_review_"+agent, corral.ClassPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Stage(ctx, corral.StageSpec{ID: "chg_open", AgentID: "agt_gone"}); err != nil {
		t.Fatal(err)
	}
	if err := l.DropAgent(ctx, "agt_gone"); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"workspaces/agt_gone", "stages/chg_review_agt_gone", "stages/chg_open", "journals/agt_gone"} {
		if _, err := os.Lstat(filepath.Join(data, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
		if mounted(t, filepath.Join(data, gone)) {
			t.Errorf("something is still mounted under %s", gone)
		}
	}
	if _, b, err := l.ReadFile(ctx, corral.FileScope{AgentID: "agt_kept"}, "notes.txt"); err != nil || string(b) != "agt_kept\n" {
		t.Fatalf("the other agent's file: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(data, "stages", "chg_review_agt_kept", "tree", "changed.txt")); err != nil {
		t.Fatalf("the other agent's staged tree: %v", err)
	}
	// The dropped agent's workspace is not busy any more: a stage it held
	// open is forgotten, so a clone into a new (empty) workspace may land.
	if err := l.CanClone(ctx, "agt_gone"); err != nil {
		t.Fatalf("after the drop, CanClone = %v", err)
	}
	for _, agent := range []string{"agt_gone", "agt_never"} {
		if err := l.DropAgent(ctx, agent); err != nil {
			t.Errorf("DropAgent(%s) again = %v, want nil", agent, err)
		}
	}
}
