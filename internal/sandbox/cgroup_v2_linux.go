package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// cgroup v2.

type cgroupV2 struct {
	dir  string // <mount>/<current>/corral/<name>
	self string // as /proc/<pid>/cgroup names it

	mu sync.Mutex
	fd int // O_PATH fd of dir; -1 once removed
}

// makeV2 creates the cgroup name under h with the controllers ctrls.
//
// cgroup v2 hands controllers down only from a cgroup without processes of
// its own, and the server's own cgroup holds the server. So when h cannot
// hand them down, the sandboxes go under h's parent instead, if that one
// can: the layout systemd gives a service with Delegate=yes and
// DelegateSubgroup= (the server in a leaf, the delegated parent empty).
func makeV2(h *hierarchy, name string, ctrls []string) (*cgroupV2, error) {
	if err := enableV2(h.dir, ctrls); err != nil {
		up := &hierarchy{self: path.Dir(h.self), dir: filepath.Dir(h.dir)}
		if !errors.Is(err, errHoldsProcesses) || h.self == "/" || enableV2(up.dir, ctrls) != nil {
			return nil, err
		}
		h = up
	}
	parent := filepath.Join(h.dir, cgroupParent)
	dir := filepath.Join(parent, name)
	// The parent may vanish under us (an operator, or an older version
	// that removed it with its last sandbox, may remove it): then we make
	// it again.
	for attempt := 1; ; attempt++ {
		err := mkdirExisting(parent)
		if err == nil {
			err = enableV2(parent, ctrls)
		}
		if err == nil {
			err = os.Mkdir(dir, 0o755)
			if errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("sandbox: cgroup %s already exists", dir)
			}
		}
		if err == nil {
			var have []string
			have, err = readFields(filepath.Join(dir, "cgroup.controllers"))
			for _, c := range ctrls {
				if err == nil && !slices.Contains(have, c) {
					// The parent was made again without them.
					unix.Rmdir(dir)
					err = fs.ErrNotExist
				}
			}
		}
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 5 {
			unix.Rmdir(dir)
			unix.Rmdir(parent)
			return nil, fmt.Errorf("sandbox: create cgroup %s: %w", dir, err)
		}
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Rmdir(dir)
		unix.Rmdir(parent)
		return nil, fmt.Errorf("sandbox: open cgroup %s: %w", dir, err)
	}
	return &cgroupV2{dir: dir, self: filepath.Join(h.self, cgroupParent, name), fd: fd}, nil
}

// errHoldsProcesses: a cgroup v2 with processes of its own cannot hand
// controllers to child cgroups.
var errHoldsProcesses = errors.New("the cgroup holds processes")

// enableV2 makes the controllers ctrls of dir available to its children.
func enableV2(dir string, ctrls []string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	have, err := readFields(file)
	if err != nil && len(ctrls) > 0 {
		return fmt.Errorf("sandbox: cgroup v2: %w", err)
	}
	for _, c := range ctrls {
		if slices.Contains(have, c) {
			continue
		}
		err := writeFile(file, "+"+c)
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("sandbox: cgroup controller %q cannot be enabled in %s: %w "+
				"(cgroup v2 gives a controller to child cgroups only from the root or from a cgroup without processes of its own; "+
				"run Corral in a delegated cgroup with the server in a leaf, e.g. systemd Delegate=yes and DelegateSubgroup=server)",
				c, file, errHoldsProcesses)
		}
		if err != nil {
			return fmt.Errorf("sandbox: cgroup controller %q: %w", c, err)
		}
	}
	return nil
}

func (c *cgroupV2) path() string { return c.dir }

func (c *cgroupV2) intoFD() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fd, c.fd >= 0
}

func (c *cgroupV2) add(pid int) error {
	return writeFile(filepath.Join(c.dir, "cgroup.procs"), strconv.Itoa(pid))
}

func (c *cgroupV2) limit(l Limits) error {
	if err := writeFile(filepath.Join(c.dir, "memory.max"), strconv.FormatInt(l.Memory, 10)); err != nil {
		return fmt.Errorf("sandbox: cgroup controller \"memory\": %w", err)
	}
	// memory.swap.max is missing when the kernel accounts no swap (no swap
	// support, or swapaccount=0): then there is no limit to set.
	swap := filepath.Join(c.dir, "memory.swap.max")
	if err := writeFile(swap, "0"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox: cgroup controller \"memory\": %w", err)
	}
	if err := writeFile(filepath.Join(c.dir, "pids.max"), strconv.FormatInt(l.Pids, 10)); err != nil {
		return fmt.Errorf("sandbox: cgroup controller \"pids\": %w", err)
	}
	return nil
}

func (c *cgroupV2) usage() (usage, error) {
	var u usage
	var err error
	if u.CPU, err = cpuV2(c.dir); err != nil {
		return usage{}, err
	}
	if u.OOMKills, err = readKey(filepath.Join(c.dir, "memory.events"), "oom_kill"); err != nil {
		return usage{}, err
	}
	if u.PidsMax, err = readKey(filepath.Join(c.dir, "pids.events"), "max"); err != nil {
		return usage{}, err
	}
	return u, nil
}

// cpuV2 reads the CPU time of a v2 cgroup, which needs no controller.
func cpuV2(dir string) (time.Duration, error) {
	us, err := readKey(filepath.Join(dir, "cpu.stat"), "usage_usec")
	return time.Duration(us) * time.Microsecond, err
}

func (c *cgroupV2) kill() error {
	deadline := time.Now().Add(killTimeout)
	// cgroup.kill (Linux 5.14) kills every process, those forking meanwhile
	// included.
	err := writeFile(filepath.Join(c.dir, "cgroup.kill"), "1")
	if errors.Is(err, fs.ErrNotExist) {
		return c.killBySignal(deadline)
	}
	if err != nil {
		return fmt.Errorf("sandbox: kill cgroup %s: %w", c.dir, err)
	}
	return waitEmpty([]string{c.dir}, deadline)
}

// killBySignal kills the processes one by one, for kernels without
// cgroup.kill.
func (c *cgroupV2) killBySignal(deadline time.Time) error {
	member := func(pid int) bool {
		_, p, err := cgroups.ParseCgroupFileUnified(fmt.Sprintf("/proc/%d/cgroup", pid))
		return err == nil && within(p, c.self)
	}
	return killEach([]procsDir{{c.dir, member}}, c.freeze, deadline)
}

// freeze freezes or thaws the cgroup (cgroup.freeze, Linux 5.2), waiting a
// little for it to be frozen. Errors are ignored: kill works unfrozen too,
// only a process forking meanwhile takes it another round.
func (c *cgroupV2) freeze(on bool) {
	value := "0"
	if on {
		value = "1"
	}
	if writeFile(filepath.Join(c.dir, "cgroup.freeze"), value) != nil || !on {
		return
	}
	for range 100 {
		if frozen, err := readKey(filepath.Join(c.dir, "cgroup.events"), "frozen"); err != nil || frozen == 1 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (c *cgroupV2) remove() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := removeDirs([]string{c.dir}); err != nil {
		return err
	}
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	return nil
}
