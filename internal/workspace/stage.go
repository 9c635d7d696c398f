package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"corral"
	"corral/internal/glob"
)

// StageOptions configure a stage.
type StageOptions struct {
	// Secrets are extra globs of secret files to leave out of the staged
	// tree (see package glob), besides .env and .env.* at any
	// depth and Corral's internal files (.corral at the root).
	Secrets []string
	// UID and GID own the staged tree's writable parts: the root of the
	// tree (the sandbox's host user). 0 leaves the owner as it is.
	UID, GID int
	// NoOverlay forces the copy fallback (tests, machines without
	// overlayfs).
	NoOverlay bool
	// DiskBytes and DiskInodes bound what the run may write into its
	// staged tree: the bytes and the files (directories, symlinks and
	// whiteouts included) past which a write fails with ENOSPC. 0 means
	// DefaultDiskBytes, DefaultDiskInodes. See disk_linux.go.
	DiskBytes, DiskInodes int64

	// noDisk stages without a filesystem of the stage's own: only for the
	// benchmark that measures what that filesystem costs. Nothing outside
	// this package can set it, so no run is ever unlimited.
	noDisk bool
}

// The disk limits of a stage that sets none: an agent's defaults, which
// the API shows (GET /api/limits).
const (
	DefaultDiskBytes  = corral.DefaultDiskBytes
	DefaultDiskInodes = corral.DefaultDiskInodes
)

func (o StageOptions) diskBytes() int64 {
	if o.DiskBytes > 0 {
		return o.DiskBytes
	}
	return DefaultDiskBytes
}

func (o StageOptions) diskInodes() int64 {
	if o.DiskInodes > 0 {
		return o.DiskInodes
	}
	return DefaultDiskInodes
}

// The layout of a stage's directory. The directory itself is root's, mode
// 0711: the sandbox user may pass through it to the tree and see nothing
// else. layers/ is 0700: only Corral touches the overlay's upper layer
// directly. The stage's own filesystem (disk.img) is mounted at layers/
// for an overlay, at tree/ for a copy.
const (
	stageStateFile = "stage.json"     // stageState: what OpenStage needs
	stageDiskFile  = "disk.img"       // the image of the stage's filesystem (see disk_linux.go)
	stageTreeDir   = "tree"           // the tree the run sees: overlay mount point, or the copy
	stageLayersDir = "layers"         // overlay only
	stageUpperDir  = "layers/upper"   // the overlay's upper layer: everything the run changed
	stageWorkDir   = "layers/work"    // the overlay's work directory
	stageBaseFile  = "baseline.json"  // copy only: what was copied (copyBaseline)
	stageStampFile = "baseline.stamp" // copy only: its ctime bounds the baseline's (see copyBaseline)
	stageManifest  = "manifest.json"  // the manifest, once taken: written last, durably
)

// stageState is written last by NewStage: a stage directory without it is
// an unfinished stage that OpenStage refuses.
type stageState struct {
	Version    int      `json:"version"`
	Persistent string   `json:"persistent"`
	Overlay    bool     `json:"overlay"`
	Volatile   bool     `json:"volatile"`  // the overlay is mounted volatile
	Secrets    []string `json:"secrets"`   // the globs the stage hid, for the manifest's deletes
	Whiteouts  []string `json:"whiteouts"` // overlay: the secrets whited out at staging
	BootID     string   `json:"boot_id"`   // the boot of the machine that made the stage
	// Disk: the stage has its own filesystem in disk.img. Stages made
	// before disk limits have none, and are re-opened as they were.
	Disk bool `json:"disk,omitempty"`
}

const stageStateVersion = 1

// secretMatcher decides which paths a stage hides from the run.
type secretMatcher struct {
	globs []string   // the stage's globs, as given
	names []string   // those without a slash: matched against each name
	paths [][]string // those with one, split into elements
}

func newSecretMatcher(globs []string) secretMatcher {
	m := secretMatcher{globs: globs}
	for _, g := range globs {
		if strings.Contains(g, "/") || g == "**" {
			m.paths = append(m.paths, strings.Split(strings.TrimPrefix(g, "/"), "/"))
		} else {
			m.names = append(m.names, g)
		}
	}
	return m
}

// secret reports whether the relative path p is hidden from a run: .env or
// .env.* at any depth (any case), .corral at the root, or one of the
// stage's globs; a path under a hidden directory is hidden too.
func (m secretMatcher) secret(p string) bool {
	return matchAny(secretGlobs, strings.ToLower(p)) || matchAny(m.globs, p)
}

// secretEntry is secret for a walk from the root, which has already
// skipped every hidden directory: only the entry itself needs checking,
// which keeps staging a large workspace cheap.
func (m secretMatcher) secretEntry(p, name string) bool {
	ln := strings.ToLower(name)
	if ln == ".env" || strings.HasPrefix(ln, ".env.") || (p == name && ln == ".corral") {
		return true
	}
	for _, g := range m.names {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	if len(m.paths) > 0 {
		elems := strings.Split(p, "/")
		for _, pat := range m.paths {
			if glob.Elems(pat, elems) {
				return true
			}
		}
	}
	return false
}

var secretGlobs = []string{".env", ".env.*", "/.corral"}

// Secret reports whether the workspace path p is a secret that runs never
// see: .env or .env.* at any depth (any case), .corral at the root, a path
// matching one of globs, or anything under such a directory.
func Secret(p string, globs []string) bool { return newSecretMatcher(globs).secret(p) }

// internalPath reports whether p is Corral's own (FlagInternal).
func internalPath(p string) bool {
	return glob.Match("/.corral", strings.ToLower(p))
}

// writeJSONFile replaces name with v atomically; with sync, durably.
func writeJSONFile(name string, v any, sync bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	return syncDir(filepath.Dir(name))
}

func readJSONFile(name string, v any) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// stagePaths checks and cleans the two directories of a stage: each must be
// absolute once made so, and neither may hold the other.
func stagePaths(persistent, dir string) (string, string, error) {
	p, err := filepath.Abs(persistent)
	if err != nil {
		return "", "", err
	}
	// The overlay resolves the lower layer's symlinks anyway; comparing
	// resolved paths keeps a symlinked stage directory from landing inside.
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(d)); err == nil {
		d = filepath.Join(r, filepath.Base(d))
	}
	within := func(a, b string) bool { // a is b or under it
		rel, err := filepath.Rel(b, a)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	if within(d, p) || within(p, d) {
		return "", "", fmt.Errorf("stage directory %s and workspace %s overlap", d, p)
	}
	return p, d, nil
}

// StagedFrom says whether the stage in dir was staged from the workspace
// persistent, by the state the stage keeps (both paths resolved as
// NewStage resolves them). A directory that holds no stage is not one.
func StagedFrom(dir, persistent string) (bool, error) {
	p, d, err := stagePaths(persistent, dir)
	if err != nil {
		return false, err
	}
	var st stageState
	if err := readJSONFile(filepath.Join(d, stageStateFile), &st); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	return st.Persistent == p, nil
}
