package node

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"corral"
	"corral/internal/driver"
	"corral/internal/sandbox"
	"corral/internal/sanitize"
	"corral/internal/supervisor"
)

func (l *Local) dir(id string) (string, error) {
	if err := sanitize.ID("session", id); err != nil {
		return "", err
	}
	return filepath.Join(l.sessionsDir(), id), nil
}

// meta is what the node keeps of a session beside the supervisor's files.
type meta struct {
	StageID string `json:"stage_id"`
}

func metaPath(dir string) string { return filepath.Join(dir, "node.json") }

// StartSession starts a run's sandbox on its staged tree.
func (l *Local) StartSession(ctx context.Context, spec corral.SessionSpec) error {
	dir, err := l.dir(spec.ID)
	if err != nil {
		return err
	}
	// Probed here, once per server: the supervisor need not again.
	if err := sandbox.Available(); err != nil {
		return err
	}
	tree, err := l.tree(spec.StageID)
	if err != nil {
		return err
	}
	if c, err := supervisor.Dial(dir); err == nil {
		c.Close()
		return corral.Errorf(corral.ECONFLICT, "the run's session is running already")
	}
	if l.cfg.MaxSessions > 0 {
		l.starting.Lock()
		defer l.starting.Unlock()
		if n := l.running(); n >= l.cfg.MaxSessions {
			return corral.Errorf(corral.EADMISSION, "this sandbox node runs %d sessions, its most (--max-sessions): try again when a run there has ended", n)
		}
	}
	// What an earlier session of this run left (it ended, or its
	// supervisor died) is of no use to a new one.
	if err := os.RemoveAll(dir); err != nil {
		return corral.Internal("session directory", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return corral.Internal("session directory", err)
	}
	b, _ := json.Marshal(meta{StageID: spec.StageID})
	if err := os.WriteFile(metaPath(dir), b, 0o600); err != nil {
		return corral.Internal("session directory", err)
	}
	mode := sandbox.ReadWrite
	if spec.ReadOnly {
		mode = sandbox.ReadOnly
	}
	sbx := l.cfg.Sandbox
	sbx.Probed = true
	var tools string
	if spec.Tools != "" {
		if err := driver.Installed(l.cfg.ToolsDir, spec.Tools); err != nil {
			os.RemoveAll(dir)
			return err
		}
		tools = l.cfg.ToolsDir
	}
	var gw *supervisor.Gateway
	if spec.Gateway {
		if l.cfg.GatewaySocket == "" {
			os.RemoveAll(dir)
			return corral.Errorf(corral.EUNAVAIL, "this node has no gateway for agent CLIs")
		}
		gw = &supervisor.Gateway{Addr: corral.GatewayAddr, Socket: l.cfg.GatewaySocket, Session: spec.ID}
	}
	var eg *supervisor.Gateway
	if spec.Egress {
		if l.cfg.EgressSocket == "" {
			os.RemoveAll(dir)
			return corral.Errorf(corral.EUNAVAIL, "this node has no egress proxy")
		}
		eg = &supervisor.Gateway{Addr: corral.EgressAddr, Socket: l.cfg.EgressSocket, Session: spec.ID}
	}
	c, err := supervisor.Spawn(dir, supervisor.Config{
		Session: sandbox.SessionSpec{Workspace: tree, Mode: mode, Tools: tools, Limits: sandbox.Limits{
			CPU: spec.CPU, Wall: spec.Wall, Memory: spec.Memory, Pids: spec.Pids,
		}},
		Sandbox: sbx,
		Grace:   l.cfg.Grace,
		Gateway: gw,
		Egress:  eg,
	}, l.cfg.Exe)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	l.mu.Lock()
	l.clients[spec.ID] = c
	l.mu.Unlock()
	return nil
}

// client is the connection to a session's supervisor, dialled again when
// the last one was lost (a restarted server). ENOTFOUND when the
// supervisor is gone.
func (l *Local) client(id string) (*supervisor.Client, string, error) {
	dir, err := l.dir(id)
	if err != nil {
		return nil, "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.clients[id]; c != nil {
		select {
		case <-c.Gone():
			delete(l.clients, id)
		default:
			return c, dir, nil
		}
	}
	c, err := supervisor.Dial(dir)
	if err != nil {
		return nil, dir, err
	}
	l.clients[id] = c
	return c, dir, nil
}

// Session reports on a session. Whether it runs is asked of its
// supervisor anew, never taken from a connection this process holds: that
// one may not have noticed yet that the supervisor died.
func (l *Local) Session(ctx context.Context, id string) (corral.SessionState, error) {
	dir, err := l.dir(id)
	if err != nil {
		return corral.SessionState{}, err
	}
	// A supervisor whose state says running and whose process is there
	// but that did not answer (a busy machine) is asked again, a few
	// times: a live session taken for dead would be reconciled under its
	// still-running commands.
	for try := 1; ; try++ {
		c, err := supervisor.Dial(dir)
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = c.Status(sctx)
			cancel()
			c.Close()
			if err == nil {
				return corral.SessionState{ID: id, Running: true}, nil
			}
		}
		st, serr := supervisor.ReadState(dir)
		if serr != nil {
			return corral.SessionState{}, corral.Errorf(corral.ENOTFOUND, "no session %s", id)
		}
		there := st.State == supervisor.StateRunning && syscall.Kill(st.PID, 0) == nil
		if !there || try == 5 {
			if there {
				l.cfg.Log.Warn("a session's supervisor is there but does not answer", "session", id, "err", err)
			}
			return corral.SessionState{ID: id, Violation: st.Violation, Abandoned: st.State == supervisor.StateAbandoned}, nil
		}
		select {
		case <-ctx.Done():
			return corral.SessionState{}, ctx.Err()
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		}
	}
}

