//go:build linux

package workspace

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"corral"
	"corral/internal/kerneltest"
)

// Every stage test runs twice: on an overlay, and on the copy fallback.
var stageModes = []struct {
	name      string
	noOverlay bool
}{{"overlay", false}, {"copy", true}}

// newTestStage stages persistent in a fresh directory and closes it when the
// test ends. The overlay run skips, with the reason, where overlayfs is not
// available (it needs root and the overlay filesystem).
func newTestStage(t *testing.T, persistent string, noOverlay bool, opt StageOptions) *Stage {
	t.Helper()
	needDisk(t)
	opt.NoOverlay = noOverlay
	s, err := NewStage(persistent, filepath.Join(t.TempDir(), "stage"), opt)
	if err != nil {
		t.Fatalf("NewStage: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if !noOverlay && !s.Overlay() {
		kerneltest.Skip(t, "overlayfs unavailable, the copy fallback was used: %v", s.OverlayError())
	}
	if noOverlay && s.Overlay() {
		t.Fatalf("NoOverlay stage is an overlay")
	}
	return s
}

// writeFiles writes path -> content under root, making directories.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		name := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// mounted reports whether dir is a mount point in /proc/self/mountinfo.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == dir {
			return true
		}
	}
	return false
}

func TestSecretsAbsent(t *testing.T) {
	secrets := []string{".env", ".env.local", "sub/.env.production", "sub/deeper/.ENV", "secrets/a.pem",
		"secrets/nested/b.pem", ".corral/state", ".corral/db/x"}
	visible := []string{"README.md", "sub/main.go", "secrets/README", "secrets/nested/c.txt", "env", ".envrc.txt",
		"sub/.corral/not-internal"}
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			ws := t.TempDir()
			files := map[string]string{}
			for _, p := range append(slices.Clone(secrets), visible...) {
				files[p] = "content of " + p
			}
			writeFiles(t, ws, files)
			opt := StageOptions{Secrets: []string{"secrets/**/*.pem"}}
			s := newTestStage(t, ws, m.noOverlay, opt)
			for _, p := range secrets {
				if _, err := os.Lstat(filepath.Join(s.Tree(), p)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("secret %s in the staged tree: Lstat err = %v, want not exist", p, err)
				}
			}
			for _, p := range visible {
				b, err := os.ReadFile(filepath.Join(s.Tree(), p))
				if err != nil || string(b) != files[p] {
					t.Errorf("visible %s: %q, %v; want %q", p, b, err, files[p])
				}
			}
			if _, err := os.Lstat(filepath.Join(s.Tree(), ".corral")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf(".corral in the staged tree: %v", err)
			}
			if ents, _ := os.ReadDir(s.Tree()); slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == ".env" }) {
				t.Errorf(".env listed in the staged tree's root")
			}
			m0, err := s.Manifest()
			if err != nil || len(m0) != 0 {
				t.Fatalf("manifest of an untouched stage = %+v, %v; want empty", m0, err)
			}

			s = newTestStage(t, ws, m.noOverlay, opt)
			// The run deletes whole directories holding hidden secrets, and
			// writes a secret path: no secret is ever a delete, and the
			// write is protected.
			mustDo(t, os.RemoveAll(filepath.Join(s.Tree(), "sub")))
			mustDo(t, os.RemoveAll(filepath.Join(s.Tree(), "secrets")))
			writeFiles(t, s.Tree(), map[string]string{".env": "PLANTED=1"})
			got, err := s.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			want := []string{".env modify", "secrets/README delete", "secrets/nested/c.txt delete",
				"sub/.corral/not-internal delete", "sub/main.go delete"}
			if g := entryOps(got); !slices.Equal(g, want) {
				t.Fatalf("manifest = %q, want %q", g, want)
			}
			if e := got[0]; e.Class != ClassProtected || e.OldSHA256 != sha("content of .env") || e.NewSHA256 != sha("PLANTED=1") {
				t.Errorf("write of .env = %+v, want modify pre-classified protected", e)
			}
			if c := Classify(got[0], ClassPolicy{}); c != ClassProtected {
				t.Errorf("Classify(.env write) = %s, want protected", c)
			}
		})
	}
}

