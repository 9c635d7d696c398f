package sandbox

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"corral"
)

// check is one validation step of a spec. The checks run in order and the
// first failure is reported, so each may rely on the ones before it.
type check[T any] struct {
	name string
	run  func(*T) error
}

// sessionChecks validate a session before anything is started. Some also
// normalise: the workspace becomes an absolute path with no symbolic links.
var sessionChecks = []check[SessionSpec]{
	{"mode", checkMode},
	{"limits", checkLimits},
	{"workspace", checkWorkspace},
	{"tools", checkTools},
}

// commandChecks validate one command before it is exec'd.
var commandChecks = []check[Command]{
	{"command", checkCommand},
	{"environment", checkEnv},
	{"dir", checkDir},
}

// ValidateSession checks a session's spec and returns it normalised:
// defaults applied, the workspace resolved. Errors are *corral.Error with
// code EINVALID.
func ValidateSession(s SessionSpec) (SessionSpec, error) {
	s.Limits = s.Limits.withDefaults()
	for _, c := range sessionChecks {
		if err := c.run(&s); err != nil {
			return SessionSpec{}, err
		}
	}
	return s, nil
}

// Validate checks a one-command spec and returns it normalised, as
// ValidateSession and the command's checks do.
func Validate(s Spec) (Spec, error) {
	c := Command{Argv: s.Command, Env: s.Env, Dir: s.Dir}
	if c.Dir == "" {
		c.Dir = insideWorkspace
	}
	// The command's checks first, as before sessions: a spec with no
	// command is refused before its workspace is looked at.
	for _, ch := range commandChecks {
		if err := ch.run(&c); err != nil {
			return Spec{}, err
		}
	}
	ss, err := ValidateSession(s.session())
	if err != nil {
		return Spec{}, err
	}
	s.Workspace, s.Limits, s.Dir = ss.Workspace, ss.Limits, c.Dir
	return s, nil
}

func invalid(format string, args ...any) error {
	return corral.Errorf(corral.EINVALID, "sandbox: "+format, args...)
}

func checkCommand(c *Command) error {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return invalid("no command to run")
	}
	for _, a := range c.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return invalid("command argument contains a NUL byte")
		}
	}
	return nil
}

func checkMode(s *SessionSpec) error {
	if s.Mode != ReadOnly && s.Mode != ReadWrite {
		return invalid("workspace mode must be %q or %q, not %q", ReadOnly, ReadWrite, s.Mode)
	}
	return nil
}

func checkLimits(s *SessionSpec) error {
	l, m := s.Limits, MaxLimits
	for _, f := range []struct {
		name     string
		val, max int64
	}{
		{"cpu", int64(l.CPU), int64(m.CPU)},
		{"memory", l.Memory, m.Memory},
		{"pids", l.Pids, m.Pids},
		{"wall time", int64(l.Wall), int64(m.Wall)},
		{"output", l.Output, m.Output},
		{"file size", l.FileSize, m.FileSize},
		{"open files", l.OpenFiles, m.OpenFiles},
		{"tmp", l.Tmp, m.Tmp},
	} {
		if f.val < 0 || f.val > f.max {
			return invalid("%s limit %d is out of range (0 to %d)", f.name, f.val, f.max)
		}
	}
	if l.Memory < 32<<20 {
		return invalid("memory limit must be at least 32 MiB (the sandbox's init counts too)")
	}
	if l.Pids < 1 {
		return invalid("pids limit must be at least 1")
	}
	if l.CPU < time.Millisecond || l.Wall < time.Millisecond {
		return invalid("cpu and wall time limits must be at least 1ms")
	}
	if l.OpenFiles < 16 {
		return invalid("open files limit must be at least 16")
	}
	return nil
}

func checkEnv(s *Command) error {
	for _, kv := range s.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00") || strings.IndexByte(kv, 0) >= 0 {
			return invalid("environment entry %q is not KEY=value", kv)
		}
	}
	return nil
}

func checkWorkspace(s *SessionSpec) error {
	if s.Workspace == "" {
		return invalid("no workspace")
	}
	abs, err := filepath.Abs(s.Workspace)
	if err != nil {
		return invalid("workspace %q: %v", s.Workspace, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return invalid("workspace %q does not exist", s.Workspace)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return invalid("workspace %q is not a directory", s.Workspace)
	}
	if real == "/" {
		return invalid("the root directory cannot be a workspace")
	}
	s.Workspace = real
	return nil
}

// checkTools resolves the tools directory like the workspace; it must not
// hold the workspace nor be held by it (one bind would expose the other).
func checkTools(s *SessionSpec) error {
	if s.Tools == "" {
		return nil
	}
	real, err := filepath.EvalSymlinks(s.Tools)
	if err != nil || !filepath.IsAbs(s.Tools) {
		return invalid("tools directory %q does not exist or is not absolute", s.Tools)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return invalid("tools directory %q is not a directory", s.Tools)
	}
	within := func(a, b string) bool { return a == b || strings.HasPrefix(a, b+"/") }
	if real == "/" || within(real, s.Workspace) || within(s.Workspace, real) {
		return invalid("tools directory %q overlaps the workspace", s.Tools)
	}
	s.Tools = real
	return nil
}

func checkDir(s *Command) error {
	d := s.Dir
	if !path.IsAbs(d) || path.Clean(d) != d {
		return invalid("working directory %q must be an absolute, clean path inside the sandbox", d)
	}
	if d != insideWorkspace && !strings.HasPrefix(d, insideWorkspace+"/") && d != "/tmp" && !strings.HasPrefix(d, "/tmp/") {
		return invalid("working directory %q must be under %s or /tmp", d, insideWorkspace)
	}
	return nil
}
