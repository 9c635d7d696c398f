// Package supervisor keeps a run's sandbox session alive apart from the
// server, as conmon or containerd's shim do for containers. The server
// starts one supervisor process per session (the same binary, re-executed
// with Arg); it starts the session's sandbox, execs the commands it is asked
// to into it, and writes each command's output to an append-only log file
// and its exit to a record beside it. The supervisor is detached from the
// server: when the server dies, the session and its commands go on, and
// the server that comes back dials the supervisor's socket again (Dial) and
// reads what was written meanwhile, from the offset it had reached.
//
// A supervisor with no server attached ends its session after a grace
// period; when the supervisor itself dies, the kernel kills the session's
// init and with it every process of the session.
//
// Everything a session has is in its directory:
//
//	sock              the supervisor's socket (mode 0600, owner only)
//	state.json        the supervisor's pid and the session's state
//	supervisor.log    what the supervisor itself logs
//	cmd/ID.out        a command's output, as it wrote it, up to its cap
//	cmd/ID.exit       how it ended, written once it has
//
// Nothing of the server's secrets crosses: the supervisor is handed the
// session's spec (a tree's path, a mode, limits) and, per command, its
// argv, environment and stdin.
package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"corral"
	"corral/internal/sandbox"
)

// Arg is the first argument that makes the binary act as a supervisor.
// main must call Main when it sees it (see Dispatch).
const Arg = "__corral-supervisor"

// Dispatch runs the sandbox's init or a supervisor when this process was
// started as one, and never returns then. main and every test binary that
// starts sessions call it first.
func Dispatch() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sandbox.InitArg:
			sandbox.Init()
		case Arg:
			os.Exit(Main(os.Args[2:]))
		}
	}
}

// Config is what a supervisor is started with, on its stdin.
type Config struct {
	Session sandbox.SessionSpec
	Sandbox sandbox.Config
	// Grace is how long the session outlives a server that went away
	// without coming back. Default 10 minutes.
	Grace time.Duration
	// Gateway, when set, is served inside the session: see gateway.go.
	Gateway *Gateway `json:",omitempty"`
	// Egress, when set, is the egress proxy served inside the session
	// the same way (at corral.EgressAddr).
	Egress *Gateway `json:",omitempty"`
}

// Session states, in state.json.
const (
	StateRunning   = "running"
	StateEnded     = "ended"     // ended on request, or by a limit of the session
	StateAbandoned = "abandoned" // no server came back within the grace period
)

// State is a session's state.json.
type State struct {
	PID       int              `json:"pid"`
	State     string           `json:"state"`
	Violation corral.Violation `json:"violation,omitempty"`
	StartedAt time.Time        `json:"started_at"`
	EndedAt   time.Time        `json:"ended_at,omitzero"`
}

// Exit is how a command ended: its cmd/ID.exit record.
type Exit struct {
	Code      int              `json:"code"`
	Signal    string           `json:"signal,omitempty"`
	Violation corral.Violation `json:"violation,omitempty"`
	Output    int64            `json:"output"` // bytes the command wrote, kept or not
	Kept      int64            `json:"kept"`   // bytes in its log
}

// Exec is a command to run in the session.
type Exec struct {
	ID        string        `json:"id"`
	Argv      []string      `json:"argv"`
	Env       []string      `json:"env"`
	Dir       string        `json:"dir,omitempty"`
	Stdin     []byte        `json:"stdin,omitempty"`
	Timeout   time.Duration `json:"timeout"`    // 0: only the session's limits
	OutputMax int64         `json:"output_max"` // 0: 1 MiB
}

// message is one line on the socket, either way.
type message struct {
	Seq   uint64 `json:"seq,omitempty"`   // a request and its reply
	Op    string `json:"op,omitempty"`    // requests: exec, signal, end, status
	Event string `json:"event,omitempty"` // events: output, exit, ended
	Error string `json:"error,omitempty"`

	Exec   *Exec  `json:"exec,omitempty"`
	ID     string `json:"id,omitempty"`
	Signal string `json:"signal,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Cols   int    `json:"cols,omitempty"` // terminal: its size when it starts
	Rows   int    `json:"rows,omitempty"`
	Exit   *Exit  `json:"exit_record,omitempty"`
	State  *State `json:"state,omitempty"`
}

// Paths of a session's directory.
func sockPath(dir string) string     { return filepath.Join(dir, "sock") }
func statePath(dir string) string    { return filepath.Join(dir, "state.json") }
func outPath(dir, id string) string  { return filepath.Join(dir, "cmd", id+".out") }
func exitPath(dir, id string) string { return filepath.Join(dir, "cmd", id+".exit") }
func logPath(dir string) string      { return filepath.Join(dir, "supervisor.log") }

func readJSON(name string, v any) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON replaces name with v's JSON at once: a reader sees the old
// file or the new one, never a part. It does not fsync: a session's files
// need to outlive the server's process, which the page cache does, not
// the machine, whose crash takes the supervisor and its session along (the
// run is then reconciled from its stage and the store).
func writeJSON(name string, v any) error {
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
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("replace %s: %w", name, err)
	}
	return nil
}

func jsonLine(m message) ([]byte, error) {
	b, err := json.Marshal(m)
	return append(b, '\n'), err
}

// readLine reads one line of at most max bytes, without its newline.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > max {
			return nil, fmt.Errorf("line over %d bytes", max)
		}
		if err == nil {
			return line[:len(line)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// ReadState reads a session's state.json.
func ReadState(dir string) (State, error) {
	var s State
	err := readJSON(statePath(dir), &s)
	return s, err
}
