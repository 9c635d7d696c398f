//go:build linux

package workspace

// The persistent tree as apply and recovery see it, on Linux: every path is
// resolved beneath the workspace without following a symbolic link.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// fsync makes a file or directory durable. The exhaustive fault test swaps
// it for a no-op: it simulates failures and crashes of the process, not of
// the disk, and runs thousands of applies.
var fsync = unix.Fsync

func syncFile(f *os.File) error { return fsync(int(f.Fd())) }

// dirTree is a directory beneath which paths are resolved without ever
// following a symbolic link.
//
// os.Root is not enough here: it follows a link that stays inside the
// root, and a link in the persistent tree must make the apply fail, not be
// followed. Openat2's RESOLVE_NO_SYMLINKS would do, but walking one
// component at a time with O_NOFOLLOW gives the same guarantee on every
// kernel: each component is opened relative to the descriptor of the one
// before it, so no link is followed whatever is renamed meanwhile. Every
// operation resolves its path again from the root: a descriptor kept from
// an earlier step could by now name a directory moved out of the tree.
type dirTree struct{ fd int }

func openTree(dir string) (*dirTree, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &dirTree{fd: fd}, nil
}

func (t *dirTree) close() { closeFD(t.fd) }

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// walk opens the directory rel ("." for the root) and returns a descriptor
// the caller closes. With allowMissing, a component that does not exist
// ends the walk: walk then returns the deepest directory that exists and
// the components below it that do not.
func (t *dirTree) walk(rel string, allowMissing bool) (int, []string, error) {
	cur, err := unix.FcntlInt(uintptr(t.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	if rel == "." || rel == "" {
		return cur, nil, nil
	}
	comps := strings.Split(rel, "/")
	for k, c := range comps {
		if c == "" || c == "." || c == ".." {
			closeFD(cur)
			return -1, nil, &os.PathError{Op: "open", Path: rel, Err: errors.New("invalid path")}
		}
		next, err := unix.Openat(cur, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			err = classifyOpenErr(cur, c, err)
			if allowMissing && errors.Is(err, os.ErrNotExist) {
				return cur, comps[k:], nil
			}
			closeFD(cur)
			return -1, nil, &os.PathError{Op: "open", Path: strings.Join(comps[:k+1], "/"), Err: err}
		}
		closeFD(cur)
		cur = next
	}
	return cur, nil, nil
}

// classify tells a symbolic link from another non-directory after opening
// name as a directory failed (Linux answers ENOTDIR for both).
func classifyOpenErr(dirfd int, name string, err error) error {
	if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return errSymlink
	}
	return errNotDir
}

// missingDirs returns the directories from the top of d down that do not
// exist ("a/b", "a/b/c" for d = "a/b/c" when only "a" exists).
func (t *dirTree) missingDirs(d string) ([]string, error) {
	fd, missing, err := t.walk(d, true)
	if err != nil {
		return nil, err
	}
	closeFD(fd)
	var dirs []string
	base := strings.TrimSuffix(strings.TrimSuffix(d, strings.Join(missing, "/")), "/")
	for _, c := range missing {
		base = path.Join(base, c)
		dirs = append(dirs, base)
	}
	return dirs, nil
}

// lstat reports whether p exists, without following links; a missing
// directory on the way counts as p missing.
func (t *dirTree) lstat(p string) error {
	pfd, _, err := t.walk(path.Dir(p), false)
	if err != nil {
		return err
	}
	defer closeFD(pfd)
	_, err = lstatAt(pfd, path.Base(p))
	return err
}

func lstatAt(dirfd int, name string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return &st, nil
}

// state hashes the regular file at p.
func (t *dirTree) state(p string) (*fileState, error) {
	pfd, _, err := t.walk(path.Dir(p), false)
	if err != nil {
		return nil, err
	}
	defer closeFD(pfd)
	f, st, err := openRegular(pfd, path.Base(p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return &fileState{
		SHA256: hex.EncodeToString(h.Sum(nil)),
		Mode:   st.Mode & 0o7777,
		UID:    int(st.Uid),
		GID:    int(st.Gid),
	}, nil
}

// openFile opens the regular file p for reading.
func (t *dirTree) openFile(p string) (*os.File, error) {
	pfd, _, err := t.walk(path.Dir(p), false)
	if err != nil {
		return nil, err
	}
	defer closeFD(pfd)
	f, _, err := openRegular(pfd, path.Base(p))
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return f, nil
}

// openRegular opens name in dirfd for reading if it is a regular file; a
// link, a directory, a FIFO or a device is errNotRegular.
func openRegular(dirfd int, name string) (*os.File, *unix.Stat_t, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, nil, errNotRegular
	}
	if err != nil {
		return nil, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, nil, errNotRegular
	}
	return os.NewFile(uintptr(fd), name), &st, nil
}

// createTemp creates the temporary temp next to p, with the mode bits
// given and the owner of owner, or of p's directory when owner is nil. It
// never reuses or follows what is already there.
func (t *dirTree) createTemp(p, temp string, mode uint32, owner *fileState) (*os.File, error) {
	pfd, _, err := t.walk(path.Dir(p), false)
	if err != nil {
		return nil, err
	}
	defer closeFD(pfd)
	var uid, gid int
	if owner != nil {
		uid, gid = owner.UID, owner.GID
	} else if uid, gid, err = ownerOf(pfd); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(pfd, temp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	// Chown before chmod: chown may clear set-id bits.
	err = fchownIfNeeded(fd, uid, gid)
	if err == nil {
		err = unix.Fchmod(fd, mode)
	}
	if err != nil {
		unix.Close(fd)
		unix.Unlinkat(pfd, temp, 0)
		return nil, err
	}
	return os.NewFile(uintptr(fd), temp), nil
}

// moveTemp moves the regular file p of the private tree src (opened once
// per apply) to the
// temporary temp next to p, giving it the mode bits given and the owner of
// owner, or of p's directory when owner is nil. Both paths are resolved
// without following links; errOtherFS when src is on another file system
// (nothing was moved then).
func (t *dirTree) moveTemp(src *dirTree, p, temp string, mode uint32, owner *fileState) error {
	spfd, _, err := src.walk(path.Dir(p), false)
	if err != nil {
		return err
	}
	defer closeFD(spfd)
	f, _, err := openRegular(spfd, path.Base(p))
	if err != nil {
		return err
	}
	defer f.Close()
	pfd, _, err := t.walk(path.Dir(p), false)
	if err != nil {
		return err
	}
	defer closeFD(pfd)
	var uid, gid int
	if owner != nil {
		uid, gid = owner.UID, owner.GID
	} else if uid, gid, err = ownerOf(pfd); err != nil {
		return err
	}
	// The descriptor is the inode the rename moves: owner and mode are set
	// on it before it is in the workspace. Chown before chmod: chown may
	// clear set-id bits.
	fd := int(f.Fd())
	if err := fchownIfNeeded(fd, uid, gid); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return err
	}
	err = unix.Renameat2(spfd, path.Base(p), pfd, temp, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EXDEV) {
		return errOtherFS
	}
	return err
}

// syncTemp fsyncs the temporary temp next to p.
func (t *dirTree) syncTemp(p, temp string) error {
	pfd, _, err := t.walk(path.Dir(p), false)
	if err != nil {
		return err
	}
	defer closeFD(pfd)
	f, _, err := openRegular(pfd, temp)
	if err != nil {
		return err
	}
	defer f.Close()
	return syncFile(f)
}

// syncAll makes everything written to the tree's file system durable, in
// one syncfs.
func (t *dirTree) syncAll() error { return syncFS(t.fd) }

// syncFS is fsync's batch counterpart (the fault test swaps both).
var syncFS = unix.Syncfs

func fchownIfNeeded(fd, uid, gid int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	return unix.Fchown(fd, uid, gid)
}

func ownerOf(fd int) (uid, gid int, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, 0, err
	}
	return int(st.Uid), int(st.Gid), nil
}

// mkdir creates the directory d (mode 0755) owned like its parent.
func (t *dirTree) mkdir(d string) error {
	pfd, _, err := t.walk(path.Dir(d), false)
	if err != nil {
		return err
	}
	defer closeFD(pfd)
	uid, gid, err := ownerOf(pfd)
	if err != nil {
		return err
	}
	name := path.Base(d)
	if err := unix.Mkdirat(pfd, name, 0o700); err != nil {
		return err
	}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer closeFD(fd)
	if err := fchownIfNeeded(fd, uid, gid); err != nil {
		return err
	}
	return unix.Fchmod(fd, 0o755)
}

// emptyDir says whether the directory d has no entries.
func (t *dirTree) emptyDir(d string) (bool, error) {
	fd, _, err := t.walk(d, false)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), d)
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}

