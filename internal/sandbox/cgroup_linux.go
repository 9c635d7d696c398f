package sandbox

// A sandbox's cgroup holds its memory and process limits and counts what
// the watchdog reads. It is nested under the server's own cgroup, at
// "<current>/corral/<name>" in each hierarchy, so whatever limits the server
// runs under also bound its sandboxes.
//
// Both cgroup v2 and v1 are supported. v2 is used when this process's cgroup
// in the unified hierarchy offers the memory and pids controllers; otherwise
// the v1 memory, pids and cpuacct hierarchies must all be mounted (the
// freezer is used when present). Anything less is refused: a sandbox never
// runs without its limits.
//
// Only /proc/self/cgroup is parsed through github.com/containerd/cgroups;
// the cgroupfs files are read and written here. Its cgroup1 and cgroup2
// packages would pull in systemd, D-Bus, eBPF, protobuf and logrus modules
// for what is a handful of file writes, and do not fit: cgroup1 finds
// hierarchies at <root>/<controller> only, waits for the freezer without a
// bound and reads no pids.events; cgroup2 enables controllers in every
// ancestor, logs through a global logger and has no CLONE_INTO_CGROUP fd.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// usage is what the watchdog reads while a sandbox runs.
type usage struct {
	// CPU time used by all processes of the cgroup so far.
	CPU time.Duration
	// OOMKills counts the processes the kernel killed for memory: v2
	// memory.events oom_kill, v1 memory.oom_control oom_kill. A v1 kernel
	// older than 4.13 has no such counter; OOMKills is then 1 once
	// memory.failcnt > 0, which says only that the limit was reached: it was
	// an OOM kill if a process of the sandbox also died of a SIGKILL that
	// the watchdog did not send, and the caller must check that.
	OOMKills int64
	// PidsMax counts the forks that failed because pids.max was reached
	// (pids.events "max").
	PidsMax int64
}

// cgroup is the cgroup of one sandbox.
type cgroup interface {
	// path names the cgroup in error messages.
	path() string
	// intoFD returns, on v2, an O_PATH descriptor of the cgroup's directory
	// for SysProcAttr.CgroupFD, so that the child is born inside it. The
	// cgroup owns the descriptor. On v1 it returns -1, false.
	intoFD() (int, bool)
	// add moves a process into the cgroup. Its children forked before the
	// move stay outside: move it before it forks. Needed only when intoFD
	// returns false.
	add(pid int) error
	usage() (usage, error)
	// kill SIGKILLs every process of the cgroup and waits until none is
	// left, or fails after killTimeout. Killing a removed cgroup does
	// nothing.
	kill() error
	// remove removes the cgroup's directories; it fails while processes
	// remain. Removing a removed cgroup does nothing.
	remove() error
}

// mountinfoFile is where this process's mounts are listed. Tests point it
// at a fake to see newCgroup refuse a host that lacks a controller.
var mountinfoFile = "/proc/self/mountinfo"

const (
	// cgroupParent is the directory, under the server's own cgroup, that
	// holds the sandboxes' cgroups.
	cgroupParent = "corral"
	// killTimeout bounds how long kill waits for the processes to go.
	killTimeout = 5 * time.Second
)

var (
	// v1Needed are the v1 controllers a sandbox needs: memory and pids for
	// its limits, cpuacct for its CPU time.
	v1Needed = []string{"memory", "pids", "cpuacct"}
	// v2Needed are the v2 controllers a sandbox needs. CPU time needs none:
	// every v2 cgroup's cpu.stat reports usage_usec.
	v2Needed = []string{"memory", "pids"}
)

// newCgroup creates the cgroup of the sandbox name (unique among running
// sandboxes) with the memory (no swap) and pids limits of l; zero fields take
// the defaults.
func newCgroup(name string, l Limits) (cgroup, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return nil, fmt.Errorf("sandbox: invalid cgroup name %q", name)
	}
	l = l.withDefaults()
	if l.Memory < 0 || l.Pids < 0 {
		return nil, fmt.Errorf("sandbox: negative cgroup limit (memory %d, pids %d)", l.Memory, l.Pids)
	}
	host, err := findCgroups()
	if err != nil {
		return nil, err
	}
	useV2, err := host.choose()
	if err != nil {
		return nil, err
	}
	var c interface {
		cgroup
		limit(Limits) error
	}
	if useV2 {
		c, err = makeV2(host.v2, name, v2Needed)
	} else {
		c, err = makeV1(host.v1, name)
	}
	if err != nil {
		return nil, err
	}
	if err := c.limit(l); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// probeCgroups reports whether newCgroup can work here, naming what is
