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
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"corral"
)

// Stage is one run's staged tree of a persistent workspace.
//
// With overlayfs, the persistent workspace is the lower layer, read-only
// to the run; everything the run writes lands in the upper layer, so the
// manifest walks only what changed. The overlay is mounted with
// redirect_dir=off and metacopy=off, so the upper layer holds whole files
// (a renamed directory is copied and deleted, never redirected), and
// index=off. Files the run changes are copied up with their lower owner:
// for a sandbox user to write a file, the persistent workspace itself must
// be owned by (or writable for) that user. Only the tree's root is given
// to StageOptions.UID/GID. The persistent workspace must not change while
// the overlay is mounted (overlayfs leaves that undefined): the service
// computes the manifest when the run ends and applies against the hashes
// it recorded then.
//
// Without overlayfs, the tree is a copy (modes, owners, times, symlinks as
// symlinks; block and character devices are not copied), and the stage
// records what it copied, with each file's SHA-256, so the manifest
// compares against what the run was given, not against a persistent
// workspace that may have changed since.
type Stage struct {
	persistent string
	dir        string
	state      stageState
	base       *copyBaseline // copy only; loaded on first use
	noOverlay  error         // why NewStage fell back to a copy, for the log and tests
}

// NewStage stages the persistent workspace `persistent` under the directory
// `dir`, which it creates (it may exist if empty) and which must lie
// outside the workspace. Secrets are absent from the staged tree: whited
// out in the overlay's upper layer, or not copied.
func NewStage(persistent, dir string, opt StageOptions) (*Stage, error) {
	const op = "stage"
	for _, g := range opt.Secrets {
		if err := ValidGlob(g); err != nil {
			return nil, corral.Errorf(corral.EINVALID, "secret glob: %v", err)
		}
	}
	p, d, err := stagePaths(persistent, dir)
	if err != nil {
		return nil, corral.Errorf(corral.EINVALID, "%v", err)
	}
	root, err := os.Lstat(p)
	if err != nil || !root.IsDir() {
		return nil, corral.Errorf(corral.EINVALID, "workspace %s is not a directory", persistent)
	}
	if err := os.MkdirAll(filepath.Dir(d), 0o711); err != nil {
		return nil, corral.Internal(op, err)
	}
	if err := os.Mkdir(d, 0o711); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, corral.Internal(op, err)
		}
		if ents, rerr := os.ReadDir(d); rerr != nil || len(ents) > 0 {
			return nil, corral.Errorf(corral.ECONFLICT, "stage directory %s is not empty", dir)
		}
	}
	if err := os.Chmod(d, 0o711); err != nil {
		return nil, corral.Internal(op, err)
	}
	s := &Stage{persistent: p, dir: d, state: stageState{
		Version:    stageStateVersion,
		Persistent: p,
		Secrets:    slices.Clone(opt.Secrets),
	}}
	fail := func(err error) (*Stage, error) {
		s.Close()
		return nil, corral.Internal(op, err)
	}
	staged := false
	if !opt.NoOverlay {
		err := s.stageOverlay(root, opt)
		switch {
		case err == nil:
			staged = true
		case errors.Is(err, errNoOverlay):
			// Fall back to a copy, from a clean directory.
			s.noOverlay = err
			if err := s.unmount(); err != nil {
				return fail(err)
			}
			if err := os.RemoveAll(filepath.Join(d, stageLayersDir)); err != nil {
				return fail(err)
			}
			s.state.Whiteouts = nil
		default:
			return fail(err)
		}
	}
	if !staged {
		if err := s.stageCopy(root, opt); err != nil {
			return fail(err)
		}
	}
	if err := writeJSONFile(filepath.Join(d, stageStateFile), s.state); err != nil {
		return fail(err)
	}
	return s, nil
}

// OpenStage re-opens a stage left on disk by an earlier process (a change
// set waits for review across restarts), re-mounting its overlay when it is
// no longer mounted. opt.UID, GID and NoOverlay are not used: the stage
// keeps what it was made with, its secrets included.
func OpenStage(persistent, dir string, opt StageOptions) (*Stage, error) {
	const op = "open stage"
	p, d, err := stagePaths(persistent, dir)
	if err != nil {
		return nil, corral.Errorf(corral.EINVALID, "%v", err)
	}
	var st stageState
	if err := readJSONFile(filepath.Join(d, stageStateFile), &st); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, corral.NotFound("stage")
		}
		return nil, corral.Internal(op, err)
	}
	if st.Version != stageStateVersion {
		return nil, corral.Internal(op, fmt.Errorf("stage %s: version %d", d, st.Version))
	}
	if st.Persistent != p {
		return nil, corral.Errorf(corral.EINVALID, "stage %s belongs to another workspace", dir)
	}
	s := &Stage{persistent: p, dir: d, state: st}
	if st.Overlay {
		mounted, err := overlayMounted(s.Tree())
		if err != nil {
			return nil, corral.Internal(op, err)
		}
		if !mounted {
			if err := s.mount(); err != nil {
				return nil, corral.Internal(op, err)
			}
		}
	}
	return s, nil
}

// Tree is the directory to bind at /workspace.
func (s *Stage) Tree() string { return filepath.Join(s.dir, stageTreeDir) }

// Overlay reports whether the tree is an overlay (else a copy).
func (s *Stage) Overlay() bool { return s.state.Overlay }

// Dir is the stage's own directory.
func (s *Stage) Dir() string { return s.dir }

// OverlayError says why the stage is a copy although an overlay was
// allowed; nil for an overlay, a forced copy, or a re-opened stage.
func (s *Stage) OverlayError() error { return s.noOverlay }