// A configured secret glob that is a file's name, and a write to it.
func TestSecretGlobWriteIsProtected(t *testing.T) {
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			ws := t.TempDir()
			writeFiles(t, ws, map[string]string{"keys/id.key": "k", "a.txt": "a"})
			s := newTestStage(t, ws, m.noOverlay, StageOptions{Secrets: []string{"*.key"}})
			if _, err := os.Lstat(filepath.Join(s.Tree(), "keys/id.key")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("keys/id.key staged: %v", err)
			}
			writeFiles(t, s.Tree(), map[string]string{"keys/id.key": "mine", "new.key": "n"})
			got, err := s.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if g, want := entryOps(got), []string{"keys/id.key modify", "new.key create"}; !slices.Equal(g, want) {
				t.Fatalf("manifest = %q, want %q", g, want)
			}
			for _, e := range got {
				if c := Classify(e, ClassPolicy{}); c != ClassProtected {
					t.Errorf("Classify(%s) = %s, want protected", e.Path, c)
				}
			}
		})
	}
}

func entryOps(m Manifest) []string {
	var out []string
	for _, e := range m {
		out = append(out, e.Path+" "+e.Op)
	}
	return out
}

func TestStageLayout(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "needs root to give the tree to another user")
	}
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			ws := t.TempDir()
			writeFiles(t, ws, map[string]string{"sub/a": "a"})
			mustDo(t, os.Chmod(ws, 0o750))
			s := newTestStage(t, ws, m.noOverlay, StageOptions{UID: 65534, GID: 65533})
			check := func(name string, uid, gid uint32, perm fs.FileMode) {
				t.Helper()
				fi, err := os.Lstat(name)
				if err != nil {
					t.Fatal(err)
				}
				st := fi.Sys().(*syscall.Stat_t)
				if st.Uid != uid || st.Gid != gid || fi.Mode().Perm() != perm {
					t.Errorf("%s: owner %d:%d mode %v, want %d:%d %v", name, st.Uid, st.Gid, fi.Mode().Perm(), uid, gid, perm)
				}
			}
			check(s.Dir(), 0, 0, 0o711)
			check(s.Tree(), 65534, 65533, 0o750)
			check(filepath.Join(s.Tree(), "sub"), 0, 0, 0o755) // keeps the workspace's owner
			if s.Overlay() {
				check(filepath.Join(s.Dir(), stageLayersDir), 0, 0, 0o700)
				if !mounted(t, s.Tree()) {
					t.Errorf("overlay not mounted at %s", s.Tree())
				}
			}
		})
	}
}

