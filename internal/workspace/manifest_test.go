//go:build linux

package workspace

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/kerneltest"
)

// want is one expected manifest entry; the hashes, sizes and modes are
// checked against the trees themselves.
type want struct {
	path, op string
	flags    []string
	class    string // the manifest's pre-classification, "" for none
}

// The runs below edit the staged tree directly, as root: what a sandboxed
// command would do, without the sandbox.
var manifestCases = []struct {
	name  string
	files map[string]string             // the persistent workspace
	setup func(t *testing.T, ws string) // more of it: modes, links
	edit  func(t *testing.T, tree string)
	want  []want
	root  bool // the case needs root
}{
	{
		name:  "nothing",
		files: map[string]string{"a": "a", "d/b": "b"},
		edit:  func(t *testing.T, tree string) {},
	},
	{
		name:  "create in a new nested directory",
		files: map[string]string{"a": "a"},
		edit: func(t *testing.T, tree string) {
			writeFiles(t, tree, map[string]string{"x/y/z/new.txt": "new", "x/top.txt": "top"})
		},
		want: []want{{path: "x/top.txt", op: OpCreate}, {path: "x/y/z/new.txt", op: OpCreate}},
	},
	{
		name:  "create an empty file and an empty directory",
		files: map[string]string{"a": "a"},
		edit: func(t *testing.T, tree string) {
			writeFiles(t, tree, map[string]string{"d/empty": ""})
			mustDo(t, os.MkdirAll(filepath.Join(tree, "only/dirs"), 0o755))
		},
		want: []want{{path: "d/empty", op: OpCreate}},
	},
	{
		name:  "modify",
		files: map[string]string{"a": "one", "sub/b": "bee", "sub/c": "sea"},
		edit: func(t *testing.T, tree string) {
			writeFiles(t, tree, map[string]string{"a": "two", "sub/b": "a longer bee"})
		},
		want: []want{{path: "a", op: OpModify}, {path: "sub/b", op: OpModify}},
	},
	{
		name:  "modify keeping size and mtime",
		files: map[string]string{"a": "one"},
		edit: func(t *testing.T, tree string) {
			name := filepath.Join(tree, "a")
			fi, err := os.Lstat(name)
			mustDo(t, err)
			writeFiles(t, tree, map[string]string{"a": "two"})
			mustDo(t, os.Chtimes(name, fi.ModTime(), fi.ModTime()))
		},
		want: []want{{path: "a", op: OpModify}},
	},
	{
		name:  "delete",
		files: map[string]string{"a": "a", "sub/b": "b", "sub/c": "c"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.Remove(filepath.Join(tree, "a")))
			mustDo(t, os.Remove(filepath.Join(tree, "sub/b")))
		},
		want: []want{{path: "a", op: OpDelete}, {path: "sub/b", op: OpDelete}},
	},
	{
		name:  "rename a file",
		files: map[string]string{"old.txt": "content", "d/x": "x"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.Rename(filepath.Join(tree, "old.txt"), filepath.Join(tree, "d/new.txt")))
		},
		want: []want{{path: "d/new.txt", op: OpCreate}, {path: "old.txt", op: OpDelete}},
	},
	{
		name:  "rename a directory",
		files: map[string]string{"src/a.go": "a", "src/lib/b.go": "b", "keep": "k"},
		edit: func(t *testing.T, tree string) {
			// mv copies when the kernel refuses (redirect_dir=off: EXDEV).
			if out, err := exec.Command("mv", filepath.Join(tree, "src"), filepath.Join(tree, "pkg")).CombinedOutput(); err != nil {
				t.Fatalf("mv: %v: %s", err, out)
			}
		},
		want: []want{{path: "pkg/a.go", op: OpCreate}, {path: "pkg/lib/b.go", op: OpCreate},
			{path: "src/a.go", op: OpDelete}, {path: "src/lib/b.go", op: OpDelete}},
	},
	{
		name:  "chmod only",
		files: map[string]string{"run.sh": "#!/bin/sh\n", "other": "o"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.Chmod(filepath.Join(tree, "run.sh"), 0o755))
		},
		want: []want{{path: "run.sh", op: OpModify}},
	},
	{
		name:  "touch, chown and rewrite without change",
		files: map[string]string{"a": "a", "d/b": "b", "c": "c"},
		edit: func(t *testing.T, tree string) {
			later := time.Now().Add(time.Hour)
			mustDo(t, os.Chtimes(filepath.Join(tree, "a"), later, later))
			writeFiles(t, tree, map[string]string{"d/b": "b"})
			if os.Geteuid() == 0 {
				mustDo(t, os.Lchown(filepath.Join(tree, "c"), 65534, 65534))
			}
		},
	},
	{
		name:  "replace a directory by a file",
		files: map[string]string{"d/x": "x", "d/sub/y": "y", "e": "e"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.RemoveAll(filepath.Join(tree, "d")))
			writeFiles(t, tree, map[string]string{"d": "now a file"})
		},
		want: []want{{path: "d", op: OpCreate}, {path: "d/sub/y", op: OpDelete}, {path: "d/x", op: OpDelete}},
	},
	{
		name:  "replace a file by a directory",
		files: map[string]string{"f": "file", "g": "g"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.Remove(filepath.Join(tree, "f")))
			writeFiles(t, tree, map[string]string{"f/inside": "i"})
		},
		want: []want{{path: "f", op: OpDelete}, {path: "f/inside", op: OpCreate}},
	},
	{
		name:  "delete a whole directory",
		files: map[string]string{"d/a": "a", "d/sub/b": "b", "d/sub/deeper/c": "c", "keep/d": "d"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.RemoveAll(filepath.Join(tree, "d")))
		},
		want: []want{{path: "d/a", op: OpDelete}, {path: "d/sub/b", op: OpDelete}, {path: "d/sub/deeper/c", op: OpDelete}},
	},
	{
		name:  "delete a directory and make it again",
		files: map[string]string{"d/a": "a", "d/same": "same", "d/b": "b", "d/sub/c": "c"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.RemoveAll(filepath.Join(tree, "d")))
			writeFiles(t, tree, map[string]string{"d/a": "new a", "d/same": "same", "d/sub/new": "n"})
		},
		want: []want{{path: "d/a", op: OpModify}, {path: "d/b", op: OpDelete},
			{path: "d/sub/c", op: OpDelete}, {path: "d/sub/new", op: OpCreate}},
	},
	{
		name:  "symlink inside the workspace",
		files: map[string]string{"a": "a", "d/b": "b"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.Symlink("a", filepath.Join(tree, "link")))
			mustDo(t, os.Symlink("../a", filepath.Join(tree, "d/up")))
		},
		want: []want{{path: "d/up", op: OpCreate, flags: []string{FlagSymlink}},
			{path: "link", op: OpCreate, flags: []string{FlagSymlink}}},
	},
	{
		name:  "symlink out of the workspace",
		files: map[string]string{"d/b": "b"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.Symlink("/etc/shadow", filepath.Join(tree, "abs")))
			mustDo(t, os.Symlink("../../etc/passwd", filepath.Join(tree, "d/climb")))
			mustDo(t, os.Symlink("..", filepath.Join(tree, "root-parent")))
		},
		want: []want{{path: "abs", op: OpCreate, flags: []string{FlagSymlink, FlagEscape}},
			{path: "d/climb", op: OpCreate, flags: []string{FlagSymlink, FlagEscape}},
			{path: "root-parent", op: OpCreate, flags: []string{FlagSymlink, FlagEscape}}},
	},
	{
		name:  "a file becomes a symlink",
		files: map[string]string{"a": "a", "b": "b"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.Remove(filepath.Join(tree, "a")))
			mustDo(t, os.Symlink("b", filepath.Join(tree, "a")))
		},
		want: []want{{path: "a", op: OpModify, flags: []string{FlagSymlink}}},
	},
	{
		name:  "a symlink of the workspace retargeted",
		files: map[string]string{"a": "a", "b": "b"},
		setup: func(t *testing.T, ws string) {
			mustDo(t, os.Symlink("a", filepath.Join(ws, "link")))
		},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.Remove(filepath.Join(tree, "link")))
			mustDo(t, os.Symlink("b", filepath.Join(tree, "link")))
		},
		want: []want{{path: "link", op: OpModify, flags: []string{FlagSymlink}}},
	},
	{
		name:  "hard link",
		files: map[string]string{"a": "a"},
		edit: func(t *testing.T, tree string) {
			writeFiles(t, tree, map[string]string{"new": "n"})
			mustDo(t, os.Link(filepath.Join(tree, "a"), filepath.Join(tree, "h1")))
			mustDo(t, os.Link(filepath.Join(tree, "new"), filepath.Join(tree, "h2")))
		},
		want: []want{{path: "h1", op: OpCreate, flags: []string{FlagHardlink}},
			{path: "h2", op: OpCreate, flags: []string{FlagHardlink}},
			{path: "new", op: OpCreate, flags: []string{FlagHardlink}}},
	},
	{
		name:  "fifo and socket",
		files: map[string]string{"a": "a"},
		edit: func(t *testing.T, tree string) {
			mustDo(t, unix.Mkfifo(filepath.Join(tree, "pipe"), 0o644))
			mustDo(t, unix.Mknod(filepath.Join(tree, "sock"), unix.S_IFSOCK|0o644, 0))
		},
		want: []want{{path: "pipe", op: OpCreate, flags: []string{FlagDevice}},
			{path: "sock", op: OpCreate, flags: []string{FlagDevice}}},
	},
	{
		name:  "setuid, setgid and sticky",
		files: map[string]string{"tool": "#!/bin/sh\n"},
		edit: func(t *testing.T, tree string) {
			writeFiles(t, tree, map[string]string{"suid": "x", "sgid": "x", "sticky": "x"})
			mustDo(t, os.Chmod(filepath.Join(tree, "suid"), 0o755|fs.ModeSetuid))
			mustDo(t, os.Chmod(filepath.Join(tree, "sgid"), 0o755|fs.ModeSetgid))
			mustDo(t, os.Chmod(filepath.Join(tree, "sticky"), 0o644|fs.ModeSticky))
			mustDo(t, os.Chmod(filepath.Join(tree, "tool"), 0o755|fs.ModeSetuid))
		},
		want: []want{{path: "sgid", op: OpCreate, flags: []string{FlagSetuid}},
			{path: "sticky", op: OpCreate, flags: []string{FlagSetuid}},
			{path: "suid", op: OpCreate, flags: []string{FlagSetuid}},
			{path: "tool", op: OpModify, flags: []string{FlagSetuid}}},
	},
	{
		name:  "a setuid file of the workspace, untouched and edited",
		files: map[string]string{"keep": "k", "edit": "e"},
		setup: func(t *testing.T, ws string) {
			mustDo(t, os.Chmod(filepath.Join(ws, "keep"), 0o755|fs.ModeSetuid))
			mustDo(t, os.Chmod(filepath.Join(ws, "edit"), 0o755|fs.ModeSetgid))
		},
		edit: func(t *testing.T, tree string) {
			f, err := os.OpenFile(filepath.Join(tree, "edit"), os.O_WRONLY|os.O_APPEND, 0)
			mustDo(t, err)
			_, err = f.WriteString("more")
			mustDo(t, err)
			mustDo(t, f.Close())
		},
		// Root writing keeps the setgid bit; the sandbox user's write would
		// clear it, and the entry would be a mode change instead.
		want: []want{{path: "edit", op: OpModify, flags: []string{FlagSetuid}}},
		root: true,
	},
	{
		name:  "Corral's internal files",
		files: map[string]string{"a": "a", ".corral/state": "s"},
		edit: func(t *testing.T, tree string) {
			writeFiles(t, tree, map[string]string{".corral/planted": "p", "sub/.corral/ok": "ok"})
		},
		want: []want{{path: ".corral/planted", op: OpCreate, flags: []string{FlagInternal}, class: ClassProtected},
			{path: "sub/.corral/ok", op: OpCreate}},
	},
	{
		name:  "binary content",
		files: map[string]string{"a": "a"},
		edit: func(t *testing.T, tree string) {
			writeFiles(t, tree, map[string]string{
				"bin":       "ELF\x00\x01\x02",
				"late-nul":  strings.Repeat("t", binarySniff) + "\x00",
				"a":         "text\x00",
				"utf8.txt":  "héllo wörld",
				"empty.txt": "",
			})
		},
		want: []want{{path: "a", op: OpModify, class: ClassRisky}, {path: "bin", op: OpCreate, class: ClassRisky},
			{path: "empty.txt", op: OpCreate}, {path: "late-nul", op: OpCreate}, {path: "utf8.txt", op: OpCreate}},
	},
	{
		name:  "a directory of the workspace behind a symlink is not followed",
		files: map[string]string{"d/x": "x"},
		setup: func(t *testing.T, ws string) {
			mustDo(t, os.Symlink("/etc", filepath.Join(ws, "etc")))
		},
		edit: func(t *testing.T, tree string) {
			mustDo(t, os.Remove(filepath.Join(tree, "etc")))
			writeFiles(t, tree, map[string]string{"etc/passwd": "mine"})
		},
		want: []want{{path: "etc", op: OpDelete}, {path: "etc/passwd", op: OpCreate}},
	},
}

