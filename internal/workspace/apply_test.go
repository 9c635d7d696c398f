//go:build linux

package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"corral"
	"corral/internal/kerneltest"
)

// A fixture is a persistent workspace (the before-image) and a change set
// against it. The staged tree holds the new content of every create and
// modify.
type fixture struct {
	name    string
	files   map[string]file   // regular files of the before-image
	links   map[string]string // symbolic links of the before-image: path -> target
	changes []change
	// moved applies from a MoveSource (a fresh copy of the staged tree
	// each time) with one syncfs per phase, as an archive import does.
	moved bool
}

type file struct {
	content string
	mode    fs.FileMode // permission bits; 0 means 0644
}

type change struct {
	op      string
	path    string
	content string      // create and modify
	mode    fs.FileMode // create and modify; 0 means 0644
}

func perm(m fs.FileMode) fs.FileMode {
	if m == 0 {
		return 0o644
	}
	return m
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// fixture1 modifies one file.
func fixture1() fixture {
	return fixture{
		name:    "1 file",
		files:   map[string]file{"a.txt": {content: "alpha\n"}, "keep/k.txt": {content: "keep\n", mode: 0o600}},
		links:   map[string]string{"ln": "keep"},
		changes: []change{{op: OpModify, path: "a.txt", content: "alpha, changed\n"}},
	}
}

// fixture3 creates a file in new nested directories, modifies one (content
// and mode) and deletes one.
func fixture3() fixture {
	return fixture{
		name: "3 files",
		files: map[string]file{
			"b.txt":      {content: "bravo\n"},
			"d.txt":      {content: "delta\n"},
			"keep/k.txt": {content: "keep\n"},
		},
		links: map[string]string{"ln": "keep"},
		changes: []change{
			{op: OpCreate, path: "new/deep/c.txt", content: "charlie\n"},
			{op: OpModify, path: "b.txt", content: "bravo v2\n", mode: 0o755},
			{op: OpDelete, path: "d.txt"},
		},
	}
}

// fixture20 mixes 7 creates (at the root, in an existing directory and in
// new nested directories, one empty), 8 modifies (one changes only the
// mode) and 5 deletes (one emptying a directory).
func fixture20() fixture {
	fx := fixture{
		name: "20 files",
		files: map[string]file{
			"m.txt":           {content: "mode only\n"},
			"h.txt":           {content: "hotel\n"},
			"keep/k.txt":      {content: "keep\n"},
			"keep/deep/u.txt": {content: "untouched\n", mode: 0o640},
		},
		links: map[string]string{"ln": "keep", "src/up": "../keep"},
	}
	for i := range 7 {
		p := fmt.Sprintf("src/f%d.go", i)
		fx.files[p] = file{content: fmt.Sprintf("package f%d\n", i)}
		mode := fs.FileMode(0)
		if i == 3 {
			mode = 0o755
		}
		fx.changes = append(fx.changes, change{op: OpModify, path: p, content: fmt.Sprintf("package f%d // v2\n", i), mode: mode})
	}
	fx.changes = append(fx.changes, change{op: OpModify, path: "m.txt", content: "mode only\n", mode: 0o600})
	for i := range 4 {
		p := fmt.Sprintf("old/g%d.txt", i)
		fx.files[p] = file{content: fmt.Sprintf("golf %d\n", i)}
		fx.changes = append(fx.changes, change{op: OpDelete, path: p})
	}
	fx.changes = append(fx.changes,
		change{op: OpDelete, path: "h.txt"},
		change{op: OpCreate, path: "c0.txt", content: "c0\n"},
		change{op: OpCreate, path: "src/c1.go", content: "package c1\n"},
		change{op: OpCreate, path: "new1/x/y/c2.txt", content: "c2\n", mode: 0o600},
		change{op: OpCreate, path: "new1/x/c3.txt", content: "c3\n"},
		change{op: OpCreate, path: "new1/x/y/z/c4.txt", content: "c4\n"},
		change{op: OpCreate, path: "new2/c5.sh", content: "#!/bin/sh\n", mode: 0o755},
		change{op: OpCreate, path: "empty.txt", content: ""},
	)
	return fx
}

// fixture20Moved is fixture20 applied as an import applies: moved from
// its source, synced in batches.
func fixture20Moved() fixture {
	fx := fixture20()
	fx.name, fx.moved = "20 files moved", true
	return fx
}

func fixtures() []fixture { return []fixture{fixture1(), fixture3(), fixture20(), fixture20Moved()} }

// env is one fixture laid out on disk: the persistent workspace, the
// staged tree, the journal directory and the two images an apply may
// leave.
type env struct {
	fx      fixture
	base    string
	ws      string
	staged  string
	jdir    string
	id      string
	entries []Entry
	before  map[string]string
	after   map[string]string
}

func newEnv(t testing.TB, fx fixture) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{
		fx:     fx,
		base:   base,
		ws:     filepath.Join(base, "ws"),
		staged: filepath.Join(base, "staged"),
		jdir:   filepath.Join(base, "journal"),
		id:     "cs_1",
	}
	staged := map[string]file{}
	for _, c := range fx.changes {
		en := Entry{Path: c.path, Op: c.op, Class: ClassOrdinary}
		if c.op != OpCreate {
			old, ok := fx.files[c.path]
			if !ok {
				t.Fatalf("fixture %s: %s %s of a file not in the before-image", fx.name, c.op, c.path)
			}
			en.OldSHA256, en.OldMode = sum(old.content), perm(old.mode)
		}
		if c.op != OpDelete {
			staged[c.path] = file{content: c.content, mode: c.mode}
			en.NewSHA256, en.Size, en.Mode = sum(c.content), int64(len(c.content)), perm(c.mode)
		}
		e.entries = append(e.entries, en)
	}
	writeTree(t, e.staged, staged, nil)

	e.reset(t)
	e.before = snapshot(t, e.ws)

	// The after-image, made the plain way.
	want := filepath.Join(base, "expected")
	writeTree(t, want, fx.files, fx.links)
	for _, c := range fx.changes {
		p := filepath.Join(want, filepath.FromSlash(c.path))
		if c.op == OpDelete {
			must(t, os.Remove(p))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(c.content), 0o600))
		must(t, os.Chmod(p, perm(c.mode)))
	}
	chmodDirs(t, want)
	e.after = snapshot(t, want)
	return e
}