func TestNewStageRefuses(t *testing.T) {
	needDisk(t)
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"a": "a", "dir/b": "b"})
	full := t.TempDir()
	writeFiles(t, full, map[string]string{"x": "x"})
	cases := []struct {
		name       string
		persistent string
		dir        string
		opt        StageOptions
		code       string
	}{
		{"stage inside the workspace", ws, filepath.Join(ws, "stage"), StageOptions{}, corral.EINVALID},
		{"stage is the workspace", ws, ws, StageOptions{}, corral.EINVALID},
		{"workspace inside the stage", ws, filepath.Dir(ws), StageOptions{}, corral.EINVALID},
		{"workspace is a file", filepath.Join(ws, "a"), filepath.Join(t.TempDir(), "s"), StageOptions{}, corral.EINVALID},
		{"workspace missing", filepath.Join(ws, "nope"), filepath.Join(t.TempDir(), "s"), StageOptions{}, corral.EINVALID},
		{"stage directory not empty", ws, full, StageOptions{}, corral.ECONFLICT},
		{"bad secret glob", ws, filepath.Join(t.TempDir(), "s"), StageOptions{Secrets: []string{"[x"}}, corral.EINVALID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewStage(c.persistent, c.dir, c.opt)
			if err == nil {
				s.Close()
				t.Fatalf("NewStage(%s, %s) succeeded", c.persistent, c.dir)
			}
			if got := corral.ErrorCode(err); got != c.code {
				t.Errorf("NewStage: code %s (%v), want %s", got, err, c.code)
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(full, "x")); err != nil {
		t.Errorf("a refused stage touched its directory: %v", err)
	}
}

func TestOpenStage(t *testing.T) {
	wantOps := []string{"a modify", "b delete", "d/new create"}
	cases := []struct {
		name     string
		manifest bool // taken before the stage is forgotten
		reboot   bool // the machine restarts: mounts and page cache gone
		code     string
	}{
		{name: "before the manifest"},
		{name: "after the manifest", manifest: true},
		{name: "machine restarted after the manifest", manifest: true, reboot: true},
		{name: "machine restarted before the manifest", reboot: true, code: corral.EUNAVAIL},
	}
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					ws := t.TempDir()
					writeFiles(t, ws, map[string]string{"a": "a", "b": "b", "d/c": "c", ".env": "S=1"})
					s := newTestStage(t, ws, m.noOverlay, StageOptions{})
					writeFiles(t, s.Tree(), map[string]string{"a": "A", "d/new": "n"})
					mustDo(t, os.Remove(filepath.Join(s.Tree(), "b")))
					var want Manifest
					if c.manifest {
						var err error
						if want, err = s.Manifest(); err != nil {
							t.Fatal(err)
						}
					}

					// A new process forgets the stage; a new boot, its mount
					// and boot id too.
					if s.Overlay() {
						mustDo(t, unix.Unmount(s.Tree(), 0))
					}
					if c.reboot {
						var st stageState
						mustDo(t, readJSONFile(filepath.Join(s.Dir(), stageStateFile), &st))
						st.BootID = "another boot"
						mustDo(t, writeJSONFile(filepath.Join(s.Dir(), stageStateFile), st, false))
					}
					r, err := OpenStage(ws, s.Dir(), StageOptions{})
					if c.code != "" {
						if corral.ErrorCode(err) != c.code {
							t.Fatalf("OpenStage: %v, want %s", err, c.code)
						}
						mustDo(t, RemoveStage(s.Dir()))
						if _, err := os.Lstat(s.Dir()); !errors.Is(err, fs.ErrNotExist) {
							t.Errorf("RemoveStage left %s: %v", s.Dir(), err)
						}
						return
					}
					if err != nil {
						t.Fatalf("OpenStage: %v", err)
					}
					if r.Overlay() != s.Overlay() {
						t.Errorf("Overlay() = %v after OpenStage, want %v", r.Overlay(), s.Overlay())
					}
					got, err := r.Manifest()
					if err != nil {
						t.Fatal(err)
					}
					if g := entryOps(got); !slices.Equal(g, wantOps) {
						t.Errorf("manifest after OpenStage = %q, want %q", g, wantOps)
					}
					if c.manifest && !slices.EqualFunc(got, want, entriesEqual) {
						t.Errorf("manifest after OpenStage = %+v\nwant the one taken before %+v", got, want)
					}
					if s.Overlay() && !mounted(t, r.Tree()) {
						t.Errorf("OpenStage did not mount the overlay again")
					}
					if b, err := os.ReadFile(filepath.Join(r.Tree(), "a")); err != nil || string(b) != "A" {
						t.Errorf("tree after OpenStage: a = %q, %v", b, err)
					}
					if _, err := os.Lstat(filepath.Join(r.Tree(), ".env")); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf(".env visible after OpenStage: %v", err)
					}
					f, err := r.Source().Open("d/new")
					if err != nil {
						t.Fatalf("Source after OpenStage: %v", err)
					}
					b, _ := io.ReadAll(f)
					f.Close()
					if string(b) != "n" {
						t.Errorf("Source after OpenStage: d/new = %q", b)
					}
				})
			}
		})
	}
	ws := t.TempDir()
	s := newTestStage(t, ws, true, StageOptions{})
	if _, err := OpenStage(t.TempDir(), s.Dir(), StageOptions{}); corral.ErrorCode(err) != corral.EINVALID {
		t.Errorf("OpenStage for another workspace: %v, want invalid_input", err)
	}
	if _, err := OpenStage(ws, filepath.Join(t.TempDir(), "none"), StageOptions{}); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Errorf("OpenStage of nothing: %v, want not_found", err)
	}
}

