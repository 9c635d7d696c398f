package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// The copy stage, where overlayfs is unavailable: the workspace is copied
// into tree/ (modes, owners, times; symlinks as symlinks, never followed;
// FIFOs and sockets as nodes; block and character devices are left out,
// a device node being no file a run needs), secrets left out. The stage
// records what it copied, with each file's SHA-256 taken on the way, so
// the manifest compares against what the run was given, not against a
// persistent workspace that may have changed since.

// copyBaseline is what the copy fallback gave the run: every non-directory
// it copied, with the staged copy's inode and ctime. A staged file whose
// inode, ctime, size and mode are unchanged was not touched by the run, so
// the manifest need not hash it; but a file whose ctime is not older than
// Stamp (the ctime of a file written after the copy) may have been changed
// within the same clock tick, so it is always hashed.
type copyBaseline struct {
	Files map[string]baseFile `json:"files"`
	Stamp int64               `json:"stamp"` // ns
}

type baseFile struct {
	Mode   fs.FileMode `json:"mode"`
	Size   int64       `json:"size"`
	SHA256 string      `json:"sha256"` // for a symlink, of its target
	Ino    uint64      `json:"ino"`    // of the staged copy
	Ctime  int64       `json:"ctime"`  // of the staged copy, ns
}

func (s *Stage) stageCopy(root fs.FileInfo, opt StageOptions) error {
	s.state.Overlay = false
	tree := s.Tree()
	if err := os.Mkdir(tree, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	secrets := newSecretMatcher(s.state.Secrets)
	if s.state.Disk {
		// The copy is made onto the stage's filesystem, which holds it
		// and, on top, what the run may write.
		bytes, inodes, err := copySize(s.persistent, secrets)
		if err != nil {
			return err
		}
		if err := makeDisk(s.diskImage(), tree, opt.diskBytes()+bytes, opt.diskInodes()+inodes); err != nil {
			return err
		}
	}
	if err := copyDirAttrs(tree, root, opt.UID, opt.GID); err != nil {
		return err
	}
	base := &copyBaseline{Files: map[string]baseFile{}}
	type dirTimes struct {
		name string
		fi   fs.FileInfo
	}
	var dirs []dirTimes
	err := walkStaged(s.persistent, secrets, func(name, rel string, de fs.DirEntry) error {
		fi, err := de.Info()
		if err != nil {
			return err
		}
		dst := filepath.Join(tree, filepath.FromSlash(rel))
		if fi.IsDir() {
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirTimes{dst, fi})
			return nil
		}
		b, ok, err := copyNode(name, dst, fi)
		if err != nil || !ok {
			return err
		}
		base.Files[rel] = b
		return nil
	})
	if err != nil {
		return err
	}
	// Directories last, deepest first: writing into one changes its times.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := copyDirAttrs(dirs[i].name, dirs[i].fi, -1, -1); err != nil {
			return err
		}
	}
	stamp := filepath.Join(s.dir, stageStampFile)
	if err := os.WriteFile(stamp, nil, 0o600); err != nil {
		return err
	}
	sfi, err := os.Lstat(stamp)
	if err != nil {
		return err
	}
	base.Stamp = statTime(sfi.Sys().(*syscall.Stat_t).Ctim).UnixNano()
	s.base = base
	return writeJSONFile(filepath.Join(s.dir, stageBaseFile), base, false)
}

// copyNode copies one non-directory from src to dst, as itself: a symlink
// as a symlink, a FIFO or socket as a node; block and character devices
// are left out (ok false). It returns what the baseline records.
func copyNode(src, dst string, fi fs.FileInfo) (b baseFile, ok bool, err error) {
	st := fi.Sys().(*syscall.Stat_t)
	b.Mode = fi.Mode()
	switch {
	case fi.Mode().IsRegular():
		sum, n, err := copyFile(src, dst, fi)
		if err != nil {
			return b, false, err
		}
		b.SHA256, b.Size = sum, n
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return b, false, err
		}
		if err := os.Symlink(target, dst); err != nil {
			return b, false, err
		}
		b.SHA256, b.Size = hashString(target), int64(len(target))
	case fi.Mode()&fs.ModeDevice != 0:
		return b, false, nil
	default: // FIFO, socket
		if err := unix.Mknod(dst, st.Mode&unix.S_IFMT|0o600, 0); err != nil {
			return b, false, err
		}
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return b, false, err
		}
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		// After the chown, which clears setuid bits.
		if err := os.Chmod(dst, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return b, false, err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(statTime(st.Atim).UnixNano()), unix.NsecToTimespec(statTime(st.Mtim).UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return b, false, err
	}
	cfi, err := os.Lstat(dst)
	if err != nil {
		return b, false, err
	}
	cst := cfi.Sys().(*syscall.Stat_t)
	b.Ino, b.Ctime = cst.Ino, statTime(cst.Ctim).UnixNano()
	return b, true, nil
}

// copyFile copies a regular file's content, hashing it on the way.
func copyFile(src, dst string, fi fs.FileInfo) (string, int64, error) {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	if ifi, err := in.Stat(); err != nil || !os.SameFile(fi, ifi) {
		return "", 0, fmt.Errorf("copy %s: the file changed while staging (%v)", src, err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func (s *Stage) baseline() (*copyBaseline, error) {
	if s.base == nil {
		var b copyBaseline
		if err := readJSONFile(filepath.Join(s.dir, stageBaseFile), &b); err != nil {
			return nil, err
		}
		s.base = &b
	}
	return s.base, nil
}