// reset lays out the before-image again and removes the journal directory.
func (e *env) reset(t testing.TB) {
	t.Helper()
	must(t, os.RemoveAll(e.ws))
	must(t, os.RemoveAll(e.jdir))
	writeTree(t, e.ws, e.fx.files, e.fx.links)
}

func (e *env) apply(hook Hook) error {
	if !e.fx.moved {
		return Apply(e.ws, e.jdir, e.id, e.entries, DirSource(e.staged), hook)
	}
	src := filepath.Join(e.base, "moved")
	if err := os.RemoveAll(src); err != nil {
		return err
	}
	if err := os.CopyFS(src, os.DirFS(e.staged)); err != nil {
		return err
	}
	defer func(n int) { batchSyncMin = n }(batchSyncMin)
	batchSyncMin = 1
	return Apply(e.ws, e.jdir, e.id, e.entries, MoveSource(src), hook)
}

// checkImage fails unless the workspace is exactly want.
func (e *env) checkImage(t testing.TB, want map[string]string, what string) {
	t.Helper()
	if d := diffSnapshots(snapshot(t, e.ws), want); d != "" {
		t.Fatalf("%s: workspace is not the expected image:\n%s", what, d)
	}
}

// checkNoJournal fails unless the journal directory is empty or absent.
func (e *env) checkNoJournal(t testing.TB, what string) {
	t.Helper()
	des, err := os.ReadDir(e.jdir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	must(t, err)
	if len(des) > 0 {
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		t.Fatalf("%s: journal directory is not empty: %v", what, names)
	}
}

func writeTree(t testing.TB, root string, files map[string]file, links map[string]string) {
	t.Helper()
	must(t, os.MkdirAll(root, 0o755))
	for p, f := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(f.content), 0o600))
		must(t, os.Chmod(full, perm(f.mode)))
	}
	for p, target := range links {
		full := filepath.Join(root, filepath.FromSlash(p))
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.Symlink(target, full))
	}
	chmodDirs(t, root)
}

// chmodDirs makes every directory under root 0755, whatever the umask.
func chmodDirs(t testing.TB, root string) {
	t.Helper()
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o755)
	}))
}

