package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/containerd/cgroups/v3"
)

// cgroup v1.

// v1Dir is the sandbox's directory in one v1 hierarchy.
type v1Dir struct {
	controller string // one controller of the hierarchy, to find it in /proc/<pid>/cgroup
	dir        string
	self       string // as /proc/<pid>/cgroup names it
}

type cgroupV1 struct {
	dirs []v1Dir // one per hierarchy, memory's first
	// The directories holding each controller's files; freezer is "" when
	// the freezer hierarchy is not mounted.
	memory, pids, cpuacct, freezer string
}

// makeV1 creates the cgroup name in the hierarchies of hs.
func makeV1(hs map[string]*hierarchy, name string) (*cgroupV1, error) {
	c := &cgroupV1{}
	byDir := map[string]bool{}
	for _, ctrl := range append(slices.Clone(v1Needed), "freezer") {
		h := hs[ctrl]
		if h == nil {
			continue // the freezer, which is optional; choose checked the others
		}
		d := v1Dir{ctrl, filepath.Join(h.dir, cgroupParent, name), filepath.Join(h.self, cgroupParent, name)}
		switch ctrl {
		case "memory":
			c.memory = d.dir
		case "pids":
			c.pids = d.dir
		case "cpuacct":
			c.cpuacct = d.dir
		case "freezer":
			c.freezer = d.dir
		}
		if byDir[d.dir] {
			continue // two of these controllers mounted together
		}
		byDir[d.dir] = true
		if err := makeV1Dir(d.dir); err != nil {
			removeDirs(c.dirNames())
			return nil, fmt.Errorf("sandbox: cgroup controller %q: %w", ctrl, err)
		}
		c.dirs = append(c.dirs, d)
	}
	return c, nil
}

func makeV1Dir(dir string) error {
	parent := filepath.Dir(dir)
	for attempt := 1; ; attempt++ {
		err := mkdirExisting(parent)
		if err == nil {
			err = os.Mkdir(dir, 0o755)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("cgroup %s already exists", dir)
			}
		}
		// The parent may vanish under us: an operator, or an older
		// version that removed it with its last sandbox, may remove it.
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt == 5 {
			return err
		}
	}
}

func (c *cgroupV1) dirNames() []string {
	var names []string
	for _, d := range c.dirs {
		names = append(names, d.dir)
	}
	return names
}

func (c *cgroupV1) path() string { return c.memory }

func (c *cgroupV1) intoFD() (int, bool) { return -1, false }

func (c *cgroupV1) add(pid int) error {
	for _, d := range c.dirs {
		if err := writeFile(filepath.Join(d.dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("sandbox: add process %d to cgroup: %w", pid, err)
		}
	}
	return nil
}

func (c *cgroupV1) limit(l Limits) error {
	mem := strconv.FormatInt(l.Memory, 10)
	set := func(file, value string) error {
		if err := writeFile(filepath.Join(c.memory, file), value); err != nil {
			return fmt.Errorf("sandbox: cgroup controller \"memory\": %w", err)
		}
		return nil
	}
	if err := set("memory.limit_in_bytes", mem); err != nil {
		return err
	}
	// memory.memsw.* exist only when the kernel accounts swap; the limit of
	// memory and swap together then equals that of memory: no swap beyond
	// it. It is set after memory.limit_in_bytes, which may not exceed it.
	if _, err := os.Stat(filepath.Join(c.memory, "memory.memsw.limit_in_bytes")); err == nil {
		if err := set("memory.memsw.limit_in_bytes", mem); err != nil {
			return err
		}
	}
	// Reclaim for this cgroup's limit does not swap, whether or not swap is
	// accounted.
	if err := set("memory.swappiness", "0"); err != nil {
		return err
	}
	// A new v1 memory cgroup inherits oom_kill_disable from its parent; with
	// it set, a process over the limit would hang instead of being killed.
	if err := set("memory.oom_control", "0"); err != nil {
		return err
	}
	if v, err := readKey(filepath.Join(c.memory, "memory.oom_control"), "oom_kill_disable"); err != nil || v != 0 {
		return fmt.Errorf("sandbox: cgroup controller \"memory\": oom_kill_disable stays %d (%v)", v, err)
	}
	if err := writeFile(filepath.Join(c.pids, "pids.max"), strconv.FormatInt(l.Pids, 10)); err != nil {
		return fmt.Errorf("sandbox: cgroup controller \"pids\": %w", err)
	}
	return nil
}

func (c *cgroupV1) usage() (usage, error) {
	var u usage
	ns, err := readInt(filepath.Join(c.cpuacct, "cpuacct.usage"))
	if err != nil {
		return usage{}, err
	}
	u.CPU = time.Duration(ns)
	oom, err := readKeyed(filepath.Join(c.memory, "memory.oom_control"))
	if err != nil {
		return usage{}, err
	}
	if n, ok := oom["oom_kill"]; ok {
		u.OOMKills = n
	} else {
		// Before Linux 4.13: see usage.OOMKills.
		failcnt, err := readInt(filepath.Join(c.memory, "memory.failcnt"))
		if err != nil {
			return usage{}, err
		}
		u.OOMKills = min(failcnt, 1)
	}
	if u.PidsMax, err = readKey(filepath.Join(c.pids, "pids.events"), "max"); err != nil {
		return usage{}, err
	}
	return u, nil
}

// kill freezes the cgroup when it can, SIGKILLs each process, thaws it and
// repeats until no process is left: v1 has no cgroup.kill.
func (c *cgroupV1) kill() error {
	var dirs []procsDir
	for _, d := range c.dirs {
		member := func(pid int) bool {
			paths, _, err := cgroups.ParseCgroupFileUnified(fmt.Sprintf("/proc/%d/cgroup", pid))
			return err == nil && within(paths[d.controller], d.self)
		}
		dirs = append(dirs, procsDir{d.dir, member})
	}
	return killEach(dirs, c.freeze, time.Now().Add(killTimeout))
}

// freeze freezes or thaws the cgroup with the freezer controller, if there
// is one, waiting a little for it to be frozen. Errors are ignored: kill
// works unfrozen too, only a process forking meanwhile takes it another
// round.
func (c *cgroupV1) freeze(on bool) {
	if c.freezer == "" {
		return
	}
	state, value := filepath.Join(c.freezer, "freezer.state"), "THAWED"
	if on {
		value = "FROZEN"
	}
	if writeFile(state, value) != nil || !on {
		return
	}
	for range 100 {
		if b, err := os.ReadFile(state); err != nil || string(bytes.TrimSpace(b)) == "FROZEN" {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (c *cgroupV1) remove() error { return removeDirs(c.dirNames()) }
