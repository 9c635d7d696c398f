//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral"
	"corral/internal/kerneltest"
	"corral/internal/poll"
)

// needDisk skips a test that stages where stages cannot get their own
// filesystem (no loop devices, no e2fsprogs, not root). CI runs as root,
// where they can.
func needDisk(t testing.TB) {
	t.Helper()
	if err := DiskAvailable(); err != nil {
		kerneltest.Skip(t, "stages need their own filesystem: %v", err)
	}
}

// loopsUnder lists the loop devices whose backing file is under dir.
func loopsUnder(dir string) []string {
	var out []string
	for _, d := range loopDevices() {
		if strings.HasPrefix(d.backing, dir+"/") {
			out = append(out, d.path+" "+d.backing)
		}
	}
	return out
}

// waitNoLoops waits until no loop device is backed by a file under dir. A
// device detaches when its filesystem's last user lets go, which another
// test's sandbox, holding a copy of the mount table for a moment, can
// delay: the wait is a liveness bound, not a timing assertion.
func waitNoLoops(t *testing.T, dir string) {
	t.Helper()
	var left []string
	if !poll.Eventually(30*time.Second, func() bool { left = loopsUnder(dir); return len(left) == 0 }) {
		t.Fatalf("loop devices left attached: %q", left)
	}
}

// tempRoot is the directory t.TempDir makes its directories in.
func tempRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(filepath.Dir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// fill writes n bytes to name, and returns how many it wrote and the error
// that stopped it.
func fill(name string, n int64) (int64, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i) | 1 // not zeros: nothing may be left sparse
	}
	var done int64
	for done < n {
		k, err := f.Write(buf[:min(int64(len(buf)), n-done)])
		done += int64(k)
		if err != nil {
			f.Close()
			return done, err
		}
	}
	if err := f.Sync(); err != nil { // delayed allocation: ENOSPC may wait for the write-out
		f.Close()
		return done, err
	}
	return done, f.Close()
}

func TestDiskBytesLimit(t *testing.T) {
	const limit = 8 << 20
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			ws := t.TempDir()
			// In a copy the workspace's own bytes do not count against
			// the run.
			writeFiles(t, ws, map[string]string{"a.txt": "a", "big.bin": strings.Repeat("x", 3<<20)})
			s := newTestStage(t, ws, m.noOverlay, StageOptions{DiskBytes: limit})
			if n, err := fill(filepath.Join(s.Tree(), "half"), limit/2); err != nil {
				t.Fatalf("writing half the limit: stopped at %d: %v", n, err)
			}
			if full, err := s.DiskFull(); err != nil || full {
				t.Fatalf("DiskFull at half the limit = %v, %v; want false", full, err)
			}
			mustDo(t, os.Remove(filepath.Join(s.Tree(), "half")))
			// The run gets at least its limit...
			if n, err := fill(filepath.Join(s.Tree(), "exact"), limit); err != nil {
				t.Fatalf("writing the limit, %d bytes: stopped at %d: %v", limit, n, err)
			}
			// ...and not much more: 20 MiB fail with ENOSPC.
			n, err := fill(filepath.Join(s.Tree(), "big"), 20<<20)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("writing 20 MiB past the limit: wrote %d, err %v; want ENOSPC", n, err)
			}
			if n > diskSpare+1<<20 {
				t.Errorf("wrote %d bytes past a limit of %d, want under %d", n, limit, diskSpare+1<<20)
			}
			if full, err := s.DiskFull(); err != nil || !full {
				var st unix.Statfs_t
				unix.Statfs(s.diskMount(), &st)
				t.Errorf("DiskFull after ENOSPC = %v, %v; want true (%d blocks, %d inodes free)", full, err, st.Bavail, st.Ffree)
			}
			// The host holds what the stage holds, no more.
			if u, err := s.DiskUsage(); err != nil || u < limit || u > limit+diskSpare+(2<<20)+3<<20 {
				t.Errorf("DiskUsage = %d, %v; want about %d", u, err, limit)
			}
			// A full stage is still measured.
			got, err := s.Manifest()
			if err != nil {
				t.Fatalf("Manifest of a full stage: %v", err)
			}
			if g := entryOps(got); !slices.Equal(g, []string{"big create", "exact create"}) {
				t.Errorf("manifest of a full stage = %q", g)
			}
			if got[1].Size != limit {
				t.Errorf("exact: size %d in the manifest, want %d", got[1].Size, limit)
			}
		})
	}
}