// snapshot describes every path under root: type, permission bits, owner
// and content hash, or the target of a link. Links are not followed.
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		owner := fmt.Sprintf("%d:%d", st.Uid, st.Gid)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			snap[rel] = "link -> " + target
		case fi.IsDir():
			snap[rel] = fmt.Sprintf("dir %v %s", fi.Mode(), owner)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			snap[rel] = fmt.Sprintf("file %v %s %s", fi.Mode(), owner, sum(string(data))[:16])
		default:
			snap[rel] = fmt.Sprintf("other %v", fi.Mode())
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return snap
}

func diffSnapshots(got, want map[string]string) string {
	var lines []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			lines = append(lines, fmt.Sprintf("  missing %s (want %s)", p, w))
		} else if g != w {
			lines = append(lines, fmt.Sprintf("  %s: got %s, want %s", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			lines = append(lines, fmt.Sprintf("  extra %s (%s)", p, g))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantCode fails unless err is a *corral.Error with one of the codes.
func wantCode(t testing.TB, err error, codes ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one of %v", codes)
	}
	var ce *corral.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *corral.Error", err, err)
	}
	if !slices.Contains(codes, ce.Code) {
		t.Fatalf("error %v has code %q, want one of %v", err, ce.Code, codes)
	}
}

// recordSteps returns the steps of a clean apply of e (on the before-image,
// left as the after-image).
func recordSteps(t testing.TB, e *env) []string {
	t.Helper()
	e.reset(t)
	var steps []string
	must(t, e.apply(func(s string) error { steps = append(steps, s); return nil }))
	return steps
}

func TestApplyHappyPath(t *testing.T) {
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			e := newEnv(t, fx)
			if err := e.apply(nil); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			e.checkImage(t, e.after, "after Apply")
			e.checkNoJournal(t, "after Apply")

			// The same change set again: every base has moved on.
			err := e.apply(nil)
			wantCode(t, err, corral.ECONFLICT)
			e.checkImage(t, e.after, "after a second Apply")
			e.checkNoJournal(t, "after a second Apply")

			if err := Recover(e.ws, e.jdir, nil); err != nil {
				t.Fatalf("Recover with nothing to do: %v", err)
			}
			e.checkImage(t, e.after, "after Recover")
		})
	}
}

func TestApplyConflicts(t *testing.T) {
	tests := []struct {
		name   string
		path   string // the path the error must name
		mutate func(t *testing.T, e *env)
	}{
		{"modified after staging", "b.txt", func(t *testing.T, e *env) {
			must(t, os.WriteFile(filepath.Join(e.ws, "b.txt"), []byte("someone else\n"), 0o644))
		}},
		{"modified file gone", "b.txt", func(t *testing.T, e *env) {
			must(t, os.Remove(filepath.Join(e.ws, "b.txt")))
		}},
		{"modified file now a directory", "b.txt", func(t *testing.T, e *env) {
			must(t, os.Remove(filepath.Join(e.ws, "b.txt")))
			must(t, os.Mkdir(filepath.Join(e.ws, "b.txt"), 0o755))
		}},
		{"created path exists", "new/deep/c.txt", func(t *testing.T, e *env) {
			must(t, os.MkdirAll(filepath.Join(e.ws, "new/deep"), 0o755))
			must(t, os.WriteFile(filepath.Join(e.ws, "new/deep/c.txt"), []byte("charlie\n"), 0o644))
		}},
		{"created path is a dangling link", "new/deep/c.txt", func(t *testing.T, e *env) {
			must(t, os.MkdirAll(filepath.Join(e.ws, "new/deep"), 0o755))
			must(t, os.Symlink("nowhere", filepath.Join(e.ws, "new/deep/c.txt")))
		}},
		{"created path's directory is a file", "new/deep/c.txt", func(t *testing.T, e *env) {
			must(t, os.WriteFile(filepath.Join(e.ws, "new"), []byte("a file\n"), 0o644))
		}},
		{"deleted file already gone", "d.txt", func(t *testing.T, e *env) {
			must(t, os.Remove(filepath.Join(e.ws, "d.txt")))
		}},
		{"deleted file changed", "d.txt", func(t *testing.T, e *env) {
			must(t, os.WriteFile(filepath.Join(e.ws, "d.txt"), []byte("delta v2\n"), 0o644))
		}},
		// Found only once the journal is written: the apply rolls back.
		{"staged file changed after the manifest", "b.txt", func(t *testing.T, e *env) {
			must(t, os.WriteFile(filepath.Join(e.staged, "b.txt"), []byte("not what was reviewed\n"), 0o644))
		}},
		{"staged file gone", "new/deep/c.txt", func(t *testing.T, e *env) {
			must(t, os.Remove(filepath.Join(e.staged, "new/deep/c.txt")))
		}},
		// The link's target has the reviewed content: only refusing to
		// follow it keeps a file from outside out of the workspace.
		{"staged file replaced by a link", "b.txt", func(t *testing.T, e *env) {
			target := filepath.Join(e.base, "elsewhere")
			must(t, os.WriteFile(target, []byte("bravo v2\n"), 0o644))
			must(t, os.Remove(filepath.Join(e.staged, "b.txt")))
			must(t, os.Symlink(target, filepath.Join(e.staged, "b.txt")))
		}},
		{"staged directory replaced by a link", "new/deep/c.txt", func(t *testing.T, e *env) {
			must(t, os.Rename(filepath.Join(e.staged, "new"), filepath.Join(e.base, "elsewhere")))
			must(t, os.Symlink(filepath.Join(e.base, "elsewhere"), filepath.Join(e.staged, "new")))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fixture3())
			tt.mutate(t, e)
			want := snapshot(t, e.ws)
			err := e.apply(nil)
			wantCode(t, err, corral.ECONFLICT)
			if msg := corral.ErrorMessage(err); !strings.Contains(msg, tt.path) {
				t.Errorf("message %q does not name %s", msg, tt.path)
			}
			e.checkImage(t, want, "after the conflict")
			e.checkNoJournal(t, "after the conflict")
		})
	}
}