// Manifest is taken once: what the tree does afterwards is not the run's.
func TestManifestTakenOnce(t *testing.T) {
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			ws := t.TempDir()
			writeFiles(t, ws, map[string]string{"a": "a"})
			s := newTestStage(t, ws, m.noOverlay, StageOptions{})
			writeFiles(t, s.Tree(), map[string]string{"a": "A"})
			first, err := s.Manifest()
			mustDo(t, err)
			writeFiles(t, s.Tree(), map[string]string{"late": "l"})
			again, err := s.Manifest()
			mustDo(t, err)
			if !slices.EqualFunc(first, again, entriesEqual) || len(first) != 1 {
				t.Errorf("second Manifest = %q, want the first %q", entryOps(again), entryOps(first))
			}
		})
	}
}

func entriesEqual(a, b Entry) bool {
	return a.Path == b.Path && a.Op == b.Op && a.OldSHA256 == b.OldSHA256 && a.NewSHA256 == b.NewSHA256 &&
		a.Size == b.Size && a.Mode == b.Mode && a.OldMode == b.OldMode && slices.Equal(a.Flags, b.Flags) && a.Class == b.Class
}

func TestClose(t *testing.T) {
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			ws := t.TempDir()
			writeFiles(t, ws, map[string]string{"a": "a", ".env": "x", "d/b": "b"})
			s := newTestStage(t, ws, m.noOverlay, StageOptions{})
			writeFiles(t, s.Tree(), map[string]string{"new/x": "x"})
			mustDo(t, os.Remove(filepath.Join(s.Tree(), "a")))

			// A process still inside the tree: Close detaches the mount.
			busy := exec.Command("sleep", "60")
			busy.Dir = filepath.Join(s.Tree(), "d")
			mustDo(t, busy.Start())
			defer func() { busy.Process.Kill(); busy.Wait() }()

			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if _, err := os.Lstat(s.Dir()); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("stage directory left after Close: %v", err)
			}
			if mounted(t, s.Tree()) {
				t.Errorf("%s still mounted after Close", s.Tree())
			}
			if err := s.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			// The workspace is as it was.
			for p, want := range map[string]string{"a": "a", ".env": "x", "d/b": "b"} {
				if b, err := os.ReadFile(filepath.Join(ws, p)); err != nil || string(b) != want {
					t.Errorf("workspace %s = %q, %v after Close", p, b, err)
				}
			}
			if _, err := os.Lstat(filepath.Join(ws, "new")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the run's file reached the workspace: %v", err)
			}
		})
	}
}

func TestStageSource(t *testing.T) {
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			ws := t.TempDir()
			writeFiles(t, ws, map[string]string{"a": "a", "d/b": "b", "gone": "g"})
			s := newTestStage(t, ws, m.noOverlay, StageOptions{})
			tree := s.Tree()
			writeFiles(t, tree, map[string]string{"a": "new a", "n/e/w": "deep"})
			mustDo(t, os.Symlink("/etc", filepath.Join(tree, "etc")))
			mustDo(t, os.Symlink("a", filepath.Join(tree, "link")))
			mustDo(t, os.Symlink("d", filepath.Join(tree, "dlink")))
			mustDo(t, unix.Mkfifo(filepath.Join(tree, "fifo"), 0o644))
			mustDo(t, os.Remove(filepath.Join(tree, "gone")))
			src := s.Source()
			for p, want := range map[string]string{"a": "new a", "n/e/w": "deep"} {
				r, err := src.Open(p)
				if err != nil {
					t.Errorf("Source.Open(%q): %v", p, err)
					continue
				}
				b, err := io.ReadAll(r)
				r.Close()
				if err != nil || string(b) != want {
					t.Errorf("Source.Open(%q) read %q, %v; want %q", p, b, err, want)
				}
			}
			for _, p := range []string{"etc/passwd", "link", "dlink/b", "fifo", "gone", "../a", "/etc/passwd", "n/../a", "", "n"} {
				if r, err := src.Open(p); err == nil {
					r.Close()
					t.Errorf("Source.Open(%q) succeeded, want an error", p)
				}
			}
		})
	}
}