// missing, by creating and removing a cgroup.
func probeCgroups() error {
	c, err := newCgroup(fmt.Sprintf("probe-%d-%d", os.Getpid(), time.Now().UnixNano()), DefaultLimits)
	if err != nil {
		return err
	}
	if _, err := c.usage(); err != nil {
		c.remove()
		return err
	}
	return c.remove()
}

// Finding the hierarchies.

// hierarchy is a cgroup hierarchy as this process sees it.
type hierarchy struct {
	self string // this process's cgroup, as /proc/self/cgroup names it
	dir  string // the directory of that cgroup
}

// cgroupHost is what this process can use of the host's cgroups.
type cgroupHost struct {
	v2 *hierarchy            // nil without a cgroup2 mount holding this process's cgroup
	v1 map[string]*hierarchy // by controller, for v1Needed and the freezer
}

type mount struct {
	root, point, fstype string
	options             []string // the superblock's options: a v1 hierarchy's controllers
}

func findCgroups() (cgroupHost, error) {
	v1Paths, v2Path, err := cgroups.ParseCgroupFileUnified("/proc/self/cgroup")
	if err != nil {
		return cgroupHost{}, fmt.Errorf("sandbox: read this process's cgroups: %w", err)
	}
	mounts, err := readMounts(mountinfoFile)
	if err != nil {
		return cgroupHost{}, err
	}
	host := cgroupHost{v1: map[string]*hierarchy{}}
	if v2Path != "" {
		host.v2 = findHierarchy(mounts, "cgroup2", "", v2Path, unix.CGROUP2_SUPER_MAGIC)
	}
	for _, c := range append(slices.Clone(v1Needed), "freezer") {
		if p, ok := v1Paths[c]; ok {
			if h := findHierarchy(mounts, "cgroup", c, p, unix.CGROUP_SUPER_MAGIC); h != nil {
				host.v1[c] = h
			}
		}
	}
	return host, nil
}

// findHierarchy finds the mount of type fstype (holding controller, for v1)
// under which the cgroup self lies, and checks that it is a cgroup
// filesystem of the given magic.
func findHierarchy(mounts []mount, fstype, controller, self string, magic int64) *hierarchy {
	for _, m := range mounts {
		if m.fstype != fstype || controller != "" && !slices.Contains(m.options, controller) {
			continue
		}
		// A mount may show a subtree only (a container's view without a
		// cgroup namespace): self must lie inside it.
		rel, err := filepath.Rel(m.root, self)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		var st unix.Statfs_t
		if unix.Statfs(m.point, &st) != nil || int64(st.Type) != magic {
			continue
		}
		return &hierarchy{self: self, dir: filepath.Join(m.point, rel)}
	}
	return nil
}

// choose says whether to use v2, or why neither version can be used.
func (h cgroupHost) choose() (useV2 bool, err error) {
	missing2 := "cgroup2"
	if h.v2 != nil {
		have, err := readFields(filepath.Join(h.v2.dir, "cgroup.controllers"))
		if err != nil {
			return false, fmt.Errorf("sandbox: cgroup v2: %w", err)
		}
		missing2 = ""
		for _, c := range v2Needed {
			if !slices.Contains(have, c) {
				missing2 = c
				break
			}
		}
		if missing2 == "" {
			return true, nil
		}
	}
	for _, c := range v1Needed {
		if h.v1[c] != nil {
			continue
		}
		if h.v2 != nil && len(h.v1) == 0 {
			// A v2-only host: its v2 is what lacks something.
			return false, fmt.Errorf("sandbox: cgroup controller %q is not available (not in %s)",
				missing2, filepath.Join(h.v2.dir, "cgroup.controllers"))
		}
		why := "cgroup v1 hierarchy not mounted, nor cgroup v2"
		if h.v2 != nil {
			why = fmt.Sprintf("cgroup v1 hierarchy not mounted, and cgroup v2 at %s lacks %q", h.v2.dir, missing2)
		}
		return false, fmt.Errorf("sandbox: cgroup controller %q is not available (%s)", c, why)
	}
	return false, nil
}