func TestApplyInvalid(t *testing.T) {
	good := Entry{Path: "x.txt", Op: OpCreate, NewSHA256: sum("x"), Size: 1, Mode: 0o644, Class: ClassOrdinary}
	with := func(f func(*Entry)) []Entry {
		en := good
		f(&en)
		return []Entry{en}
	}
	type tc struct {
		name    string
		id      string
		entries []Entry
		jdir    string // relative to the test's base; "" means "journal"
	}
	var tests []tc
	for _, p := range []string{"../x", "/etc/passwd", "a/../../x", "a//b", "", ".", "a\x00b", "./a", "a/./b", "a/", "..", "a/.."} {
		tests = append(tests, tc{name: fmt.Sprintf("path %q", p), entries: with(func(en *Entry) { en.Path = p })})
	}
	tests = append(tests,
		tc{name: "protected", entries: with(func(en *Entry) { en.Class = ClassProtected })},
		tc{name: "protected among others", entries: []Entry{good, {Path: ".env", Op: OpCreate, NewSHA256: sum("x"), Mode: 0o644, Class: ClassProtected}}},
		tc{name: "flagged but not protected", entries: with(func(en *Entry) { en.Flags = []string{FlagSymlink} })},
		tc{name: "unclassified", entries: with(func(en *Entry) { en.Class = "" })},
		tc{name: "symlink mode", entries: with(func(en *Entry) { en.Mode = fs.ModeSymlink | 0o777 })},
		tc{name: "unknown op", entries: with(func(en *Entry) { en.Op = "chmod" })},
		tc{name: "create without hash", entries: with(func(en *Entry) { en.NewSHA256 = "" })},
		tc{name: "create with old hash", entries: with(func(en *Entry) { en.OldSHA256 = sum("y") })},
		tc{name: "modify without old hash", entries: with(func(en *Entry) { en.Op = OpModify })},
		tc{name: "delete with new hash", entries: with(func(en *Entry) { en.Op, en.OldSHA256 = OpDelete, sum("y") })},
		tc{name: "bad hash", entries: with(func(en *Entry) { en.NewSHA256 = "zz" })},
		tc{name: "duplicate path", entries: []Entry{good, good}},
		tc{name: "file and directory", entries: []Entry{good, with(func(en *Entry) { en.Path = "x.txt/y" })[0]}},
		tc{name: "reserved name", entries: with(func(en *Entry) { en.Path = "a/" + tempPrefix + "cs_1-0" })},
		tc{name: "no entries"},
		tc{name: "id with a slash", id: "a/b", entries: []Entry{good}},
		tc{name: "id ..", id: "..", entries: []Entry{good}},
		tc{name: "journal inside the workspace", jdir: "ws/.journal", entries: []Entry{good}},
		tc{name: "journal is the workspace", jdir: "ws", entries: []Entry{good}},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fixture1())
			jdir := e.jdir
			if tt.jdir != "" {
				jdir = filepath.Join(e.base, tt.jdir)
			}
			id := e.id
			if tt.id != "" {
				id = tt.id
			}
			err := Apply(e.ws, jdir, id, tt.entries, DirSource(e.staged), nil)
			wantCode(t, err, corral.EINVALID)
			e.checkImage(t, e.before, "after refusing")
			if _, err := os.Stat(e.jdir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("journal directory exists after refusing (stat: %v)", err)
			}
		})
	}
}