// Exec starts a command in a session.
func (l *Local) Exec(ctx context.Context, sessionID string, c corral.Command) error {
	cl, _, err := l.client(sessionID)
	if err != nil {
		return l.gone(err)
	}
	return cl.Exec(ctx, supervisor.Exec{ID: c.ID, Argv: c.Argv, Env: c.Env, Stdin: c.Stdin, Timeout: c.Timeout, OutputMax: c.OutputMax})
}

// gone turns a lost supervisor into the error callers see.
func (l *Local) gone(err error) error {
	if corral.ErrorCode(err) == corral.ENOTFOUND {
		return corral.Errorf(corral.EUNAVAIL, "the run's session has ended")
	}
	return err
}

// maxChunk is the most Output returns at once.
const maxChunk = corral.MaxOutputRead

// Output returns a piece of a command's output, read from its log, which
// outlives the supervisor: a command that ended while no server listened
// is read the same as one that ends now.
func (l *Local) Output(ctx context.Context, sessionID, commandID string, offset int64, wait bool) (corral.CommandOutput, error) {
	if offset < 0 {
		return corral.CommandOutput{}, corral.Errorf(corral.EINVALID, "negative offset")
	}
	cl, dir, err := l.client(sessionID)
	if dir == "" {
		return corral.CommandOutput{}, err
	}
	if wait && cl != nil {
		if err := cl.Wait(ctx, commandID, offset); err != nil && ctx.Err() != nil {
			return corral.CommandOutput{}, ctx.Err()
		}
	}
	data, ex, err := supervisor.Read(dir, commandID, offset, maxChunk)
	if err != nil {
		return corral.CommandOutput{}, err
	}
	out := corral.CommandOutput{Data: data}
	if ex != nil {
		out.Exit = &corral.CommandExit{Code: ex.Code, Signal: ex.Signal, Violation: ex.Violation, Output: ex.Output}
		if ex.Violation == "" {
			// The kernel refused the command's writes past the tree's
			// disk limit (ENOSPC): that ends the run like the sandbox's
			// own limits.
			if full, err := l.sessionDiskFull(dir); err != nil {
				return corral.CommandOutput{}, err
			} else if full {
				out.Exit.Violation = corral.ViolationDisk
			}
		}
		return out, nil
	}
	if cl == nil && len(data) == 0 && wait {
		// Nothing more will come: the supervisor is gone, and the command
		// with it.
		return corral.CommandOutput{}, corral.Errorf(corral.EUNAVAIL, "the run's session ended before the command did")
	}
	return out, nil
}

func (l *Local) sessionDiskFull(dir string) (bool, error) {
	var m meta
	b, err := os.ReadFile(metaPath(dir))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return false, corral.Internal("session metadata", err)
	}
	return l.diskFull(m.StageID)
}

// Signal sends a signal to a running command's process group.
func (l *Local) Signal(ctx context.Context, sessionID, commandID, signal string) error {
	cl, _, err := l.client(sessionID)
	if err != nil {
		return l.gone(err)
	}
	return cl.Signal(ctx, commandID, signal)
}

// EndSession kills what runs in a session and removes what is left of it.
// Ending a session that is gone already is not an error.
func (l *Local) EndSession(ctx context.Context, id string) error {
	cl, dir, err := l.client(id)
	if dir == "" {
		return err
	}
	if cl != nil {
		if err := cl.End(ctx); err != nil {
			return err
		}
		l.mu.Lock()
		delete(l.clients, id)
		l.mu.Unlock()
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return corral.Internal("session directory", err)
	}
	return nil
}

// Terminal attaches a viewer to a session's shell.
func (l *Local) Terminal(ctx context.Context, sessionID string, cols, rows int) (corral.Terminal, error) {
	cl, _, err := l.client(sessionID)
	if err != nil {
		return nil, l.gone(err)
	}
	return cl.Terminal(cols, rows)
}

// Close drops the connections to every supervisor; the sessions go on, for
// the next server to attach to.
func (l *Local) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, c := range l.clients {
		c.Close()
		delete(l.clients, id)
	}
}

// Load is how many sessions run on this node now, and its bound.
func (l *Local) Load(ctx context.Context) (corral.NodeLoad, error) {
	return corral.NodeLoad{Sessions: l.running(), MaxSessions: l.cfg.MaxSessions}, nil
}

// running counts the sessions whose supervisor is there and says it runs:
// every session on the node, whichever process started it.
func (l *Local) running() int {
	ents, err := os.ReadDir(l.sessionsDir())
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() || sanitize.ID("session", e.Name()) != nil {
			continue
		}
		st, err := supervisor.ReadState(filepath.Join(l.sessionsDir(), e.Name()))
		if err == nil && st.State == supervisor.StateRunning && syscall.Kill(st.PID, 0) == nil {
			n++
		}
	}
	return n
}

// EndAll ends every session under the node's directory, attached or not.
func (l *Local) EndAll(ctx context.Context) error {
	ents, err := os.ReadDir(l.sessionsDir())
	if err != nil {
		return corral.Internal("sessions directory", err)
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() && sanitize.ID("session", e.Name()) == nil {
			errs = append(errs, l.EndSession(ctx, e.Name()))
		}
	}
	return errors.Join(errs...)
}