func TestManifest(t *testing.T) {
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			for _, c := range manifestCases {
				t.Run(c.name, func(t *testing.T) {
					if c.root && os.Geteuid() != 0 {
						kerneltest.Skip(t, "needs root")
					}
					ws := t.TempDir()
					writeFiles(t, ws, c.files)
					if c.setup != nil {
						c.setup(t, ws)
					}
					s := newTestStage(t, ws, m.noOverlay, StageOptions{})
					c.edit(t, s.Tree())
					got, err := s.Manifest()
					if err != nil {
						t.Fatalf("Manifest: %v", err)
					}
					checkManifest(t, ws, s.Tree(), got, c.want)
				})
			}
		})
	}
}

// checkManifest compares got with want, and every entry's hashes, size and
// modes with the two trees.
func checkManifest(t *testing.T, ws, tree string, got Manifest, wants []want) {
	t.Helper()
	if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Path < got[j].Path }) {
		t.Errorf("manifest not sorted: %q", entryOps(got))
	}
	var gs, ws2 []string
	for _, e := range got {
		gs = append(gs, e.Path+" "+e.Op+" "+strings.Join(e.Flags, ",")+" "+e.Class)
	}
	for _, w := range wants {
		ws2 = append(ws2, w.path+" "+w.op+" "+strings.Join(w.flags, ",")+" "+w.class)
	}
	if !slices.Equal(gs, ws2) {
		t.Fatalf("manifest:\n got %q\nwant %q", gs, ws2)
	}
	for _, e := range got {
		if e.Op != OpCreate {
			old := fileFacts(t, ws, e.Path)
			if e.OldSHA256 != old.sha || e.OldMode != old.mode {
				t.Errorf("%s: old %s %v, want %s %v (the workspace's)", e.Path, e.OldSHA256, e.OldMode, old.sha, old.mode)
			}
		} else if e.OldSHA256 != "" || e.OldMode != 0 {
			t.Errorf("%s: create with old %q %v", e.Path, e.OldSHA256, e.OldMode)
		}
		if e.Op != OpDelete {
			cur := fileFacts(t, tree, e.Path)
			if e.NewSHA256 != cur.sha || e.Mode != cur.mode || e.Size != cur.size {
				t.Errorf("%s: new %s %v %d, want %s %v %d (the staged tree's)", e.Path, e.NewSHA256, e.Mode, e.Size, cur.sha, cur.mode, cur.size)
			}
		} else if e.NewSHA256 != "" || e.Mode != 0 || e.Size != 0 {
			t.Errorf("%s: delete with new %q %v %d", e.Path, e.NewSHA256, e.Mode, e.Size)
		}
	}
}