func TestApplySymlinkInPath(t *testing.T) {
	tests := []struct {
		name  string
		entry func(e *env, outside string) Entry
		setup func(t *testing.T, e *env, outside string)
		code  string
	}{
		{
			name:  "create under a link to a directory outside",
			setup: func(t *testing.T, e *env, outside string) { must(t, os.Symlink(outside, filepath.Join(e.ws, "out"))) },
			entry: func(e *env, _ string) Entry {
				return Entry{Path: "out/x.txt", Op: OpCreate, NewSHA256: sum("x"), Mode: 0o644, Class: ClassOrdinary}
			},
			code: corral.EINVALID,
		},
		{
			name: "create under a link deeper down",
			setup: func(t *testing.T, e *env, outside string) {
				must(t, os.Symlink(outside, filepath.Join(e.ws, "keep/out")))
			},
			entry: func(e *env, _ string) Entry {
				return Entry{Path: "keep/out/new/x.txt", Op: OpCreate, NewSHA256: sum("x"), Mode: 0o644, Class: ClassOrdinary}
			},
			code: corral.EINVALID,
		},
		{
			// os.Root would follow this link: it stays inside the root.
			name: "modify through a link to a directory inside",
			entry: func(e *env, _ string) Entry {
				return Entry{Path: "ln/k.txt", Op: OpModify, OldSHA256: sum("keep\n"), NewSHA256: sum("x"), Mode: 0o644, Class: ClassOrdinary}
			},
			code: corral.EINVALID,
		},
		{
			name: "modify of a link to a file outside",
			setup: func(t *testing.T, e *env, outside string) {
				must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(e.ws, "s.txt")))
			},
			entry: func(e *env, _ string) Entry {
				return Entry{Path: "s.txt", Op: OpModify, OldSHA256: sum("secret\n"), NewSHA256: sum("x"), Mode: 0o644, Class: ClassOrdinary}
			},
			code: corral.ECONFLICT,
		},
		{
			name: "delete of a link to a file outside",
			setup: func(t *testing.T, e *env, outside string) {
				must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(e.ws, "s.txt")))
			},
			entry: func(e *env, _ string) Entry {
				return Entry{Path: "s.txt", Op: OpDelete, OldSHA256: sum("secret\n"), Class: ClassOrdinary}
			},
			code: corral.ECONFLICT,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fixture1())
			outside := filepath.Join(e.base, "outside")
			writeTree(t, outside, map[string]file{"secret": {content: "secret\n"}}, nil)
			outsideBefore := snapshot(t, outside)
			if tt.setup != nil {
				tt.setup(t, e, outside)
			}
			want := snapshot(t, e.ws)
			en := tt.entry(e, outside)
			if en.Op != OpDelete {
				staged := filepath.Join(e.staged, filepath.FromSlash(en.Path))
				must(t, os.MkdirAll(filepath.Dir(staged), 0o755))
				must(t, os.WriteFile(staged, []byte("x"), 0o644))
			}
			err := Apply(e.ws, e.jdir, e.id, []Entry{en}, DirSource(e.staged), nil)
			wantCode(t, err, tt.code)
			e.checkImage(t, want, "after refusing")
			e.checkNoJournal(t, "after refusing")
			if d := diffSnapshots(snapshot(t, outside), outsideBefore); d != "" {
				t.Fatalf("the directory outside changed:\n%s", d)
			}
		})
	}
}