func TestDiskInodesLimit(t *testing.T) {
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			ws := t.TempDir()
			writeFiles(t, ws, map[string]string{"a": "a", "d/b": "b", ".env": "S=1"})
			// 8 MiB: one block group, whose inode table holds 16 inodes a
			// block.
			s := newTestStage(t, ws, m.noOverlay, StageOptions{DiskBytes: 8 << 20, DiskInodes: 50})
			made := 0
			var err error
			for ; made < 100; made++ {
				if err = os.WriteFile(filepath.Join(s.Tree(), fmt.Sprintf("f%03d", made)), nil, 0o644); err != nil {
					break
				}
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("creating 100 files with a limit of 50: made %d, err %v; want ENOSPC", made, err)
			}
			// At least the limit; inode tables come in blocks of 16.
			if made < 50 || made > 50+16 {
				t.Errorf("made %d files before ENOSPC, want 50 to 66", made)
			}
			if full, err := s.DiskFull(); err != nil || !full {
				t.Errorf("DiskFull with no inode left = %v, %v; want true", full, err)
			}
			got, err := s.Manifest()
			if err != nil || len(got) != made {
				t.Errorf("Manifest of a stage out of inodes: %d entries, %v; want %d", len(got), err, made)
			}
		})
	}
}

// A deleted file's blocks go back to the host at once.
func TestDiskUsageShrinks(t *testing.T) {
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			s := newTestStage(t, t.TempDir(), m.noOverlay, StageOptions{DiskBytes: 16 << 20})
			before, err := s.DiskUsage()
			mustDo(t, err)
			if before > 1<<20 {
				t.Errorf("a new stage takes %d bytes of the host's disk, want under 1 MiB", before)
			}
			name := filepath.Join(s.Tree(), "f")
			if _, err := fill(name, 8<<20); err != nil {
				t.Fatal(err)
			}
			written, err := s.DiskUsage()
			mustDo(t, err)
			if written < before+8<<20 {
				t.Errorf("DiskUsage after writing 8 MiB = %d, was %d", written, before)
			}
			mustDo(t, os.Remove(name))
			mustDo(t, syncDirFS(s.Tree()))
			var after int64
			if !poll.Eventually(30*time.Second, func() bool {
				var err error
				after, err = s.DiskUsage()
				mustDo(t, err)
				return after < before+1<<20
			}) {
				t.Fatalf("DiskUsage after deleting the 8 MiB = %d, was %d before: the blocks were not given back", after, before)
			}
		})
	}
}

func syncDirFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}

// Close leaves no mount and no loop device, also when a process is still
// inside the tree.
func TestDiskClose(t *testing.T) {
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			needDisk(t)
			root := tempRoot(t)
			ws := t.TempDir()
			writeFiles(t, ws, map[string]string{"a": "a"})
			s := newTestStage(t, ws, m.noOverlay, StageOptions{})
			writeFiles(t, s.Tree(), map[string]string{"new": "n"})
			if got := loopsUnder(s.Dir()); len(got) != 1 {
				t.Fatalf("loop devices of an open stage: %q, want one", got)
			}
			if !mounted(t, s.diskMount()) {
				t.Fatalf("the stage's filesystem is not mounted at %s", s.diskMount())
			}
			if _, err := os.Lstat(filepath.Join(s.Tree(), "lost+found")); !os.IsNotExist(err) {
				t.Errorf("lost+found in the tree: %v", err)
			}
			mustDo(t, s.Close())
			for _, dir := range []string{s.Tree(), filepath.Join(s.Dir(), stageLayersDir)} {
				if mounted(t, dir) {
					t.Errorf("%s still mounted after Close", dir)
				}
			}
			if _, err := os.Lstat(s.Dir()); !os.IsNotExist(err) {
				t.Errorf("stage directory left after Close: %v", err)
			}
			waitNoLoops(t, root)
		})
	}
}

