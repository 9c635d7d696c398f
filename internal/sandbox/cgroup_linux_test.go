package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/internal/kerneltest"
	"corral/internal/poll"
)

// requireCgroups skips a test that needs to create cgroups where it cannot.
func requireCgroups(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "creating cgroups needs root")
	}
	if err := probeCgroups(); err != nil {
		kerneltest.Skip(t, "cgroups unavailable: %v", err)
	}
}

// testCgroupName is a cgroup name unique to this test and run.
func testCgroupName(t *testing.T) string {
	return fmt.Sprintf("test-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}

// newTestCgroup creates a cgroup that is killed and removed when the test
// ends, and checks that its directories are gone then.
func newTestCgroup(t *testing.T, l Limits) cgroup {
	t.Helper()
	cg, err := newCgroup(testCgroupName(t), l)
	if err != nil {
		t.Fatalf("newCgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := cg.kill(); err != nil {
			t.Errorf("kill: %v", err)
		}
		if err := cg.remove(); err != nil {
			t.Errorf("remove: %v", err)
		}
		for _, dir := range cgroupDirs(cg) {
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("cgroup %s still there after remove (stat: %v)", dir, err)
			}
		}
	})
	return cg
}

// cgroupDirs maps each controller the sandbox needs to its directory.
func cgroupDirs(cg cgroup) map[string]string {
	switch c := cg.(type) {
	case *cgroupV1:
		return map[string]string{"memory": c.memory, "pids": c.pids, "cpuacct": c.cpuacct}
	case *cgroupV2:
		return map[string]string{"memory": c.dir, "pids": c.dir}
	}
	panic(fmt.Sprintf("unknown cgroup %T", cg))
}