// swapFixture has files below a directory "a" that the swap tests replace
// with a link during the apply.
func swapFixture() fixture {
	return fixture{
		name: "swap",
		files: map[string]file{
			"a/x.txt":     {content: "x\n"},
			"a/y.txt":     {content: "y\n"},
			"a/sub/z.txt": {content: "z\n"},
			"b.txt":       {content: "b\n"},
			"inside/i":    {content: "inside\n"},
		},
		changes: []change{
			{op: OpModify, path: "a/x.txt", content: "x v2\n"},
			{op: OpDelete, path: "a/y.txt"},
			{op: OpModify, path: "a/sub/z.txt", content: "z v2\n"},
			{op: OpCreate, path: "a/new.txt", content: "new\n"},
			{op: OpCreate, path: "a/n/deep.txt", content: "deep\n"},
			{op: OpModify, path: "b.txt", content: "b v2\n"},
			{op: OpCreate, path: "c.txt", content: "c\n"},
		},
	}
}

// TestApplySymlinkSwap replaces the directory "a" with a link, once before
// each step of the apply in turn: to a directory outside the workspace, and
// to one inside it. Nothing may be written through the link; once the test
// puts the directory back, recovery leaves the before-image (or the
// after-image when the apply had already succeeded).
func TestApplySymlinkSwap(t *testing.T) {
	e := newEnv(t, swapFixture())
	steps := recordSteps(t, e)
	outside := filepath.Join(e.base, "outside")
	writeTree(t, outside, map[string]file{"o.txt": {content: "outside\n"}}, nil)
	outsideBefore := snapshot(t, outside)
	saved := filepath.Join(e.base, "saved-a")
	targets := map[string]string{"outside": outside, "inside": "inside"}
	tried := 0
	for _, kind := range []string{"outside", "inside"} {
		for n := 1; n <= len(steps); n++ {
			e.reset(t)
			calls := 0
			err := e.apply(func(step string) error {
				calls++
				if calls == n {
					must(t, os.Rename(filepath.Join(e.ws, "a"), saved))
					must(t, os.Symlink(targets[kind], filepath.Join(e.ws, "a")))
				}
				return nil
			})
			what := fmt.Sprintf("%s link before step %d (%s)", kind, n, steps[n-1])
			if err != nil {
				wantCode(t, err, corral.EINVALID, corral.ECONFLICT, corral.EINTERNAL)
			}
			if d := diffSnapshots(snapshot(t, outside), outsideBefore); d != "" {
				t.Fatalf("%s: the directory outside changed:\n%s", what, d)
			}
			if d := diffSnapshots(snapshot(t, filepath.Join(e.ws, "inside")), map[string]string{"i": e.before["inside/i"]}); d != "" {
				t.Fatalf("%s: the directory the link points to changed:\n%s", what, d)
			}
			must(t, os.Remove(filepath.Join(e.ws, "a")))
			must(t, os.Rename(saved, filepath.Join(e.ws, "a")))
			if err := Recover(e.ws, e.jdir, nil); err != nil {
				t.Fatalf("%s: Recover: %v", what, err)
			}
			want := e.before
			if err == nil {
				want = e.after
			}
			e.checkImage(t, want, what)
			e.checkNoJournal(t, what)
			tried++
		}
	}
	t.Logf("%d swaps tried, %d steps each way", tried, len(steps))
}

// TestApplyFileSwap replaces a file the apply modifies with a link to a
// file outside, once before each step in turn. The file outside is never
// written, and recovery always succeeds.
func TestApplyFileSwap(t *testing.T) {
	e := newEnv(t, swapFixture())
	steps := recordSteps(t, e)
	secret := filepath.Join(e.base, "secret")
	must(t, os.WriteFile(secret, []byte("secret\n"), 0o600))
	for n := 1; n <= len(steps); n++ {
		e.reset(t)
		calls := 0
		err := e.apply(func(step string) error {
			calls++
			if calls == n {
				p := filepath.Join(e.ws, "b.txt")
				must(t, os.Remove(p))
				must(t, os.Symlink(secret, p))
			}
			return nil
		})
		what := fmt.Sprintf("link before step %d (%s)", n, steps[n-1])
		if err != nil {
			wantCode(t, err, corral.ECONFLICT, corral.EINTERNAL)
		}
		if err := Recover(e.ws, e.jdir, nil); err != nil {
			t.Fatalf("%s: Recover: %v", what, err)
		}
		e.checkNoJournal(t, what)
		if data, err := os.ReadFile(secret); err != nil || string(data) != "secret\n" {
			t.Fatalf("%s: the file outside is %q, %v", what, data, err)
		}
	}
}

