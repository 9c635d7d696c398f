package nodetest

// The cases of corral.Trees: files, imports, archives, deletes, staged
// trees from stage to apply, dropped agents and moved workspaces.

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"corral"
	"corral/internal/kerneltest"
)

// write writes files into the agent's workspace as a person would.
func write(t *testing.T, tr corral.Trees, agent string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		if _, err := tr.WriteFile(acting, corral.FileWrite{AgentID: agent, Path: p, Content: []byte(content)}); err != nil {
			t.Fatalf("WriteFile(%s): %v", p, err)
		}
	}
}

// read is a file of the agent's workspace, as its editor sees it.
func read(t *testing.T, tr corral.Trees, agent, p string) string {
	t.Helper()
	files, data, err := tr.ReadFile(acting, corral.FileScope{AgentID: agent, ShowSecrets: true}, p)
	if err != nil || files != nil {
		t.Fatalf("ReadFile(%s) = %v, %q, %v; want a file", p, files, data, err)
	}
	return string(data)
}

// names lists a directory of the workspace as scope sees it: name, and /
// after a directory's.
func names(t *testing.T, tr corral.Trees, scope corral.FileScope, dir string) []string {
	t.Helper()
	files, data, err := tr.ReadFile(acting, scope, dir)
	if err != nil || data != nil {
		t.Fatalf("ReadFile(%q) = %v, %q, %v; want a listing", dir, files, data, err)
	}
	out := []string{}
	for _, f := range files {
		if f.Dir {
			out = append(out, f.Name+"/")
		} else {
			out = append(out, f.Name)
		}
	}
	return out
}

// stage stages the agent's workspace as the tree id, where a staged tree
// can be made.
func stage(t *testing.T, tr corral.Trees, agent, id string) {
	t.Helper()
	if err := tr.Stage(acting, corral.StageSpec{ID: id, AgentID: agent}); err != nil {
		kerneltest.Skip(t, "staging needs overlayfs or a copy: %v", err)
	}
}