// OpenStage after the mounts are gone (a restart of the machine) checks
// the filesystem, attaches and mounts it again, with the run's content.
func TestDiskOpenStageRemounts(t *testing.T) {
	for _, m := range stageModes {
		t.Run(m.name, func(t *testing.T) {
			for _, reboot := range []bool{false, true} {
				t.Run(fmt.Sprintf("reboot=%v", reboot), func(t *testing.T) {
					ws := t.TempDir()
					writeFiles(t, ws, map[string]string{"a": "a", "b": "b"})
					s := newTestStage(t, ws, m.noOverlay, StageOptions{DiskBytes: 8 << 20})
					writeFiles(t, s.Tree(), map[string]string{"a": "A", "d/new": "n"})
					want, err := s.Manifest()
					mustDo(t, err)
					// Everything of the stage leaves the mount table.
					if s.Overlay() {
						mustDo(t, unix.Unmount(s.Tree(), 0))
					}
					mustDo(t, unix.Unmount(s.diskMount(), 0))
					waitNoLoops(t, s.Dir())
					if reboot {
						var st stageState
						mustDo(t, readJSONFile(filepath.Join(s.Dir(), stageStateFile), &st))
						st.BootID = "another boot"
						mustDo(t, writeJSONFile(filepath.Join(s.Dir(), stageStateFile), st, false))
					}

					r, err := OpenStage(ws, s.Dir(), StageOptions{})
					if err != nil {
						t.Fatalf("OpenStage: %v", err)
					}
					if !mounted(t, r.diskMount()) || (r.Overlay() && !mounted(t, r.Tree())) {
						t.Fatalf("OpenStage did not mount the stage again")
					}
					if got := loopsUnder(s.Dir()); len(got) != 1 {
						t.Errorf("loop devices after OpenStage: %q, want one", got)
					}
					if b, err := os.ReadFile(filepath.Join(r.Tree(), "d/new")); err != nil || string(b) != "n" {
						t.Errorf("d/new after OpenStage = %q, %v", b, err)
					}
					got, err := r.Manifest()
					if err != nil || !slices.EqualFunc(got, want, entriesEqual) {
						t.Errorf("manifest after OpenStage = %q, %v; want %q", entryOps(got), err, entryOps(want))
					}
					// Still limited.
					if _, err := fill(filepath.Join(r.Tree(), "big"), 20<<20); !errors.Is(err, syscall.ENOSPC) {
						t.Errorf("writing 20 MiB after OpenStage: %v, want ENOSPC", err)
					}
					// A second OpenStage finds it mounted and attaches nothing.
					if _, err := OpenStage(ws, s.Dir(), StageOptions{}); err != nil {
						t.Fatalf("second OpenStage: %v", err)
					}
					if got := loopsUnder(s.Dir()); len(got) != 1 {
						t.Errorf("loop devices after a second OpenStage: %q, want one", got)
					}
					mustDo(t, r.Close())
					waitNoLoops(t, s.Dir())
				})
			}
		})
	}
}

// makeDisk gives at least what was asked, and not much more.
func TestMakeDiskSize(t *testing.T) {
	needDisk(t)
	cases := []struct {
		name          string
		bytes, inodes int64
	}{
		{"tiny", 1, 1},
		{"small", 8 << 20, 50},
		{"default", DefaultDiskBytes, DefaultDiskInodes},
		{"many inodes", 64 << 20, 1_000_000},
		{"large", 20 << 30, 100_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mnt := filepath.Join(dir, "mnt")
			mustDo(t, os.Mkdir(mnt, 0o700))
			image := filepath.Join(dir, stageDiskFile)
			if err := makeDisk(image, mnt, c.bytes, c.inodes); err != nil {
				t.Fatalf("makeDisk(%d, %d): %v", c.bytes, c.inodes, err)
			}
			defer unmountDisk(mnt)
			var st unix.Statfs_t
			mustDo(t, unix.Statfs(mnt, &st))
			free := int64(st.Bavail) * int64(st.Bsize)
			least, most := c.bytes+diskSpare, c.bytes+diskSpare+max(c.bytes/100, 1<<20)
			if free < least || free > most {
				t.Errorf("free = %d bytes, want %d to %d", free, least, most)
			}
			// Inode tables come in whole blocks of 16 inodes, in each
			// block group: one per 32768 blocks or per 32768 inodes
			// (one block of bitmap each), whichever makes more.
			var ist unix.Stat_t
			mustDo(t, unix.Stat(image, &ist))
			groups := max(ist.Size/diskBlock, c.inodes)/(8*diskBlock) + 1
			if ffree, most := int64(st.Ffree), c.inodes+16*groups; ffree < c.inodes || ffree > most {
				t.Errorf("free inodes = %d, want %d to %d", ffree, c.inodes, most)
			}
			if used := ist.Blocks * 512; used > 1<<20 {
				t.Errorf("a new filesystem takes %d bytes of the host's disk, want under 1 MiB", used)
			}
		})
	}
}

// Where e2fsprogs is missing, staging fails closed and says what to
// install.
func TestDiskToolsMissing(t *testing.T) {
	needDisk(t)
	t.Setenv("PATH", t.TempDir())
	saved := diskToolDirs
	diskToolDirs = nil
	diskProbe.Lock()
	diskProbe.ok = false
	diskProbe.Unlock()
	t.Cleanup(func() { diskToolDirs = saved })
	for name, err := range map[string]error{
		"DiskAvailable": DiskAvailable(),
		"NewStage": func() error {
			s, err := NewStage(t.TempDir(), filepath.Join(t.TempDir(), "stage"), StageOptions{})
			if err == nil {
				s.Close()
			}
			return err
		}(),
	} {
		if corral.ErrorCode(err) != corral.EUNAVAIL || !strings.Contains(corral.ErrorMessage(err), "e2fsprogs") {
			t.Errorf("%s without mke2fs: %v, want unavailable naming e2fsprogs", name, err)
		}
	}
	// A server whose PATH lacks the sbin directories still finds them.
	diskToolDirs = saved
	if err := DiskAvailable(); err != nil {
		t.Errorf("DiskAvailable with e2fsprogs outside PATH: %v", err)
	}
}