type facts struct {
	sha  string
	mode fs.FileMode
	size int64
}

// fileFacts reads a file the plain way, for comparison.
func fileFacts(t *testing.T, root, p string) facts {
	t.Helper()
	name := filepath.Join(root, filepath.FromSlash(p))
	fi, err := os.Lstat(name)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	f := facts{mode: fi.Mode()}
	switch {
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(name)
		mustDo(t, err)
		f.sha, f.size = sha(string(b)), int64(len(b))
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(name)
		mustDo(t, err)
		f.sha, f.size = sha(target), int64(len(target))
	}
	return f
}

// The copy's shortcut trusts an untouched file's inode and ctime: a file
// changed within the clock tick of the copy is still seen (modify keeping
// size and mtime, above), and an untouched one is not read again.
func TestCopyManifestSkipsUntouched(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"a": "a", "b": "b"})
	s := newTestStage(t, ws, true, StageOptions{})
	base, err := s.baseline()
	mustDo(t, err)
	// Pretend the copy is old, and lie about a's content: a file not
	// re-read keeps the lie.
	base.Stamp = time.Now().Add(time.Hour).UnixNano()
	fa := base.Files["a"]
	fa.SHA256 = sha("not a")
	base.Files["a"] = fa
	writeFiles(t, s.Tree(), map[string]string{"b": "B"})
	got, err := s.Manifest()
	mustDo(t, err)
	if g := entryOps(got); !slices.Equal(g, []string{"b modify"}) {
		t.Errorf("manifest = %q, want only b modify (a untouched, not re-read)", g)
	}
}
