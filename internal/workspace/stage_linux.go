package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"corral"
	"corral/internal/glob"
)

// Stage is one run's staged tree of a persistent workspace.
//
// With overlayfs, the persistent workspace is the lower layer, read-only
// to the run; everything the run writes lands in the upper layer, so the
// manifest walks only what changed (see overlay_linux.go). Files the run
// changes are copied up with their lower owner: for the sandbox user to
// write a file, the persistent workspace itself must be owned by (or
// writable for) that user. Only the tree's root is given to
// StageOptions.UID/GID.
//
// Without overlayfs, the tree is a copy, and the stage records what it
// copied so the manifest compares against what the run was given (see
// copy_linux.go).
//
// Either way the run writes onto a filesystem of the stage's own, sized
// to StageOptions.DiskBytes and DiskInodes (plus, for a copy, what the
// copy takes), so the kernel stops a run that writes too much (see
// disk_linux.go).
//
// Durability: a stage is cheap to make because nothing is synced while
// the run works (the overlay is mounted volatile: no fsync on copy-up, no
// sync of the whole filesystem on unmount). Manifest makes the run's new
// files durable; a stage re-opened after the machine restarted is used
// only if Manifest had done so. Apply checks every new file's hash against
// the approved entry in any case.
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
// out in the overlay's upper layer, or not copied. EUNAVAIL where the
// machine cannot give the stage its own filesystem (see DiskAvailable).
func NewStage(persistent, dir string, opt StageOptions) (*Stage, error) {
	const op = "stage"
	for _, g := range opt.Secrets {
		if err := glob.Valid(g); err != nil {
			return nil, corral.Errorf(corral.EINVALID, "secret glob: %v", err)
		}
	}
	if opt.DiskBytes < 0 || opt.DiskInodes < 0 {
		return nil, corral.Errorf(corral.EINVALID, "disk limits must not be negative")
	}
	p, d, err := stagePaths(persistent, dir)
	if err != nil {
		return nil, corral.Errorf(corral.EINVALID, "%v", err)
	}
	root, err := os.Lstat(p)
	if err != nil || !root.IsDir() {
		return nil, corral.Errorf(corral.EINVALID, "workspace %s is not a directory", persistent)
	}
	if !opt.noDisk {
		if err := DiskAvailable(); err != nil {
			return nil, err
		}
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
	boot, err := bootID()
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	s := &Stage{persistent: p, dir: d, state: stageState{
		Version:    stageStateVersion,
		Persistent: p,
		Secrets:    slices.Clone(opt.Secrets),
		BootID:     boot,
		Disk:       !opt.noDisk,
	}}
	fail := func(err error) (*Stage, error) {
		RemoveStage(d)
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
			if err := unmountDisk(filepath.Join(d, stageLayersDir)); err != nil {
				return fail(err)
			}
			if err := os.RemoveAll(filepath.Join(d, stageLayersDir)); err != nil {
				return fail(err)
			}
			if err := os.Remove(s.diskImage()); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
	if err := writeJSONFile(filepath.Join(d, stageStateFile), s.state, false); err != nil {
		return fail(err)
	}
	return s, nil
}

// OpenStage re-opens a stage left on disk by an earlier process (a change
// set waits for review across restarts), re-mounting its filesystem and
// its overlay when they are no longer mounted (the filesystem checked with
// e2fsck first). After a restart of the machine, only a stage whose
// Manifest was taken can be re-opened (EUNAVAIL otherwise: RemoveStage
// it). opt is not used: a stage keeps what it was made with, its secrets
// included.
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
	boot, err := bootID()
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	s := &Stage{persistent: p, dir: d, state: st}
	if boot != st.BootID && !s.taken() {
		return nil, corral.Errorf(corral.EUNAVAIL, "the staged run did not survive a restart of the machine")
	}
	// One re-mount at a time: two at once would both find the stage
	// unmounted, and one could check the filesystem while the other has
	// it mounted.
	remountMu.Lock()
	defer remountMu.Unlock()
	if st.Disk {
		mounted, err := diskMounted(s.diskMount())
		if err != nil {
			return nil, corral.Internal(op, err)
		}
		if !mounted {
			// An overlay still mounted over the old filesystem would
			// write one image through two mounts.
			if over, err := overlayMounted(s.Tree()); err != nil || over {
				return nil, corral.Internal(op, fmt.Errorf("stage %s: overlay mounted without its filesystem (%v)", d, err))
			}
			if err := s.remountDisk(); err != nil {
				return nil, err
			}
		}
	}
	if st.Overlay {
		mounted, err := overlayMounted(s.Tree())
		if err != nil {
			return nil, corral.Internal(op, err)
		}
		if !mounted {
			if err := s.remount(); err != nil {
				return nil, corral.Internal(op, err)
			}
		}
	}
	return s, nil
}

// remountMu serialises OpenStage's checks and re-mounts.
var remountMu sync.Mutex

// Tree is the directory to bind at /workspace.
func (s *Stage) Tree() string { return filepath.Join(s.dir, stageTreeDir) }

// Overlay reports whether the tree is an overlay (else a copy).
func (s *Stage) Overlay() bool { return s.state.Overlay }

// Dir is the stage's own directory.
func (s *Stage) Dir() string { return s.dir }

// OverlayError says why the stage is a copy although an overlay was
// allowed; nil for an overlay, a forced copy, or a re-opened stage.
func (s *Stage) OverlayError() error { return s.noOverlay }

// Close unmounts the overlay and the stage's filesystem, and removes
// everything under the stage's directory, the directory and the image
// included. It is safe to call twice.
func (s *Stage) Close() error { return RemoveStage(s.dir) }

// RemoveStage removes the stage in dir, unmounting its overlay, then its
// filesystem (whose loop device then detaches itself): for a stage that
// cannot be opened any more, or that nobody holds.
func RemoveStage(dir string) error {
	tree := filepath.Join(dir, stageTreeDir)
	layers := filepath.Join(dir, stageLayersDir)
	if err := unmountOverlay(tree); err != nil {
		return corral.Internal("remove stage", err)
	}
	// The filesystem is at layers/ under an overlay, at tree/ for a copy.
	for _, m := range []string{layers, tree} {
		if err := unmountDisk(m); err != nil {
			return corral.Internal("remove stage", err)
		}
	}
	// Never remove through a mount.
	if mounted, err := overlayMounted(tree); err != nil || mounted {
		return corral.Internal("remove stage", fmt.Errorf("%s still mounted (%v)", tree, err))
	}
	for _, m := range []string{layers, tree} {
		if mounted, err := diskMounted(m); err != nil || mounted {
			return corral.Internal("remove stage", fmt.Errorf("%s still mounted (%v)", m, err))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return corral.Internal("remove stage", err)
	}
	return nil
}

// Source opens the staged content of a path for apply: from the overlay's
// upper layer directly (not through the mount), or from the copy; like
// DirSource, it never follows a symlink and opens only regular files.
func (s *Stage) Source() Source { return DirSource(s.newRoot()) }

// newRoot is where the run's new files are.
func (s *Stage) newRoot() string {
	if s.state.Overlay {
		return filepath.Join(s.dir, stageUpperDir)
	}
	return s.Tree()
}

// taken reports whether the manifest is taken (see Manifest).
func (s *Stage) taken() bool {
	_, err := os.Lstat(filepath.Join(s.dir, stageManifest))
	return err == nil
}

// sync makes the new files of m durable, with every directory above them
// and the stage's state: a stage that survives a restart of the machine
// can still give apply its content.
func (s *Stage) sync(m Manifest) error {
	root := s.newRoot()
	dirs := map[string]bool{"": true}
	for _, e := range m {
		if e.Op == OpDelete {
			continue
		}
		for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		if !e.Mode.IsRegular() {
			continue
		}
		if err := syncBeneath(root, e.Path); err != nil {
			return err
		}
	}
	for d := range dirs {
		fd, err := openDirBeneath(root, d)
		if err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
		err = unix.Fsync(fd)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
	}
	return syncBeneath(s.dir, stageStateFile)
}

// syncBeneath fsyncs the regular file root/p, reached without symlinks.
func syncBeneath(root, p string) error {
	dir, name := path.Split(p)
	dfd, err := openDirBeneath(root, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return nil
}

// bootID names this boot of the machine.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