// readMounts parses a mountinfo file (proc(5)).
func readMounts(file string) ([]mount, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("sandbox: read mounts: %w", err)
	}
	var mounts []mount
	for line := range strings.Lines(string(data)) {
		// ID parent major:minor root point options [optional...] - fstype source superoptions
		before, after, ok := strings.Cut(strings.TrimSpace(line), " - ")
		f, g := strings.Fields(before), strings.Fields(after)
		if !ok || len(f) < 5 || len(g) < 3 {
			return nil, fmt.Errorf("sandbox: %s: bad line %q", file, line)
		}
		mounts = append(mounts, mount{
			root:    unescapeMountinfo(f[3]),
			point:   unescapeMountinfo(f[4]),
			fstype:  g[0],
			options: strings.Split(g[2], ","),
		})
	}
	return mounts, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Killing and removing, both versions.

// procsDir is a cgroup directory whose processes are to be killed, with a
// check that a pid is (still) one of them.
type procsDir struct {
	dir    string
	member func(pid int) bool
}

// killEach SIGKILLs the processes of dirs round after round, freezing them
// while it signals so that none can fork one it would miss, until none is
// left or the deadline passes.
//
// Each round first looks whether any process is left, without freezing:
// most often none is (a session's processes die with its init, before its
// cgroup is killed), and a process cannot join an empty cgroup by itself.
// A freeze and thaw would then be two writes and a wait for nothing.
//
// A pid read from cgroup.procs may have been reused once its process ended,
// so each is opened as a pidfd first, and only then checked to be in the
// cgroup: the pidfd stays with the process it opened, and if that process
// ended meanwhile, signalling it does nothing.
func killEach(dirs []procsDir, freeze func(on bool), deadline time.Time) error {
	var paths []string
	for _, d := range dirs {
		paths = append(paths, d.dir)
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if left, err := countPids(paths); err != nil || left == 0 {
			return err
		}
		freeze(true)
		left := 0
		for _, d := range dirs {
			pids, err := readPids(d.dir)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed: no process can be in it
			}
			if err != nil {
				freeze(false)
				return fmt.Errorf("sandbox: kill cgroup: %w", err)
			}
			left += len(pids)
			for _, pid := range pids {
				fd, err := unix.PidfdOpen(pid, 0)
				if err != nil {
					continue // gone
				}
				if d.member(pid) {
					unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				}
				unix.Close(fd)
			}
		}
		freeze(false)
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: kill cgroup %s: %d processes left after %v", dirs[0].dir, left, killTimeout)
		}
		time.Sleep(delay)
	}
}

// countPids counts the processes in dirs; a removed directory holds none.
func countPids(dirs []string) (int, error) {
	left := 0
	for _, dir := range dirs {
		pids, err := readPids(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("sandbox: kill cgroup: %w", err)
		}
		left += len(pids)
	}
	return left, nil
}

// waitEmpty waits until no process is left in dirs, or the deadline passes.
func waitEmpty(dirs []string, deadline time.Time) error {
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		left, err := countPids(dirs)
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: kill cgroup %s: %d processes left after %v", dirs[0], left, killTimeout)
		}
		time.Sleep(delay)
	}
}

// removeDirs removes the cgroup directories dirs, none of which may hold a
// process. Their parent (cgroupParent) stays, empty, for the next sandbox:
// removing it with the last sandbox and making it again (and, on v2,
// enabling its controllers again) cost each sandbox of a server that runs
// one at a time two more directories per hierarchy to make and remove.
func removeDirs(dirs []string) error {
	for _, dir := range dirs {
		pids, err := readPids(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sandbox: remove cgroup: %w", err)
		}
		if len(pids) > 0 {
			return fmt.Errorf("sandbox: remove cgroup %s: %d processes left", dir, len(pids))
		}
	}
	for _, dir := range dirs {
		// The kernel may still be taking a just-emptied cgroup apart.
		var err error
		for range 20 {
			if err = unix.Rmdir(dir); err != unix.EBUSY {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil && err != unix.ENOENT {
			return fmt.Errorf("sandbox: remove cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// Files.

// within says whether the cgroup p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func mkdirExisting(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// writeFile writes value to an existing cgroupfs file: a missing one is an
// error (fs.ErrNotExist), never created.
func writeFile(file, value string) error {
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readFields(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	return strings.Fields(string(b)), err
}

func readInt(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", file, err)
	}
	return n, nil
}

func readPids(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, "cgroup.procs"), err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// readKeyed reads a flat-keyed file ("key value" lines).
func readKeyed(file string) (map[string]int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		m[k] = n
	}
	return m, nil
}

// readKey reads one key of a flat-keyed file; a missing key is an error.
func readKey(file, key string) (int64, error) {
	m, err := readKeyed(file)
	if err != nil {
		return 0, err
	}
	n, ok := m[key]
	if !ok {
		return 0, fmt.Errorf("%s has no %q", file, key)
	}
	return n, nil
}