// TestApplyCreateRace creates, just before the apply renames a new file
// into place, a file at the same path: the apply must not overwrite it.
func TestApplyCreateRace(t *testing.T) {
	e := newEnv(t, fixture3())
	p := filepath.Join(e.ws, "new/deep/c.txt")
	err := e.apply(func(step string) error {
		if step == "rename new/deep/c.txt" {
			must(t, os.WriteFile(p, []byte("someone else's\n"), 0o644))
		}
		return nil
	})
	wantCode(t, err, corral.ECONFLICT)
	if data, err := os.ReadFile(p); err != nil || string(data) != "someone else's\n" {
		t.Fatalf("the file someone else created is %q, %v", data, err)
	}
	want := maps.Clone(e.before)
	want["new"], want["new/deep"] = e.after["new"], e.after["new/deep"]
	want["new/deep/c.txt"] = strings.Replace(e.after["new/deep/c.txt"], sum("charlie\n")[:16], sum("someone else's\n")[:16], 1)
	e.checkImage(t, want, "after the conflict")
	e.checkNoJournal(t, "after the conflict")
}

func TestApplyOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "needs root to give files to another user")
	}
	e := newEnv(t, fixture3())
	const uid, gid = 4321, 8765
	must(t, os.Chown(e.ws, uid, gid))
	must(t, os.Chown(filepath.Join(e.ws, "b.txt"), 1111, 2222))
	if err := e.apply(nil); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for _, tt := range []struct {
		path     string
		uid, gid uint32
	}{
		{"new", uid, gid},
		{"new/deep", uid, gid},
		{"new/deep/c.txt", uid, gid},
		{"b.txt", 1111, 2222}, // a replaced file keeps its owner
	} {
		fi, err := os.Lstat(filepath.Join(e.ws, tt.path))
		must(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != tt.uid || st.Gid != tt.gid {
			t.Errorf("%s is owned by %d:%d, want %d:%d", tt.path, st.Uid, st.Gid, tt.uid, tt.gid)
		}
	}
}

func TestRecoverLeavesOtherWorkspaces(t *testing.T) {
	a := newEnv(t, fixture3())
	b := newEnv(t, fixture1())
	b.jdir = a.jdir
	crashAt(t, a, func(steps []string) int { return slices.Index(steps, "rename b.txt") + 1 })
	if err := Recover(b.ws, b.jdir, nil); err != nil {
		t.Fatalf("Recover of another workspace: %v", err)
	}
	if _, err := os.Stat(journalPath(a.jdir, a.id)); err != nil {
		t.Fatalf("the journal of the crashed workspace is gone: %v", err)
	}
	if err := Recover(a.ws, a.jdir, nil); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	a.checkImage(t, a.before, "after Recover")
	a.checkNoJournal(t, "after Recover")
}

