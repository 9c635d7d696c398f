// Package sandbox runs one command in Corral's native Linux sandbox: new
// user, mount, PID, network, IPC and UTS namespaces; a minimal root with the
// workspace at /workspace; Landlock; a seccomp filter; cgroup and rlimit
// limits; and a watchdog that ends the run when a limit is crossed and names
// the violation. Nothing of the server (its environment, files, processes,
// network) is visible inside.
//
// A sandbox is a session (StartSession): the current binary re-executed as
// its init (see Init), which builds the root, confines itself, and then
// starts each command it is asked to (Session.Exec) as its child, with the
// descriptors it is handed, until its parent goes away. When the init dies,
// the kernel kills every process left in the PID namespace, so no process
// of a sandbox outlives it. Run and Start are a session of one command.
//
// The Linux implementation is in *_linux.go; elsewhere Start refuses to run.
package sandbox

import (
	"time"

	"corral"
)

// Workspace modes.
const (
	ReadOnly  = "read-only"
	ReadWrite = "read-write"
)

// Violations: the limit that ended a run.
const (
	ViolationTimeout = corral.ViolationTimeout
	ViolationMemory  = corral.ViolationMemory
	ViolationPids    = corral.ViolationPids
	ViolationCPU     = corral.ViolationCPU
	ViolationOutput  = corral.ViolationOutput
)

// Limits bound one sandboxed command. Zero fields take the defaults.
type Limits struct {
	CPU       time.Duration // CPU time of all processes together; crossing it ends the run
	Memory    int64         // bytes of memory (and /tmp, which lives in memory); no swap
	Pids      int64         // processes and threads at once; reaching it ends the run
	Wall      time.Duration // wall-clock time; crossing it ends the run
	Output    int64         // bytes of stdout and stderr together; the excess is discarded and ends the run
	FileSize  int64         // the largest file a process may write (RLIMIT_FSIZE)
	OpenFiles int64         // open files per process (RLIMIT_NOFILE)
	Tmp       int64         // bytes of the private /tmp
}

// DefaultLimits are the limits of a run that sets none.
var DefaultLimits = Limits{
	CPU:       5 * time.Minute,
	Memory:    512 << 20,
	Pids:      128,
	Wall:      10 * time.Minute,
	Output:    1 << 20,
	FileSize:  256 << 20,
	OpenFiles: 1024,
	Tmp:       64 << 20,
}

// MaxLimits bound what a spec may ask for: past these a value is a mistake.
var MaxLimits = Limits{
	CPU:       24 * time.Hour,
	Memory:    64 << 30,
	Pids:      1 << 15,
	Wall:      7 * 24 * time.Hour,
	Output:    1 << 30,
	FileSize:  64 << 30,
	OpenFiles: 1 << 16,
	Tmp:       16 << 30,
}

// withDefaults returns l with every zero field replaced by its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	orDefault(&l.CPU, d.CPU)
	orDefault(&l.Memory, d.Memory)
	orDefault(&l.Pids, d.Pids)
	orDefault(&l.Wall, d.Wall)
	orDefault(&l.Output, d.Output)
	orDefault(&l.FileSize, d.FileSize)
	orDefault(&l.OpenFiles, d.OpenFiles)
	orDefault(&l.Tmp, d.Tmp)
	return l
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// SessionSpec is one sandbox that commands are exec'd into, as plain data.
// Its limits bound all its commands together, for as long as it runs.
//
// The workspace keeps its host owner: inside, the directory's owner is the
// sandbox's user, and what the commands create belongs on the host to the
// directory's owner (uid and gid). A workspace that the sandbox's host user
// does not own, or cannot reach along its path, is an idmapped mount the
// server makes; where the kernel or the filesystem cannot idmap, the session
// is refused (see idmap_linux.go).
type SessionSpec struct {
	Workspace string // host directory bound at /workspace
	Mode      string // ReadOnly or ReadWrite
	Limits    Limits // zero fields take DefaultLimits
	// Tools is a host directory bound read-only at corral.ToolsDir (the
	// agent CLIs); "" for none.
	Tools string
}

// Command is one command to exec into a session, as plain data.
type Command struct {
	Argv []string // a name without "/" is looked up in PATH inside
	Env  []string // the whole environment; nothing is inherited
	Dir  string   // default /workspace
	// TTY: stdin is a terminal, which becomes the command's controlling
	// terminal.
	TTY bool
}

// Spec is one command to run in a sandbox of its own, as plain data.
type Spec struct {
	Workspace string   // host directory bound at /workspace
	Mode      string   // ReadOnly or ReadWrite
	Limits    Limits   // zero fields take DefaultLimits
	Env       []string // the whole environment, "KEY=value"; nothing is inherited
	Command   []string // argv; a name without "/" is looked up in PATH inside
	Dir       string   // working directory inside the sandbox; default /workspace
}

func (s Spec) session() SessionSpec {
	return SessionSpec{Workspace: s.Workspace, Mode: s.Mode, Limits: s.Limits}
}

// Result is how a sandboxed command ended.
type Result struct {
	ExitCode  int              // the command's exit status; 128+n when signal n ended it
	Signal    string           // the signal that ended it, if one did
	Violation corral.Violation // the limit that ended it, "" if none
	Duration  time.Duration    // from start to the end of the last process
	Output    int64            // bytes of output the command produced (kept or discarded)
}

// Inside the sandbox: the identity and paths every command sees.
const (
	insideUID       = 1000
	insideGID       = 1000
	insideWorkspace = "/workspace"
	insideHostname  = "sandbox"
)

// InitArg is the first argument that makes the binary act as a sandbox's
// init. main must call Init before anything else when it sees it.
const InitArg = "__corral-sandbox-init"