// Close unmounts the overlay and removes everything under the stage's
// directory, the directory included. It is safe to call twice.
func (s *Stage) Close() error {
	if err := s.unmount(); err != nil {
		return corral.Internal("close stage", err)
	}
	if mounted, err := overlayMounted(s.Tree()); err != nil || mounted {
		// Never remove through a mounted overlay.
		return corral.Internal("close stage", fmt.Errorf("%s still mounted (%v)", s.Tree(), err))
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return corral.Internal("close stage", err)
	}
	return nil
}

// Source opens the staged content of a path for apply: from the overlay's
// upper layer directly (not through the mount), or from the copy; like
// DirSource, it never follows a symlink and opens only regular files.
func (s *Stage) Source() Source {
	if s.state.Overlay {
		return DirSource(filepath.Join(s.dir, stageUpperDir))
	}
	return DirSource(s.Tree())
}

// Overlay.

// errNoOverlay says overlayfs cannot be used here: the stage falls back to
// a copy.
var errNoOverlay = errors.New("overlayfs unavailable")

// overlayMagic is OVERLAYFS_SUPER_MAGIC.
const overlayMagic = 0x794c7630

func (s *Stage) stageOverlay(root fs.FileInfo, opt StageOptions) error {
	if strings.ContainsAny(s.persistent+s.dir, ",:\\") {
		// Overlay's mount options cannot carry these unescaped.
		return fmt.Errorf("%w: path with , : or \\", errNoOverlay)
	}
	s.state.Overlay = true
	layers := filepath.Join(s.dir, stageLayersDir)
	upper := filepath.Join(s.dir, stageUpperDir)
	for _, d := range []string{layers, filepath.Join(s.dir, stageWorkDir), s.Tree()} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	// The upper layer's root is the merged tree's root: it carries the
	// workspace root's mode and the sandbox user as owner.
	if err := os.Mkdir(upper, 0o700); err != nil {
		return err
	}
	if err := copyDirAttrs(upper, root, opt.UID, opt.GID); err != nil {
		return err
	}
	secrets := secretMatcher(s.state.Secrets)
	made := map[string]bool{}
	err := filepath.WalkDir(s.persistent, func(name string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := relSlash(s.persistent, name)
		if err != nil || rel == "." {
			return err
		}
		if !secrets.secret(rel) {
			return nil
		}
		if err := s.upperParents(rel, made); err != nil {
			return err
		}
		if err := unix.Mknod(filepath.Join(upper, filepath.FromSlash(rel)), unix.S_IFCHR, 0); err != nil {
			if errors.Is(err, syscall.EPERM) {
				return fmt.Errorf("%w: whiteout: %v", errNoOverlay, err)
			}
			return fmt.Errorf("whiteout %s: %w", rel, err)
		}
		s.state.Whiteouts = append(s.state.Whiteouts, rel)
		if de.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.mount()
}

// upperParents makes the upper layer's directories above rel, each with
// the attributes of its lower directory, as a copy-up would.
func (s *Stage) upperParents(rel string, made map[string]bool) error {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		if made[d] {
			continue
		}
		fi, err := os.Lstat(filepath.Join(s.persistent, filepath.FromSlash(d)))
		if err != nil {
			return err
		}
		up := filepath.Join(s.dir, stageUpperDir, filepath.FromSlash(d))
		if err := os.Mkdir(up, 0o700); err != nil {
			return err
		}
		if err := copyDirAttrs(up, fi, -1, -1); err != nil {
			return err
		}
		made[d] = true
	}
	return nil
}

// copyDirAttrs gives the directory name the mode, times and owner of fi;
// uid or gid > 0 replace fi's owner, -1 keeps it.
func copyDirAttrs(name string, fi fs.FileInfo, uid, gid int) error {
	st := fi.Sys().(*syscall.Stat_t)
	if uid <= 0 {
		uid = int(st.Uid)
	}
	if gid <= 0 {
		gid = int(st.Gid)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(name, uid, gid); err != nil {
			return err
		}
	}
	if err := os.Chmod(name, fi.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	return os.Chtimes(name, statTime(st.Atim), statTime(st.Mtim))
}

func (s *Stage) mount() error {
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,redirect_dir=off,metacopy=off,index=off",
		s.persistent, filepath.Join(s.dir, stageUpperDir), filepath.Join(s.dir, stageWorkDir))
	// nodev and nosuid: a device node or setuid file of the workspace is
	// data here, never a door on the host.
	err := unix.Mount("overlay", s.Tree(), "overlay", unix.MS_NODEV|unix.MS_NOSUID, opts)
	if err != nil {
		return fmt.Errorf("%w: mount: %v", errNoOverlay, err)
	}
	return nil
}

// unmount unmounts the overlay if it is mounted: at once when nothing uses
// it, else lazily (it leaves this namespace now, and goes when unused).
func (s *Stage) unmount() error {
	for {
		mounted, err := overlayMounted(s.Tree())
		if err != nil || !mounted {
			return err
		}
		err = unix.Unmount(s.Tree(), 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(s.Tree(), unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", s.Tree(), err)
		}
	}
}

// overlayMounted reports whether an overlay is mounted at dir.
func overlayMounted(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return st.Type == overlayMagic, nil
}

// Copy.

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
	if err := copyDirAttrs(tree, root, opt.UID, opt.GID); err != nil {
		return err
	}
	base := &copyBaseline{Files: map[string]baseFile{}}
	secrets := secretMatcher(s.state.Secrets)
	type dirTimes struct {
		name string
		fi   fs.FileInfo
	}
	var dirs []dirTimes
	err := filepath.WalkDir(s.persistent, func(name string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := relSlash(s.persistent, name)
		if err != nil || rel == "." {
			return err
		}
		if secrets.secret(rel) {
			if de.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
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
	return writeJSONFile(filepath.Join(s.dir, stageBaseFile), base)
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
