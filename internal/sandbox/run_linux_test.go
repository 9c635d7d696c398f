package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral"
	"corral/internal/kerneltest"
)

// needSandbox skips when this machine cannot run sandboxes, saying why. CI
// runs as root on a kernel with every feature, so there it always runs.
func needSandbox(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "sandbox tests need root (cgroups)")
	}
	if err := Available(); err != nil {
		kerneltest.Skip(t, "%v", err)
	}
}

// workspace makes a directory the sandbox user can use: reachable, and
// owned by it when rw.
func workspace(t testing.TB, rw bool) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != "/tmp" && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if rw {
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var testEnv = []string{"PATH=/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8"}

// run runs a shell command in a sandbox and returns the result and output.
func run(t testing.TB, dir, mode string, l Limits, script string) (Result, string) {
	t.Helper()
	var out bytes.Buffer
	res, err := Run(Config{}, Spec{Workspace: dir, Mode: mode, Limits: l, Env: testEnv, Command: []string{"/bin/sh", "-c", script}}, nil, &out, &out)
	if err != nil {
		t.Fatalf("Run(%q): %v", script, err)
	}
	return res, out.String()
}

func TestRunBasics(t *testing.T) {
	needSandbox(t)
	ro := workspace(t, false)
	os.WriteFile(filepath.Join(ro, "hello.txt"), []byte("hi from the host\n"), 0o644)
	os.Setenv("CORRAL_CANARY_SECRET", "canary-7f3a")
	defer os.Unsetenv("CORRAL_CANARY_SECRET")

	tests := []struct {
		name, dir, mode, script string
		code                    int
		want                    string // a substring of the output
	}{
		{"echo", ro, ReadOnly, "echo hello", 0, "hello"},
		{"exit status", ro, ReadOnly, "exit 7", 7, ""},
		{"reads the workspace", ro, ReadOnly, "cat /workspace/hello.txt", 0, "hi from the host"},
		{"cwd is the workspace", ro, ReadOnly, "pwd", 0, "/workspace"},
		{"unprivileged user", ro, ReadOnly, "id -u; id -g", 0, "1000\n1000"},
		{"no capabilities", ro, ReadOnly, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status", 0, "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000"},
		{"no capability on any thread of the init", ro, ReadOnly, "cat /proc/1/task/*/status | grep -E '^(Cap(Inh|Prm|Eff|Amb)|Uid|Gid):' | sort -u", 0, "CapAmb:\t0000000000000000\nCapEff:\t0000000000000000\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nGid:\t1000\t1000\t1000\t1000\nUid:\t1000\t1000\t1000\t1000\n"},
		{"no signal ignored", ro, ReadOnly, "grep '^SigIgn' /proc/self/status", 0, "SigIgn:\t0000000000000000\n"},
		{"no new privileges", ro, ReadOnly, "grep NoNewPrivs /proc/self/status", 0, "NoNewPrivs:\t1"},
		{"seccomp on", ro, ReadOnly, "grep '^Seccomp:' /proc/self/status", 0, "Seccomp:\t2"},
		{"hostname", ro, ReadOnly, "cat /proc/sys/kernel/hostname", 0, "sandbox"},
		{"environment is the spec's only", ro, ReadOnly, "env | sort", 0, "HOME=/workspace\nLANG=C.UTF-8\nPATH=/usr/bin:/bin\nPWD=/workspace"},
		{"the sandbox's init is pid 1", ro, ReadOnly, "tr '\\0' ' ' < /proc/1/cmdline", 0, "corral-sandbox " + InitArg},
		{"private tmp", ro, ReadOnly, "echo t > /tmp/t && cat /tmp/t", 0, "t"},
		{"command not found", ro, ReadOnly, "exec no-such-command-here", 127, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, out := run(t, tt.dir, tt.mode, Limits{}, tt.script)
			if res.ExitCode != tt.code || !strings.Contains(out, tt.want) || res.Violation != "" {
				t.Fatalf("%q: exit %d violation %q output %q; want exit %d with %q", tt.script, res.ExitCode, res.Violation, out, tt.code, tt.want)
			}
		})
	}
}

func TestWorkspaceModes(t *testing.T) {
	needSandbox(t)
	ro, rw := workspace(t, false), workspace(t, true)
	if res, out := run(t, ro, ReadOnly, Limits{}, "echo x > /workspace/new.txt || echo refused"); res.ExitCode != 0 || !strings.Contains(out, "refused") {
		t.Fatalf("write in a read-only workspace: exit %d %q", res.ExitCode, out)
	}
	if _, err := os.Stat(filepath.Join(ro, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("read-only workspace gained new.txt: %v", err)
	}
	if res, out := run(t, rw, ReadWrite, Limits{}, "echo made > /workspace/made.txt && cat /workspace/made.txt"); res.ExitCode != 0 || out != "made\n" {
		t.Fatalf("write in a read-write workspace: exit %d %q", res.ExitCode, out)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "made.txt")); err != nil || string(b) != "made\n" {
		t.Fatalf("host sees made.txt = %q, %v", b, err)
	}
}

func TestLimitsEndTheRun(t *testing.T) {
	needSandbox(t)
	dir := workspace(t, false)
	tests := []struct {
		name      string
		limits    Limits
		script    string
		violation corral.Violation
	}{
		{"wall time", Limits{Wall: 300 * time.Millisecond}, "sleep 30", ViolationTimeout},
		{"cpu time", Limits{CPU: 300 * time.Millisecond}, "while :; do :; done", ViolationCPU},
		{"output", Limits{Output: 1000}, "yes corral", ViolationOutput},
		{"pids", Limits{Pids: 8}, "while :; do sleep 5 & done", ViolationPids},
		{"memory", Limits{Memory: 48 << 20, Tmp: 1 << 30}, "head -c 200000000 /dev/zero > /tmp/fill; cat /tmp/fill > /dev/null", ViolationMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, out := run(t, dir, ReadOnly, tt.limits, tt.script)
			if res.Violation != tt.violation || res.ExitCode == 0 {
				t.Fatalf("%q under %+v: exit %d violation %q, want violation %q\n%.300s", tt.script, tt.limits, res.ExitCode, res.Violation, tt.violation, out)
			}
			if tt.violation == ViolationOutput && (len(out) > 1000+200 || !strings.Contains(out, "output limit of 1000 bytes reached")) {
				t.Fatalf("output of %d bytes, want at most the limit plus the marker:\n%.300s", len(out), out)
			}
		})
	}
}