// startIn starts argv with its process in cg before it runs anything: born
// there through the cgroup's fd on v2; on v1 held on a read from stdin
// until add has moved it. The process is killed and reaped when the test
// ends.
func startIn(t *testing.T, cg cgroup, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read _ && exec "$@"`, "sh"}, argv...)...)
	fd, born := cg.intoFD()
	if born {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	gate, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", argv, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if !born {
		if err := cg.add(cmd.Process.Pid); err != nil {
			t.Fatalf("add: %v", err)
		}
	}
	if _, err := gate.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	gate.Close()
	return cmd
}

// waitSignal waits for cmd and returns the signal that ended it, if any.
func waitSignal(t *testing.T, cmd *exec.Cmd) syscall.Signal {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait: %v", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

func readTrimmed(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestCgroupLimits(t *testing.T) {
	requireCgroups(t)
	l := Limits{Memory: 48 << 20, Pids: 17}
	cg := newTestCgroup(t, l)
	dirs := cgroupDirs(cg)
	mem := strconv.FormatInt(l.Memory, 10)

	want := map[string]string{filepath.Join(dirs["pids"], "pids.max"): "17"}
	switch cg.(type) {
	case *cgroupV1:
		want[filepath.Join(dirs["memory"], "memory.limit_in_bytes")] = mem
		if _, err := os.Stat(filepath.Join(dirs["memory"], "memory.memsw.limit_in_bytes")); err == nil {
			want[filepath.Join(dirs["memory"], "memory.memsw.limit_in_bytes")] = mem
		}
		want[filepath.Join(dirs["memory"], "memory.swappiness")] = "0"
		oom := readTrimmed(t, filepath.Join(dirs["memory"], "memory.oom_control"))
		if !strings.Contains(oom, "oom_kill_disable 0") {
			t.Errorf("memory.oom_control = %q, want oom_kill_disable 0", oom)
		}
	case *cgroupV2:
		want[filepath.Join(dirs["memory"], "memory.max")] = mem
		if _, err := os.Stat(filepath.Join(dirs["memory"], "memory.swap.max")); err == nil {
			want[filepath.Join(dirs["memory"], "memory.swap.max")] = "0"
		}
	}
	for file, v := range want {
		if got := readTrimmed(t, file); got != v {
			t.Errorf("%s = %q, want %q", file, got, v)
		}
	}
	t.Logf("cgroup %T at %s", cg, cg.path())

	u, err := cg.usage()
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	if u != (usage{}) {
		t.Errorf("usage of a new cgroup = %+v, want zeros", u)
	}
	// Cleanup removes it and checks the directories are gone; removing
	// twice must do no harm.
	if err := cg.remove(); err != nil {
		t.Fatalf("remove: %v", err)
	}
}

func TestCgroupProcess(t *testing.T) {
	requireCgroups(t)
	cg := newTestCgroup(t, Limits{})

	before, err := cg.usage()
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	busy := startIn(t, cg, "sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
	if sig := waitSignal(t, busy); sig != 0 || !busy.ProcessState.Success() {
		t.Fatalf("busy child: %v", busy.ProcessState)
	}
	after, err := cg.usage()
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	if after.CPU <= before.CPU {
		t.Errorf("CPU after a busy child = %v, want more than %v", after.CPU, before.CPU)
	}

	sleep := startIn(t, cg, "sleep", "60")
	procs := filepath.Join(cgroupDirs(cg)["memory"], "cgroup.procs")
	if got := readTrimmed(t, procs); got != strconv.Itoa(sleep.Process.Pid) {
		t.Errorf("cgroup.procs = %q, want the sleep's pid %d", got, sleep.Process.Pid)
	}
	if err := cg.kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	for _, dir := range cgroupDirs(cg) {
		if got := readTrimmed(t, filepath.Join(dir, "cgroup.procs")); got != "" {
			t.Errorf("%s/cgroup.procs after kill = %q, want empty", dir, got)
		}
	}
	if sig := waitSignal(t, sleep); sig != syscall.SIGKILL {
		t.Errorf("sleep ended by %v (%v), want SIGKILL", sig, sleep.ProcessState)
	}
	if err := cg.remove(); err != nil {
		t.Fatalf("remove: %v", err)
	}
}

// forkSleeps is a shell that forks 20 background sleeps and waits.
const forkSleeps = `i=0; while [ $i -lt 20 ]; do sleep 60 & i=$((i+1)); done; wait`

func TestCgroupPidsMax(t *testing.T) {
	requireCgroups(t)
	cg := newTestCgroup(t, Limits{Pids: 5})
	startIn(t, cg, "sh", "-c", forkSleeps)

	var u usage
	if !poll.Eventually(10*time.Second, func() bool {
		var err error
		if u, err = cg.usage(); err != nil {
			t.Fatalf("usage: %v", err)
		}
		return u.PidsMax != 0
	}) {
		t.Errorf("PidsMax = 0 after forking 20 processes with pids.max 5")
	}
	pidsDir := cgroupDirs(cg)["pids"]
	if n, err := strconv.Atoi(readTrimmed(t, filepath.Join(pidsDir, "pids.current"))); err != nil || n > 5 {
		t.Errorf("pids.current = %d (%v), want at most 5", n, err)
	}
	if err := cg.kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if got := readTrimmed(t, filepath.Join(pidsDir, "cgroup.procs")); got != "" {
		t.Errorf("cgroup.procs after kill = %q, want empty", got)
	}
}

// TestCgroupKillBySignal kills without cgroup.kill (v2) or the freezer
// (v1): one process at a time.
func TestCgroupKillBySignal(t *testing.T) {
	requireCgroups(t)
	cg := newTestCgroup(t, Limits{Pids: 8})
	sh := startIn(t, cg, "sh", "-c", `i=0; while [ $i -lt 5 ]; do sleep 60 & i=$((i+1)); done; wait`)
	dir := cgroupDirs(cg)["pids"]
	if !poll.Eventually(10*time.Second, func() bool { pids, err := readPids(dir); return err != nil || len(pids) == 6 }) {
		t.Fatalf("cgroup.procs = %q, want 6 processes", readTrimmed(t, filepath.Join(dir, "cgroup.procs")))
	}
	var err error
	switch c := cg.(type) {
	case *cgroupV1:
		c.freezer = ""
		err = c.kill()
	case *cgroupV2:
		err = c.killBySignal(time.Now().Add(killTimeout))
	}
	if err != nil {
		t.Fatalf("kill: %v", err)
	}
	if got := readTrimmed(t, filepath.Join(dir, "cgroup.procs")); got != "" {
		t.Errorf("cgroup.procs after kill = %q, want empty", got)
	}
	if sig := waitSignal(t, sh); sig != syscall.SIGKILL {
		t.Errorf("shell ended by %v (%v), want SIGKILL", sig, sh.ProcessState)
	}
}

func TestCgroupOOMKill(t *testing.T) {
	requireCgroups(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	cg := newTestCgroup(t, Limits{Memory: 32 << 20})
	// bytearray(n) zeroes, so touches, every page.
	py := startIn(t, cg, "/usr/bin/python3", "-c", "b = bytearray(256 << 20); b[::4096] = b'x' * len(b[::4096])")
	if sig := waitSignal(t, py); sig != syscall.SIGKILL {
		t.Errorf("python allocating 256 MiB under 32 MiB ended by %v (%v), want SIGKILL", sig, py.ProcessState)
	}
	u, err := cg.usage()
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	if u.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want at least 1", u.OOMKills)
	}
}

// TestCgroupFailsClosed shows newCgroup a host without some controller
// through a fake mountinfo, built from this host's real cgroup mounts.
func TestCgroupFailsClosed(t *testing.T) {
	real, err := readMountinfoLines()
	if err != nil {
		t.Fatal(err)
	}
	// The v1 mounts of memory and cpuacct, when this host has them.
	var memoryCPU []string
	for _, ctrl := range []string{"memory", "cpuacct"} {
		for _, line := range real {
			if f := strings.Fields(line); f[len(f)-3] == "cgroup" && strings.Contains(","+f[len(f)-1]+",", ","+ctrl+",") {
				memoryCPU = append(memoryCPU, line)
				break
			}
		}
	}
	fakePids := fmt.Sprintf("999 1 0:999 / %s rw,relatime - cgroup cgroup rw,pids", t.TempDir())
	tests := []struct {
		name   string
		lines  []string
		needV1 bool // needs this host's v1 memory and cpuacct
		want   string
	}{
		{name: "no cgroup mounts", lines: []string{real[0]}, want: `cgroup controller "memory" is not available`},
		{name: "pids not mounted", lines: memoryCPU, needV1: true, want: `cgroup controller "pids" is not available`},
		{name: "pids not a cgroupfs", lines: append(memoryCPU[:len(memoryCPU):len(memoryCPU)], fakePids), needV1: true, want: `cgroup controller "pids" is not available`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needV1 && len(memoryCPU) != 2 {
				t.Skip("this host has no cgroup v1 memory and cpuacct hierarchies")
			}
			fake := filepath.Join(t.TempDir(), "mountinfo")
			if err := os.WriteFile(fake, []byte(strings.Join(tt.lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			defer func(old string) { mountinfoFile = old }(mountinfoFile)
			mountinfoFile = fake

			cg, err := newCgroup(testCgroupName(t), DefaultLimits)
			if err == nil {
				cg.remove()
				t.Fatalf("newCgroup succeeded, want an error naming the missing controller")
			}
			t.Logf("newCgroup: %v", err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("newCgroup error = %q, want it to contain %q", err, tt.want)
			}
			if err := probeCgroups(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("probeCgroups() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// Nothing was made in the fake pids hierarchy.
	if entries, _ := os.ReadDir(strings.Fields(fakePids)[4]); len(entries) != 0 {
		t.Errorf("newCgroup wrote into a directory that is no cgroupfs: %v", entries)
	}
}

func readMountinfoLines() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	return strings.Split(strings.TrimSpace(string(b)), "\n"), err
}

// TestCgroupCleansUpOnError makes setting a limit fail after the
// directories exist and checks that none is left.
func TestCgroupCleansUpOnError(t *testing.T) {
	requireCgroups(t)
	name := testCgroupName(t)
	// pids.max refuses values over the kernel's PID_MAX_LIMIT (4M).
	cg, err := newCgroup(name, Limits{Pids: 1 << 40})
	if err == nil {
		cg.kill()
		cg.remove()
		t.Fatal("newCgroup with pids.max 2^40 succeeded, want an error")
	}
	if !strings.Contains(err.Error(), `"pids"`) {
		t.Errorf("error = %q, want it to name the pids controller", err)
	}
	host, err := findCgroups()
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	if host.v2 != nil {
		dirs = append(dirs, filepath.Join(host.v2.dir, cgroupParent, name))
	}
	for _, h := range host.v1 {
		dirs = append(dirs, filepath.Join(h.dir, cgroupParent, name))
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left behind (stat: %v)", dir, err)
			os.Remove(dir)
		}
	}
}

func TestProbeCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "creating cgroups needs root")
	}
	if err := probeCgroups(); err != nil {
		t.Errorf("probeCgroups() = %v", err)
	}
}

// TestCgroupV2Mechanics exercises what v2 does beyond limits (a child born
// in the cgroup through its fd, cpu.stat, cgroup.kill, the freezer and
// signal fallback, removal) on any cgroup2 mount, even one that offers no
// controllers, as the unified hierarchy of a v1 host does.
func TestCgroupV2Mechanics(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "creating cgroups needs root")
	}
	host, err := findCgroups()
	if err != nil {
		t.Fatal(err)
	}
	if host.v2 == nil {
		kerneltest.Skip(t, "no cgroup2 mount holds this process's cgroup")
	}
	for _, kill := range []string{"cgroup.kill", "signals"} {
		t.Run(kill, func(t *testing.T) {
			c, err := makeV2(host.v2, testCgroupName(t), nil)
			if err != nil {
				t.Fatalf("makeV2: %v", err)
			}
			t.Cleanup(func() {
				c.kill()
				if err := c.remove(); err != nil {
					t.Errorf("remove: %v", err)
				}
				if _, err := os.Stat(c.dir); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s still there after remove (stat: %v)", c.dir, err)
				}
				if fd, ok := c.intoFD(); ok || fd != -1 {
					t.Errorf("intoFD() after remove = %d, %v; want -1, false", fd, ok)
				}
			})
			if _, ok := c.intoFD(); !ok {
				t.Fatal("intoFD() = false on v2")
			}

			busy := startIn(t, c, "sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
			waitSignal(t, busy)
			if cpu, err := cpuV2(c.dir); err != nil || cpu <= 0 {
				t.Errorf("cpuV2 after a busy child = %v, %v; want > 0", cpu, err)
			}

			sh := startIn(t, c, "sh", "-c", `sleep 60 & sleep 60 & wait`)
			self := readTrimmed(t, fmt.Sprintf("/proc/%d/cgroup", sh.Process.Pid))
			if !strings.Contains(self, "0::"+c.self+"\n") && !strings.HasSuffix(self, "0::"+c.self) {
				t.Errorf("/proc/%d/cgroup = %q, want 0::%s", sh.Process.Pid, self, c.self)
			}
			if kill == "cgroup.kill" {
				err = c.kill()
			} else {
				err = c.killBySignal(time.Now().Add(killTimeout))
			}
			if err != nil {
				t.Fatalf("kill: %v", err)
			}
			if got := readTrimmed(t, filepath.Join(c.dir, "cgroup.procs")); got != "" {
				t.Errorf("cgroup.procs after kill = %q, want empty", got)
			}
			if sig := waitSignal(t, sh); sig != syscall.SIGKILL {
				t.Errorf("shell ended by %v (%v), want SIGKILL", sig, sh.ProcessState)
			}
		})
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	tests := []struct{ in, want string }{
		{`/sys/fs/cgroup`, `/sys/fs/cgroup`},
		{`/mnt/a\040b`, `/mnt/a b`},
		{`/mnt/tab\011x\134`, "/mnt/tab\tx\\"},
		{`/x\`, `/x\`},
	}
	for _, tt := range tests {
		if got := unescapeMountinfo(tt.in); got != tt.want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestKillEachFreezesOnlyWhatIsLeft runs killEach over stand-in cgroup
// directories: a cgroup with no process left, as a session's is once its
// init died, is neither frozen nor thawed; one with a process is frozen
// while the process is killed.
func TestKillEachFreezesOnlyWhatIsLeft(t *testing.T) {
	tests := []struct {
		name        string
		process     bool // cgroup.procs lists a live process
		missing     bool // the directory is gone
		wantFreezes string
	}{
		{name: "empty", wantFreezes: ""},
		{name: "removed", missing: true, wantFreezes: ""},
		{name: "one process", process: true, wantFreezes: "freeze thaw "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cg")
			procs := filepath.Join(dir, "cgroup.procs")
			if !tt.missing {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(procs, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var sleep *exec.Cmd
			if tt.process {
				sleep = exec.Command("sleep", "60")
				if err := sleep.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
				if err := os.WriteFile(procs, []byte(strconv.Itoa(sleep.Process.Pid)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var freezes strings.Builder
			freeze := func(on bool) {
				if on {
					freezes.WriteString("freeze ")
					return
				}
				freezes.WriteString("thaw ")
				// The kernel takes a killed process out of its cgroup.
				os.WriteFile(procs, nil, 0o644)
			}
			member := func(pid int) bool { return sleep != nil && pid == sleep.Process.Pid }
			if err := killEach([]procsDir{{dir, member}}, freeze, time.Now().Add(killTimeout)); err != nil {
				t.Fatalf("killEach: %v", err)
			}
			if got := freezes.String(); got != tt.wantFreezes {
				t.Errorf("freezer calls = %q, want %q", got, tt.wantFreezes)
			}
			if sleep != nil {
				if sig := waitSignal(t, sleep); sig != syscall.SIGKILL {
					t.Errorf("the process ended by %v (%v), want SIGKILL", sig, sleep.ProcessState)
				}
			}
		})
	}
}

// TestCgroupRemoveKeepsParent: a removed cgroup's directories go, the
// parent holding the sandboxes' cgroups stays for the next one, which is
// made in it.
func TestCgroupRemoveKeepsParent(t *testing.T) {
	requireCgroups(t)
	for i := range 2 {
		cg, err := newCgroup(testCgroupName(t), DefaultLimits)
		if err != nil {
			t.Fatalf("newCgroup %d: %v", i, err)
		}
		if err := cg.kill(); err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		if err := cg.remove(); err != nil {
			t.Fatalf("remove %d: %v", i, err)
		}
		for ctrl, dir := range cgroupDirs(cg) {
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s cgroup %s still there after remove (stat: %v)", ctrl, dir, err)
			}
			if parent := filepath.Dir(dir); filepath.Base(parent) != cgroupParent {
				t.Errorf("%s cgroup %s is not in a %q directory", ctrl, dir, cgroupParent)
			} else if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
				t.Errorf("%s parent %s is gone after remove (stat: %v)", ctrl, parent, err)
			}
		}
	}
}