// edit writes a file into a staged tree as its run would.
func edit(t *testing.T, s Subject, stageID, p, content string) {
	t.Helper()
	name := filepath.Join(s.Tree(stageID), p)
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testFiles: a file written reads back; a directory lists sorted, secret
// files hidden from who may not see them (as if they did not exist); bad
// and missing paths are told apart.
func testFiles(t *testing.T, newSubject NewSubject) {
	tr := newSubject(t, Setup{}).Trees
	const agent = "agt_files"
	write(t, tr, agent, map[string]string{"b.txt": "one\n", "dir/c.txt": "two\n", ".env": "KEY=1\n", "keys/id": "secret\n"})
	if got := read(t, tr, agent, "b.txt"); got != "one\n" {
		t.Fatalf("b.txt = %q, want what was written", got)
	}
	if got := read(t, tr, agent, "dir/c.txt"); got != "two\n" {
		t.Fatalf("dir/c.txt = %q, want what was written", got)
	}
	editor := corral.FileScope{AgentID: agent, Secrets: []string{"keys/*"}, ShowSecrets: true}
	viewer := corral.FileScope{AgentID: agent, Secrets: []string{"keys/*"}}
	if got, want := names(t, tr, editor, ""), []string{".env", "b.txt", "dir/", "keys/"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("the editor's listing = %q, want %q", got, want)
	}
	if got, want := names(t, tr, viewer, ""), []string{"b.txt", "dir/", "keys/"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("the viewer's listing = %q, want %q", got, want)
	}
	if got, want := names(t, tr, viewer, "keys"), []string{}; !reflect.DeepEqual(got, want) {
		t.Fatalf("the viewer's keys/ = %q, want nothing", got)
	}
	errs := []struct {
		name  string
		scope corral.FileScope
		path  string
		want  string
	}{
		{"a missing file", editor, "missing.txt", corral.ENOTFOUND},
		{"a secret file, to a viewer", viewer, ".env", corral.ENOTFOUND},
		{"a secret of the agent's, to a viewer", viewer, "keys/id", corral.ENOTFOUND},
		{"a path out of the workspace", editor, "../x", corral.ENAME},
		{"an absolute path", editor, "/etc/passwd", corral.ENAME},
		{"a bad agent id", corral.FileScope{AgentID: "../agt"}, "b.txt", corral.EINVALID},
	}
	for _, e := range errs {
		_, _, err := tr.ReadFile(acting, e.scope, e.path)
		wantCode(t, "ReadFile of "+e.name, err, e.want)
	}
	_, err := tr.WriteFile(acting, corral.FileWrite{AgentID: agent, Path: "", Content: []byte("x")})
	wantCode(t, "WriteFile of no path", err, corral.EINVALID)
	_, err = tr.WriteFile(acting, corral.FileWrite{AgentID: agent, Path: "big", Content: make([]byte, corral.MaxFile+1)})
	wantCode(t, "WriteFile past MaxFile", err, corral.ETOOLARGE)
}

// testImport: an archive lands all of it, told by its content type or its
// first bytes; importing it again changes nothing; what is no archive
// lands nothing.
func testImport(t *testing.T, newSubject NewSubject) {
	tr := newSubject(t, Setup{}).Trees
	const agent = "agt_import"
	files := map[string]string{"readme.md": "hello\n", "src/main.go": "package main\n"}
	res, err := tr.Import(acting, agent, "application/x-tar", bytes.NewReader(TarOf(t, files)), nil)
	if err != nil || res.Files != 2 || res.Changed != 2 || res.Bytes != int64(len("hello\n")+len("package main\n")) {
		t.Fatalf("Import = %+v, %v; want 2 files of 19 bytes, both changed", res, err)
	}
	for p, want := range files {
		if got := read(t, tr, agent, p); got != want {
			t.Fatalf("imported %s = %q, want %q", p, got, want)
		}
	}
	res, err = tr.Import(acting, agent, "", bytes.NewReader(GzipOf(t, TarOf(t, files))), nil)
	if err != nil || res.Files != 2 || res.Changed != 0 {
		t.Fatalf("Import of the same files, as a tar.gz told by its bytes = %+v, %v; want 2 files, none changed", res, err)
	}
	_, err = tr.Import(acting, agent, "", strings.NewReader("not an archive"), nil)
	wantCode(t, "Import of no archive", err, corral.EINVALID)
	if got, want := names(t, tr, corral.FileScope{AgentID: agent}, ""), []string{"readme.md", "src/"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after a refused import the workspace holds %q, want %q", got, want)
	}
}

// testArchive: the workspace comes back as a tar.gz of what the scope may
// see.
func testArchive(t *testing.T, newSubject NewSubject) {
	tr := newSubject(t, Setup{}).Trees
	const agent = "agt_archive"
	write(t, tr, agent, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", ".env": "KEY=1\n"})
	for _, tt := range []struct {
		name  string
		scope corral.FileScope
		want  map[string]string
	}{
		{"a viewer's", corral.FileScope{AgentID: agent, Name: "agent"}, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"}},
		{"an editor's", corral.FileScope{AgentID: agent, Name: "agent", ShowSecrets: true}, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", ".env": "KEY=1\n"}},
	} {
		var b bytes.Buffer
		if err := tr.Archive(acting, tt.scope, &b); err != nil {
			t.Fatalf("Archive (%s): %v", tt.name, err)
		}
		if got := FilesOfTarGz(t, b.Bytes()); !reflect.DeepEqual(got, tt.want) {
			t.Fatalf("%s archive holds %v, want %v", tt.name, got, tt.want)
		}
	}
	err := tr.Archive(acting, corral.FileScope{AgentID: "../agt"}, &bytes.Buffer{})
	wantCode(t, "Archive of a bad agent id", err, corral.EINVALID)
}

// testDelete: a file, then a directory with what it holds; what is not
// there is ENOTFOUND, a directory needs recursive.
func testDelete(t *testing.T, newSubject NewSubject) {
	tr := newSubject(t, Setup{}).Trees
	const agent = "agt_delete"
	write(t, tr, agent, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "d/e/c.txt": "c\n"})
	res, err := tr.DeleteFile(acting, agent, "a.txt", false, nil)
	if err != nil || res.Files != 1 || res.Dirs != 0 {
		t.Fatalf("DeleteFile(a.txt) = %+v, %v; want one file", res, err)
	}
	_, _, err = tr.ReadFile(acting, corral.FileScope{AgentID: agent}, "a.txt")
	wantCode(t, "ReadFile of a deleted file", err, corral.ENOTFOUND)
	_, err = tr.DeleteFile(acting, agent, "a.txt", false, nil)
	wantCode(t, "DeleteFile of a deleted file", err, corral.ENOTFOUND)
	_, err = tr.DeleteFile(acting, agent, "d", false, nil)
	wantCode(t, "DeleteFile of a directory, not recursive", err, corral.ECONFLICT)
	res, err = tr.DeleteFile(acting, agent, "d", true, nil)
	if err != nil || res.Files != 2 || res.Dirs != 2 {
		t.Fatalf("DeleteFile(d, recursive) = %+v, %v; want 2 files and 2 directories", res, err)
	}
	if got := names(t, tr, corral.FileScope{AgentID: agent}, ""); len(got) != 0 {
		t.Fatalf("after the deletes the workspace holds %q", got)
	}
	_, err = tr.DeleteFile(acting, agent, "", true, nil)
	wantCode(t, "DeleteFile of the workspace itself", err, corral.EINVALID)
}

// testStageManifestApply: a run's tree from staging to apply: its
// manifest measures what the run changed, with diffs; Diffs makes the
// same diffs again; the apply writes them into the workspace; a discarded
// tree is gone.
func testStageManifestApply(t *testing.T, newSubject NewSubject) {
	s := newSubject(t, Setup{})
	tr := s.Trees
	const agent, stg = "agt_stage", "chg_stage"
	write(t, tr, agent, map[string]string{"notes.txt": "one\n", "gone.txt": "bye\n"})
	stage(t, tr, agent, stg)
	if err := tr.ReopenStage(acting, agent, stg); err != nil {
		t.Fatalf("ReopenStage of an open tree: %v", err)
	}
	edit(t, s, stg, "notes.txt", "one\ntwo\n")
	edit(t, s, stg, "new.txt", "new\n")
	if err := os.Remove(filepath.Join(s.Tree(stg), "gone.txt")); err != nil {
		t.Fatal(err)
	}
	m, err := tr.Manifest(acting, agent, stg, corral.ClassPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range m.Entries {
		got = append(got, e.Path+" "+e.Op+" "+e.Class)
		if e.Diff == "" {
			t.Errorf("entry %s has no diff", e.Path)
		}
	}
	if want := []string{"gone.txt delete risky", "new.txt create ordinary", "notes.txt modify ordinary"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("manifest = %q, want %q", got, want)
	}
	bare := append([]corral.ChangeEntry(nil), m.Entries...)
	for i := range bare {
		bare[i].Diff = ""
	}
	if diffs, err := tr.Diffs(acting, agent, stg, bare); err != nil || !reflect.DeepEqual(diffs, m.Entries) {
		t.Fatalf("Diffs = %+v, %v; want the manifest's %+v", diffs, err, m.Entries)
	}
	res, err := tr.Apply(acting, corral.ApplyRequest{AgentID: agent, StageID: stg, ID: stg, Entries: m.Entries})
	if err != nil || len(res.Conflicts) != 0 {
		t.Fatalf("Apply = %+v, %v", res, err)
	}
	if got, want := names(t, tr, corral.FileScope{AgentID: agent}, ""), []string{"new.txt", "notes.txt"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the apply the workspace holds %q, want %q", got, want)
	}
	if got := read(t, tr, agent, "notes.txt"); got != "one\ntwo\n" {
		t.Fatalf("after the apply notes.txt = %q", got)
	}
	if err := tr.DiscardStage(acting, stg); err != nil {
		t.Fatal(err)
	}
	if err := tr.DiscardStage(acting, stg); err != nil {
		t.Fatalf("DiscardStage of a discarded tree: %v, want none", err)
	}
	wantCode(t, "ReopenStage of a discarded tree", tr.ReopenStage(acting, agent, stg), corral.ENOTFOUND)
}

// testApplyConflict: a file a person changed while the run worked on it
// conflicts: nothing is applied, the conflict is named beside the error,
// and the person's edit stays.
func testApplyConflict(t *testing.T, newSubject NewSubject) {
	s := newSubject(t, Setup{})
	tr := s.Trees
	const agent, stg = "agt_conflict", "chg_conflict"
	write(t, tr, agent, map[string]string{"notes.txt": "one\n"})
	stage(t, tr, agent, stg)
	edit(t, s, stg, "notes.txt", "run's\n")
	edit(t, s, stg, "new.txt", "new\n")
	write(t, tr, agent, map[string]string{"notes.txt": "person's\n"})
	m, err := tr.Manifest(acting, agent, stg, corral.ClassPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Apply(acting, corral.ApplyRequest{AgentID: agent, StageID: stg, ID: stg, Entries: m.Entries})
	wantCode(t, "Apply over a person's edit", err, corral.ECONFLICT)
	if _, ok := res.Conflicts["notes.txt"]; !ok || len(res.Conflicts) != 1 {
		t.Fatalf("conflicts = %v, want notes.txt's", res.Conflicts)
	}
	if got := read(t, tr, agent, "notes.txt"); got != "person's\n" {
		t.Fatalf("after the refused apply notes.txt = %q, want the person's", got)
	}
	_, _, err = tr.ReadFile(acting, corral.FileScope{AgentID: agent}, "new.txt")
	wantCode(t, "ReadFile of a file the refused apply carried", err, corral.ENOTFOUND)
}

// testNoStage: a tree that was never staged.
func testNoStage(t *testing.T, newSubject NewSubject) {
	tr := newSubject(t, Setup{}).Trees
	const agent = "agt_nostage"
	write(t, tr, agent, map[string]string{"a.txt": "a\n"})
	wantCode(t, "ReopenStage", tr.ReopenStage(acting, agent, "chg_none"), corral.ENOTFOUND)
	_, err := tr.Manifest(acting, agent, "chg_none", corral.ClassPolicy{})
	wantCode(t, "Manifest", err, corral.ENOTFOUND)
	wantCode(t, "DiscardStage", tr.DiscardStage(acting, "chg_none"), "")
	wantCode(t, "Stage with a bad id", tr.Stage(acting, corral.StageSpec{ID: "../chg", AgentID: agent}), corral.EINVALID)
}

// testDropAgent: everything of an agent goes, its open staged trees too;
// dropping what is gone is not an error.
func testDropAgent(t *testing.T, newSubject NewSubject) {
	tr := newSubject(t, Setup{}).Trees
	const agent, stg = "agt_drop", "chg_drop"
	write(t, tr, agent, map[string]string{"a.txt": "a\n"})
	stage(t, tr, agent, stg)
	if err := tr.DropAgent(acting, agent); err != nil {
		t.Fatal(err)
	}
	_, _, err := tr.ReadFile(acting, corral.FileScope{AgentID: agent}, "a.txt")
	wantCode(t, "ReadFile of a dropped agent's file", err, corral.ENOTFOUND)
	wantCode(t, "ReopenStage of a dropped agent's tree", tr.ReopenStage(acting, agent, stg), corral.ENOTFOUND)
	wantCode(t, "DropAgent again", tr.DropAgent(acting, agent), "")
}

// testMoveWorkspace: a workspace exported as a tar lands whole as another
// agent's, only into an empty one.
func testMoveWorkspace(t *testing.T, newSubject NewSubject) {
	tr := newSubject(t, Setup{}).Trees
	const from, to = "agt_from", "agt_to"
	files := map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", ".env": "KEY=1\n"}
	write(t, tr, from, files)
	var tarball bytes.Buffer
	if err := tr.ExportWorkspace(acting, from, &tarball); err != nil {
		t.Fatal(err)
	}
	if err := tr.ImportWorkspace(acting, to, bytes.NewReader(tarball.Bytes())); err != nil {
		t.Fatal(err)
	}
	for p, want := range files {
		if got := read(t, tr, to, p); got != want {
			t.Fatalf("moved %s = %q, want %q", p, got, want)
		}
	}
	err := tr.ImportWorkspace(acting, to, bytes.NewReader(tarball.Bytes()))
	wantCode(t, "ImportWorkspace into a workspace that is not empty", err, corral.ECONFLICT)
	err = tr.ImportWorkspace(acting, "agt_other", strings.NewReader("not a tar"))
	wantCode(t, "ImportWorkspace of no tar", err, corral.EINVALID)
	err = tr.ExportWorkspace(acting, "agt_none", &bytes.Buffer{})
	wantCode(t, "ExportWorkspace of no workspace", err, corral.ENOTFOUND)
}
