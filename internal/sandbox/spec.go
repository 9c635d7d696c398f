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
type check struct {
	name string
	run  func(s *Spec) error
}

// checks validate a spec before anything is started. Some also normalise:
// the workspace becomes an absolute path with no symbolic links.
var checks = []check{
	{"command", checkCommand},
	{"mode", checkMode},
	{"limits", checkLimits},
	{"environment", checkEnv},
	{"workspace", checkWorkspace},
	{"dir", checkDir},
}

// Validate checks a spec and returns it normalised: defaults applied, the
// workspace resolved. Errors are *corral.Error with code EINVALID.
func Validate(s Spec) (Spec, error) {
	s.Limits = s.Limits.withDefaults()
	if s.Dir == "" {
		s.Dir = insideWorkspace
	}
	for _, c := range checks {
		if err := c.run(&s); err != nil {
			return Spec{}, err
		}
	}
	return s, nil
}

func invalid(format string, args ...any) error {
	return corral.Errorf(corral.EINVALID, "sandbox: "+format, args...)
}

func checkCommand(s *Spec) error {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return invalid("no command to run")
	}
	for _, a := range s.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return invalid("command argument contains a NUL byte")
		}
	}
	return nil
}

func checkMode(s *Spec) error {
	if s.Mode != ReadOnly && s.Mode != ReadWrite {
		return invalid("workspace mode must be %q or %q, not %q", ReadOnly, ReadWrite, s.Mode)
	}
	return nil
}

func checkLimits(s *Spec) error {
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

func checkEnv(s *Spec) error {
	for _, kv := range s.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00") || strings.IndexByte(kv, 0) >= 0 {
			return invalid("environment entry %q is not KEY=value", kv)
		}
	}
	return nil
}

func checkWorkspace(s *Spec) error {
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

func checkDir(s *Spec) error {
	d := s.Dir
	if !path.IsAbs(d) || path.Clean(d) != d {
		return invalid("working directory %q must be an absolute, clean path inside the sandbox", d)
	}
	if d != insideWorkspace && !strings.HasPrefix(d, insideWorkspace+"/") && d != "/tmp" && !strings.HasPrefix(d, "/tmp/") {
		return invalid("working directory %q must be under %s or /tmp", d, insideWorkspace)
	}
	return nil
}
