package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral"
)

// Manifest is what the run changed, sorted by path: one entry per
// non-directory (regular file, symlink, FIFO, socket, device) created,
// modified or deleted. Directories are not entries: a new directory shows
// as its files, a deleted one as the deletes of its files; a directory's
// own mode and times are not part of a change set. Owners and times of
// files are not either: a file whose type, mode and content are unchanged
// has no entry.
//
// Paths hidden from the run as secrets are never deletes: the run could
// not see them, so it cannot have meant to delete them. A run that writes
// such a path gets an entry pre-classified protected.
//
// The manifest is taken once, when the run's processes are gone: the
// first call works it out, makes the run's new files durable and records
// it in the stage; later calls, from this Stage or a re-opened one, return
// the record.
func (s *Stage) Manifest() (Manifest, error) {
	const op = "manifest"
	record := filepath.Join(s.dir, stageManifest)
	if s.taken() {
		var m Manifest
		if err := readJSONFile(record, &m); err != nil {
			return nil, corral.Internal(op, err)
		}
		return m, nil
	}
	var (
		m   Manifest
		err error
	)
	if s.state.Overlay {
		m, err = s.overlayManifest()
	} else {
		m, err = s.copyManifest()
	}
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	sortManifest(m)
	if m, err = s.withBases(m); err != nil {
		return nil, corral.Internal(op, err)
	}
	if err := flagNames(m, s.persistentNames); err != nil {
		return nil, corral.Internal(op, err)
	}
	if err := s.sync(m); err != nil {
		return nil, corral.Internal(op, err)
	}
	// Last: the record is what says the stage is taken, and safe.
	if err := writeJSONFile(record, m, true); err != nil {
		return nil, corral.Internal(op, err)
	}
	return m, nil
}

// overlayManifest walks the upper layer only, so its cost grows with what
// the run changed, not with the workspace:
//
//   - a non-directory in upper is a create (nothing in lower), a modify
//     (lower differs in type, mode or content) or nothing (a copy-up that
//     changed neither, after touch or chown); a lower directory it
//     replaced is deleted;
//   - a whiteout (character device 0/0) deletes what lower has there,
//     every file of a directory included;
//   - an opaque directory (trusted.overlay.opaque=y), and any directory
//     inside one, hides its lower directory: every lower entry not in
//     upper is deleted;
//   - a directory in upper that replaced a lower file deletes that file;
//     its contents are creates.
func (s *Stage) overlayManifest() (Manifest, error) {
	d := overlayDiff{
		lower:     s.persistent,
		upper:     filepath.Join(s.dir, stageUpperDir),
		secrets:   newSecretMatcher(s.state.Secrets),
		whiteouts: map[string]bool{},
	}
	for _, w := range s.state.Whiteouts {
		d.whiteouts[w] = true
	}
	if err := d.dir("", true, false); err != nil {
		return nil, err
	}
	return d.out, nil
}

type overlayDiff struct {
	lower, upper string
	secrets      secretMatcher
	whiteouts    map[string]bool // made at staging: not the run's
	out          Manifest
}

