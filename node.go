package corral

import (
	"context"
	"io"
	"time"
)

// Sessions is the half of the machine that holds agents' workspaces and
// runs' sandboxes that runs them: a session per run (one sandbox, started
// when the run starts and ended when it ends, on the run's staged tree),
// commands exec'd into it, their output read from any offset, signals, and
// a terminal on its shell. The other half is Trees. The runner and the
// runs service talk to the sandboxes only through this interface:
// internal/node implements it on this machine, internal/relay/noderpc's
// Client for a sandbox node reached over the relay, and internal/fleet's
// Router for whichever node holds the run's agent. Everything that crosses
// is plain data and ids, never a host path.
//
// Sessions outlive the process that started them: a server that comes
// back after a crash finds its sessions (Session) and reads what their
// commands wrote meanwhile.
type Sessions interface {
	// StartSession starts the sandbox of a run on its staged tree;
	// ECONFLICT when the run's session runs already, EADMISSION when the
	// node runs its most sessions.
	StartSession(ctx context.Context, spec SessionSpec) error
	// Session reports on a session; ENOTFOUND when there is none to
	// attach to (it never started, or nothing of it is left running).
	Session(ctx context.Context, id string) (SessionState, error)
	// Exec starts a command in a session; EUNAVAIL when the session has
	// ended. Exec of an id the session has seen does nothing: a command
	// is never run twice.
	Exec(ctx context.Context, sessionID string, c Command) error
	// Output returns what a command wrote from offset on (at most
	// MaxOutputRead), and its exit once everything it wrote has been
	// returned; ENOTFOUND for a command the session never ran. With wait,
	// it first waits for something new, the exit, or ctx.
	Output(ctx context.Context, sessionID, commandID string, offset int64, wait bool) (CommandOutput, error)
	// Signal sends "TERM", "INT", "HUP" or "KILL" to a running command and
	// what it started; EINVALID for another signal or a command that is
	// not running (never started, or ended), EUNAVAIL when the session
	// has ended.
	Signal(ctx context.Context, sessionID, commandID, signal string) error
	// EndSession kills whatever still runs in a session and ends it.
	// Ending a session that is gone already is not an error.
	EndSession(ctx context.Context, id string) error
	// Terminal attaches one more viewer to the session's interactive
	// shell, starting it on a terminal of cols × rows when none runs;
	// EUNAVAIL when the session has ended.
	Terminal(ctx context.Context, sessionID string, cols, rows int) (Terminal, error)
}

// Terminal is one viewer of a session's shell. Read returns the screen so
// far (its last 64 KiB), then what the shell writes, and io.EOF once the
// shell has exited; Write types. Close detaches this viewer only.
type Terminal interface {
	io.ReadWriteCloser
	Resize(cols, rows int) error
}

// MaxOutputRead is the most one Output call returns.
const MaxOutputRead = 1 << 20

// GatewayAddr is where a session that has the gateway reaches it: a port
// on the session's own loopback, so http://127.0.0.1:41300/v1 is the base
// URL an agent CLI inside is given.
const GatewayAddr = "127.0.0.1:41300"

// EgressAddr is where a session that has the network reaches the egress
// proxy (HTTP_PROXY and HTTPS_PROXY inside): a port on its own loopback,
// joined, like the gateway's, to the proxy outside with GatewayPreamble.
const EgressAddr = "127.0.0.1:41301"

// GatewayPreamble is the first line of every connection a session makes
// to the gateway, written by the node (never by the session): the session
// it comes from, so the gateway takes on it only the token of that
// session's own run.
func GatewayPreamble(sessionID string) string { return "corral-session " + sessionID + "\n" }

// ToolsDir is where a session that has the tools finds them (the agent
// CLIs, read-only).
const ToolsDir = "/opt/corral/tools"

// WorkspaceDir is where a session sees its staged tree.
const WorkspaceDir = "/workspace"

// SessionEnv is the environment every process started in a session begins
// with (nothing of the host's is inherited): the host's read-only system
// PATH, home at home, UTF-8. It also lets git inside use the workspace: a
// clone's or an import's .git stays the server's (runs read it, never
// write it), so git, running as the sandbox's user, would refuse it as of
// "dubious ownership"; safe.directory names the workspace alone, as
// command-line configuration (GIT_CONFIG_COUNT), which git honours and a
// repository's own configuration cannot set.
func SessionEnv(home string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"LANG=C.UTF-8",
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=safe.directory",
		"GIT_CONFIG_VALUE_0=" + WorkspaceDir,
	}
}

// SessionSpec is one run's sandbox.
type SessionSpec struct {
	ID       string // the run's id
	StageID  string // the staged tree at /workspace
	ReadOnly bool   // the tree is read-only inside
	// Gateway: the session reaches Corral's gateway at GatewayAddr, and
	// nothing else.
	Gateway bool
	// Egress: the session reaches the egress proxy at EgressAddr.
	Egress bool
	// Tools names the agent CLI the session runs (a corral.Driver*): the
	// node's tools are then at ToolsDir, read-only, and a node without
	// that CLI refuses the session (EUNAVAIL, saying how to install it).
	Tools string
	// Limits bound the whole session: all its commands together.
	CPU    time.Duration
	Wall   time.Duration
	Memory int64
	Pids   int64
}

// SessionState is what a node knows of a session.
type SessionState struct {
	ID        string
	Running   bool
	Violation Violation // the limit of the session that ended it, if one did
	// Abandoned: it ended because no server came back for it in time.
	Abandoned bool
}

// Command is one command to exec into a session.
type Command struct {
	ID        string // the caller's, unique in the session: letters, digits, . _ -
	Argv      []string
	Env       []string // the whole environment; nothing is inherited
	Stdin     []byte
	Timeout   time.Duration // the command's own wall time; 0 for none
	OutputMax int64         // bytes of output kept; past it the command is killed
}

// CommandOutput is a piece of a command's output.
type CommandOutput struct {
	Data []byte
	Exit *CommandExit // set once Data reaches the end of the output
}

// CommandExit is how a command ended.
type CommandExit struct {
	Code      int       // exit status; 128+n when signal n ended it
	Signal    string    // the signal that ended it, if one did
	Violation Violation // the limit that ended it (the command's or the session's), if one did
	Output    int64     // bytes it wrote, kept or not
}

// Actor is who a call that acts in a sandbox is made for: the four fields
// the access policy decides on (the person, the account session behind
// them when there is one, the agent, and their level on it), read fresh
// by control for each call or frame. A sandbox node replays the decision
// with package access instead of trusting that control made it, and
// refuses a call that carries none. SessionID is the session or API
// token a terminal's viewer is signed in with (User.Via), which control
// checks is still valid before each frame, and the node checks is the
// one the terminal was opened with; a run's calls carry none: a run acts
// for its person and outlives the session it was started from.
type Actor struct {
	UserID, SessionID, AgentID string
	Level                      Level
}

type actorKey struct{}

// WithActor is ctx carrying a, for the node calls made with it.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf is the actor ctx carries, if any.
func ActorOf(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// ActingTerminal is a Terminal that takes its viewer's actor, read fresh
// before each frame, to hand on with the frame (a relayed terminal does;
// one on this machine needs none).
type ActingTerminal interface {
	Terminal
	Act(a Actor)
}