// rmdir removes the directory d if it is there and empty; errNotEmpty
// when it is not empty.
func (t *dirTree) rmdir(d string) error {
	pfd, _, err := t.walk(path.Dir(d), false)
	if err != nil {
		return err
	}
	defer closeFD(pfd)
	err = unix.Unlinkat(pfd, path.Base(d), unix.AT_REMOVEDIR)
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		return errNotEmpty
	}
	return err
}

// rename moves the temporary next to p onto p. With noReplace it fails
// with EEXIST rather than replace something that appeared at p.
func (t *dirTree) rename(p, temp string, noReplace bool) error {
	pfd, _, err := t.walk(path.Dir(p), false)
	if err != nil {
		return err
	}
	defer closeFD(pfd)
	if noReplace {
		err := unix.Renameat2(pfd, temp, pfd, path.Base(p), unix.RENAME_NOREPLACE)
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
			return err
		}
		// A filesystem without RENAME_NOREPLACE: the base check stands.
	}
	return unix.Renameat(pfd, temp, pfd, path.Base(p))
}

// remove unlinks the file p.
func (t *dirTree) remove(p string) error {
	pfd, _, err := t.walk(path.Dir(p), false)
	if err != nil {
		return err
	}
	defer closeFD(pfd)
	return unix.Unlinkat(pfd, path.Base(p), 0)
}

// removeTemp removes the temporary temp next to p.
func (t *dirTree) removeTemp(p, temp string) error {
	pfd, _, err := t.walk(path.Dir(p), false)
	if err != nil {
		return err
	}
	defer closeFD(pfd)
	return unix.Unlinkat(pfd, temp, 0)
}

// syncDir makes the entries of directory d durable.
func (t *dirTree) syncDir(d string) error {
	fd, _, err := t.walk(d, false)
	if err != nil {
		return err
	}
	defer closeFD(fd)
	return fsync(fd)
}