func TestRecoverBadJournals(t *testing.T) {
	e := newEnv(t, fixture1())
	must(t, os.MkdirAll(e.jdir, 0o700))
	// A journal cut short before its rename is garbage; a journal under its
	// final name that does not parse is kept, and Recover says so.
	must(t, os.WriteFile(filepath.Join(e.jdir, "x1.json.tmp"), []byte(`{"version":1,"id":"x1","di`), 0o600))
	must(t, os.WriteFile(filepath.Join(e.jdir, "x2.json"), []byte(`{"version":1,"id":"x2","dir":"../..","state":"prepared"}`), 0o600))
	must(t, os.WriteFile(filepath.Join(e.jdir, "x3.json"), []byte(`{"version":1,"id":"x3","dir":"`+e.ws+`","state":"prepared",
		"entries":[{"path":"../escape","op":"create","temp":".corral-tmp-x3-0","backup":"0"}]}`), 0o600))
	err := Recover(e.ws, e.jdir, nil)
	wantCode(t, err, corral.EINTERNAL)
	for _, name := range []string{"x2.json", "x3.json"} {
		if _, err := os.Stat(filepath.Join(e.jdir, name)); err != nil {
			t.Errorf("%s was removed: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.jdir, "x1.json.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("x1.json.tmp is still there (stat: %v)", err)
	}
	e.checkImage(t, e.before, "after Recover")
}

func TestApplyPendingJournal(t *testing.T) {
	e := newEnv(t, fixture3())
	crashAt(t, e, func(steps []string) int { return slices.Index(steps, "mark-backups") + 1 })
	err := e.apply(nil)
	wantCode(t, err, corral.ECONFLICT)
	if msg := corral.ErrorMessage(err); !strings.Contains(msg, "not been recovered") {
		t.Errorf("message %q does not say an earlier apply awaits recovery", msg)
	}
	if err := Recover(e.ws, e.jdir, nil); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	e.checkImage(t, e.before, "after Recover")
	if err := e.apply(nil); err != nil {
		t.Fatalf("Apply after Recover: %v", err)
	}
	e.checkImage(t, e.after, "after Apply")
}

func TestRecoverNoJournalDir(t *testing.T) {
	e := newEnv(t, fixture1())
	for i := range 2 {
		if err := Recover(e.ws, e.jdir, nil); err != nil {
			t.Fatalf("Recover #%d: %v", i+1, err)
		}
	}
	e.checkImage(t, e.before, "after Recover")
}

// TestApplyMoveSource: a MoveSource moves regular files and takes nothing
// else; on another file system it copies.
func TestApplyMoveSource(t *testing.T) {
	shm := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm = "/dev/shm"
	}
	tests := []struct {
		name     string
		otherFS  bool
		link     bool // the source path is a link to a good file
		wantCode string
	}{
		{name: "same file system"},
		{name: "another file system", otherFS: true},
		{name: "link in the source", link: true, wantCode: corral.ECONFLICT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			srcBase := base
			if tt.otherFS {
				if shm == "" {
					t.Skip("no /dev/shm to be another file system")
				}
				d, err := os.MkdirTemp(shm, "corral-move-")
				must(t, err)
				t.Cleanup(func() { os.RemoveAll(d) })
				srcBase = d
			}
			ws, jdir, src := filepath.Join(base, "ws"), filepath.Join(base, "journal"), filepath.Join(srcBase, "src")
			must(t, os.MkdirAll(ws, 0o755))
			must(t, os.MkdirAll(filepath.Join(src, "d"), 0o700))
			content := "moved\n"
			if tt.link {
				must(t, os.WriteFile(filepath.Join(srcBase, "real"), []byte(content), 0o600))
				must(t, os.Symlink(filepath.Join(srcBase, "real"), filepath.Join(src, "d", "f.txt")))
			} else {
				must(t, os.WriteFile(filepath.Join(src, "d", "f.txt"), []byte(content), 0o600))
			}
			entries := []Entry{{Path: "d/f.txt", Op: OpCreate, NewSHA256: sum(content), Size: int64(len(content)), Mode: 0o755, Class: ClassOrdinary}}
			err := Apply(ws, jdir, "imp_1", entries, MoveSource(src), nil)
			if tt.wantCode != "" {
				wantCode(t, err, tt.wantCode)
				if _, err := os.Lstat(filepath.Join(ws, "d", "f.txt")); !os.IsNotExist(err) {
					t.Fatalf("the refused file is in the workspace (%v)", err)
				}
				return
			}
			must(t, err)
			got, err := os.ReadFile(filepath.Join(ws, "d", "f.txt"))
			must(t, err)
			fi, err := os.Stat(filepath.Join(ws, "d", "f.txt"))
			must(t, err)
			if string(got) != content || fi.Mode().Perm() != 0o755 {
				t.Fatalf("workspace file = %q %v, want %q 0755", got, fi.Mode().Perm(), content)
			}
			_, err = os.Stat(filepath.Join(src, "d", "f.txt"))
			if moved := os.IsNotExist(err); moved == tt.otherFS {
				t.Fatalf("source file gone = %v on another file system = %v", moved, tt.otherFS)
			}
		})
	}
}