// dir compares the upper directory rel with lower. lowerDir says lower has
// a directory at rel; opaque that it is hidden (by this directory or one
// above).
func (d *overlayDiff) dir(rel string, lowerDir, opaque bool) error {
	ents, err := readDirBeneath(d.upper, rel)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	for _, de := range ents {
		name := de.Name()
		p := joinRel(rel, name)
		low := nodeAbsent
		if lowerDir {
			if _, low, err = readNode(d.lower, p, false); err != nil {
				return err
			}
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		switch {
		case isWhiteout(fi):
			// Inside an opaque directory, the lower listing below
			// accounts for it.
			if !opaque && !d.whiteouts[p] {
				if err := d.deleteAll(p); err != nil {
					return err
				}
			}
		case fi.IsDir():
			present[name] = true
			if low == nodeDir {
				op, err := isOpaque(filepath.Join(d.upper, filepath.FromSlash(p)))
				if err != nil {
					return err
				}
				err = d.dir(p, true, opaque || op)
				if err != nil {
					return err
				}
				continue
			}
			if low == nodeOther {
				if err := d.deleteAll(p); err != nil {
					return err
				}
			}
			if err := d.dir(p, false, true); err != nil {
				return err
			}
		default:
			present[name] = true
			if err := d.file(p, low); err != nil {
				return err
			}
		}
	}
	if !opaque || !lowerDir {
		return nil
	}
	lents, err := readDirBeneath(d.lower, rel)
	if err != nil {
		return err
	}
	for _, le := range lents {
		if !present[le.Name()] {
			if err := d.deleteAll(joinRel(rel, le.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// file compares the upper non-directory p with what lower has there.
func (d *overlayDiff) file(p string, low int) error {
	cur, kind, err := readNode(d.upper, p, true)
	if err != nil || kind == nodeAbsent {
		return err
	}
	switch low {
	case nodeDir:
		if err := d.deleteAll(p); err != nil {
			return err
		}
	case nodeOther:
		old, kind, err := readNode(d.lower, p, true)
		if err != nil {
			return err
		}
		if kind == nodeOther {
			if !cur.same(old) {
				d.out = append(d.out, manifestEntry(p, OpModify, &old, &cur, d.secrets.secret(p)))
			}
			return nil
		}
	}
	d.out = append(d.out, manifestEntry(p, OpCreate, nil, &cur, d.secrets.secret(p)))
	return nil
}

// deleteAll records the delete of what lower has at p: a file, or every
// file under a directory. Secrets are never deleted.
func (d *overlayDiff) deleteAll(p string) error {
	if d.secrets.secret(p) {
		return nil
	}
	old, kind, err := readNode(d.lower, p, true)
	switch {
	case err != nil:
		return err
	case kind == nodeOther:
		d.out = append(d.out, manifestEntry(p, OpDelete, &old, nil, false))
	case kind == nodeDir:
		ents, err := readDirBeneath(d.lower, p)
		if err != nil {
			return err
		}
		for _, de := range ents {
			if err := d.deleteAll(joinRel(p, de.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// isWhiteout reports whether fi is an overlay whiteout.
func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// isOpaque reports whether the upper directory name hides its lower one.
func isOpaque(name string) (bool, error) {
	var buf [8]byte
	n, err := unix.Lgetxattr(name, "trusted.overlay.opaque", buf[:])
	switch {
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP):
		return false, nil
	case errors.Is(err, unix.ERANGE):
		return false, nil // longer than "y": not an opaque marker
	case err != nil:
		return false, fmt.Errorf("opaque %s: %w", name, err)
	}
	return string(buf[:n]) == "y", nil
}

// copyManifest compares the copy with the baseline recorded when it was
// made. A file the baseline shows untouched (same inode, ctime, size and
// mode, and not racy) is not read again.
func (s *Stage) copyManifest() (Manifest, error) {
	base, err := s.baseline()
	if err != nil {
		return nil, err
	}
	secrets := newSecretMatcher(s.state.Secrets)
	tree := s.Tree()
	seen := map[string]bool{}
	var m Manifest
	err = filepath.WalkDir(tree, func(name string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			return nil
		}
		p, err := relSlash(tree, name)
		if err != nil {
			return err
		}
		b, inBase := base.Files[p]
		if inBase {
			seen[p] = true
			fi, err := de.Info()
			if err != nil {
				return err
			}
			if b.Ctime < base.Stamp && sameStat(b, fi) {
				return nil
			}
		}
		cur, kind, err := readNode(tree, p, true)
		if err != nil || kind == nodeAbsent {
			return err
		}
		if inBase {
			old := node{mode: b.Mode, size: b.Size, sha: b.SHA256}
			if !cur.same(old) {
				m = append(m, manifestEntry(p, OpModify, &old, &cur, false))
			}
			return nil
		}
		secret := secrets.secret(p)
		if secret {
			// Hidden from the run, maybe present in the workspace: the
			// change is relative to the workspace.
			old, kind, err := readNode(s.persistent, p, true)
			if err != nil {
				return err
			}
			if kind == nodeOther {
				m = append(m, manifestEntry(p, OpModify, &old, &cur, true))
				return nil
			}
		}
		m = append(m, manifestEntry(p, OpCreate, nil, &cur, secret))
		return nil
	})
	if err != nil {
		return nil, err
	}
	for p, b := range base.Files {
		if !seen[p] {
			old := node{mode: b.Mode, size: b.Size, sha: b.SHA256}
			m = append(m, manifestEntry(p, OpDelete, &old, nil, false))
		}
	}
	return m, nil
}

func sameStat(b baseFile, fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode() == b.Mode && fi.Size() == b.Size && st.Ino == b.Ino && statTime(st.Ctim).UnixNano() == b.Ctime
}

func statTime(ts syscall.Timespec) time.Time { return time.Unix(ts.Sec, ts.Nsec) }

// Reading a tree without following symlinks.

// Kinds of what readNode finds.
const (
	nodeAbsent = iota
	nodeDir
	nodeOther
)

// readNode reads what root/p is, never following a symlink on the way nor
// at the end: a path whose parent is a symlink or a file is absent. With
// hash, a regular file's content is hashed, a symlink's target read.
func readNode(root, p string, hash bool) (node, int, error) {
	dir, name := path.Split(p)
	dfd, err := openDirBeneath(root, strings.TrimSuffix(dir, "/"))
	if err != nil {
		if absentErr(err) {
			return node{}, nodeAbsent, nil
		}
		return node{}, 0, err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if absentErr(err) {
			return node{}, nodeAbsent, nil
		}
		return node{}, 0, fmt.Errorf("stat %s: %w", p, err)
	}
	n := node{mode: statMode(st.Mode), nlink: st.Nlink, rdev: st.Rdev}
	switch {
	case n.mode.IsDir():
		return n, nodeDir, nil
	case !hash:
	case n.mode.IsRegular():
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return node{}, 0, fmt.Errorf("open %s: %w", p, err)
		}
		f := os.NewFile(uintptr(fd), p)
		defer f.Close()
		var fst unix.Stat_t
		if err := unix.Fstat(fd, &fst); err != nil {
			return node{}, 0, err
		}
		if fst.Ino != st.Ino || fst.Dev != st.Dev {
			return node{}, 0, fmt.Errorf("%s changed while read", p)
		}
		n.mode, n.nlink = statMode(fst.Mode), fst.Nlink
		if n.sha, n.size, n.binary, err = hashContent(f); err != nil {
			return node{}, 0, fmt.Errorf("read %s: %w", p, err)
		}
	case n.mode.Type() == fs.ModeSymlink:
		target, err := readlinkat(dfd, name)
		if err != nil {
			return node{}, 0, fmt.Errorf("readlink %s: %w", p, err)
		}
		n.target, n.sha, n.size = target, hashString(target), int64(len(target))
	}
	if n.mode.IsRegular() && !hash {
		n.size = st.Size
	}
	return n, nodeOther, nil
}

func absentErr(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// openDirBeneath opens the directory root/dir one element at a time,
// refusing symlinks. dir is slash-separated; "" is root itself.
func openDirBeneath(root, dir string) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if dir == "" || dir == "." {
		return fd, nil
	}
	for _, el := range strings.Split(dir, "/") {
		if el == "" || el == "." || el == ".." {
			unix.Close(fd)
			return -1, fmt.Errorf("path %q: bad element %q", dir, el)
		}
		next, err := unix.Openat(fd, el, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// readDirBeneath lists the directory root/dir, reached without symlinks.
func readDirBeneath(root, dir string) ([]fs.DirEntry, error) {
	fd, err := openDirBeneath(root, dir)
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(root, filepath.FromSlash(dir)))
	defer f.Close()
	return f.ReadDir(-1)
}

func readlinkat(dfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
		if size > 1<<16 {
			return "", unix.ENAMETOOLONG
		}
	}
}

// statMode converts a stat mode to an fs.FileMode, as os.Lstat does.
func statMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