func TestStopAndKill(t *testing.T) {
	needSandbox(t)
	dir := workspace(t, false)
	// start runs script and returns once it printed "ready".
	start := func(script string) *Sandbox {
		r, w := io.Pipe()
		s, err := Start(Config{}, Spec{Workspace: dir, Mode: ReadOnly, Env: testEnv, Command: []string{"/bin/sh", "-c", script}}, nil, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(r).ReadString('\n')
		if line != "ready\n" {
			t.Fatalf("script said %q, %v; want ready", line, err)
		}
		go io.Copy(io.Discard, r)
		return s
	}
	t.Run("stop lets processes exit on SIGTERM", func(t *testing.T) {
		s := start("trap 'exit 42' TERM; echo ready; sleep 60 & wait")
		s.Stop(30 * time.Second)
		res, err := s.Wait()
		if err != nil || res.ExitCode != 42 {
			t.Fatalf("stopped = %+v, %v; want exit 42 from the trap", res, err)
		}
	})
	t.Run("stop kills what ignores SIGTERM", func(t *testing.T) {
		s := start("trap '' TERM; echo ready; sleep 60 & while :; do sleep 1; done")
		s.Stop(100 * time.Millisecond)
		res, _ := s.Wait()
		if res.Signal != "SIGKILL" {
			t.Fatalf("stopped = %+v, want killed", res)
		}
	})
	t.Run("kill is immediate", func(t *testing.T) {
		s := start("echo ready; sleep 60 & sleep 60 & wait")
		s.Kill()
		res, _ := s.Wait()
		if res.Signal != "SIGKILL" || res.Violation != "" {
			t.Fatalf("killed = %+v", res)
		}
	})
}

// TestInitDeafToSignals: the signals the Go runtime would crash or exit
// on, sent to the init from the host, leave its session running: with the
// default action, the kernel drops them for a PID namespace's init.
func TestInitDeafToSignals(t *testing.T) {
	needSandbox(t)
	sess, err := StartSession(Config{}, SessionSpec{Workspace: workspace(t, false), Mode: ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sess.End()
		sess.Wait()
	}()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for sig := syscall.Signal(1); sig <= lastSignal; sig++ {
		if keptSignals[sig] {
			continue
		}
		t.Run(fmt.Sprint(int(sig), unix.SignalName(sig)), func(t *testing.T) {
			if err := sess.cmd.Process.Signal(sig); err != nil {
				t.Fatalf("signal the init: %v", err)
			}
			p, err := sess.Exec(Command{Argv: []string{"/bin/true"}, Env: testEnv}, null, null, null)
			if err != nil {
				t.Fatalf("exec after %v: %v", sig, err)
			}
			if code, name := p.Exit(); code != 0 || sess.Ended() {
				t.Fatalf("after %v: true exited %d %s, session ended: %v", sig, code, name, sess.Ended())
			}
		})
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	ok := Spec{Workspace: dir, Mode: ReadOnly, Command: []string{"true"}}
	tests := []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"ok", func(*Spec) {}, ""},
		{"no command", func(s *Spec) { s.Command = nil }, "no command"},
		{"NUL in argument", func(s *Spec) { s.Command = []string{"echo", "a\x00b"} }, "NUL"},
		{"bad mode", func(s *Spec) { s.Mode = "rw" }, "mode"},
		{"negative memory", func(s *Spec) { s.Limits.Memory = -1 }, "memory"},
		{"tiny memory", func(s *Spec) { s.Limits.Memory = 1 << 20 }, "at least 32 MiB"},
		{"huge pids", func(s *Spec) { s.Limits.Pids = 1 << 20 }, "pids"},
		{"bad env", func(s *Spec) { s.Env = []string{"NOEQUALS"} }, "KEY=value"},
		{"no workspace", func(s *Spec) { s.Workspace = "" }, "no workspace"},
		{"missing workspace", func(s *Spec) { s.Workspace = filepath.Join(dir, "nope") }, "does not exist"},
		{"file workspace", func(s *Spec) { s.Workspace = file }, "not a directory"},
		{"root workspace", func(s *Spec) { s.Workspace = "/" }, "root directory"},
		{"relative dir", func(s *Spec) { s.Dir = "workspace" }, "absolute"},
		{"dir outside", func(s *Spec) { s.Dir = "/etc" }, "must be under"},
		{"dir escape", func(s *Spec) { s.Dir = "/workspace/../etc" }, "clean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.edit(&s)
			_, err := Validate(s)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want ok", err)
				}
				return
			}
			if err == nil || corral.ErrorCode(err) != corral.EINVALID || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want invalid_input mentioning %q", err, tt.want)
			}
		})
	}
}
