package runner

// Runs of agent CLIs (Codex, Claude Code, OpenCode): the CLI is one command
// of the run's session, started on the message, its model calls coming
// back to Corral's gateway with the run's token (Authorize), its changes
// landing in the staged tree like any run's.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"corral"
	"corral/internal/driver"
	"corral/internal/telemetry"
	"corral/internal/trace"
)

const (
	// cliHome is the CLI's HOME and configuration, inside the session and
	// never in the workspace: /tmp is the session's own.
	cliHome = "/tmp/corral-home"
	// cliOutputMax bounds what a CLI writes (its JSON events) unless the
	// agent sets an output limit.
	cliOutputMax = 64 << 20
	// maxLine bounds a line of a CLI's output held until it ends.
	maxLine = 8 << 20
	// maxTranscript bounds the transcript events one CLI run traces.
	maxTranscript = 500
	// resumeTask is what a resumed CLI is told before the task again: its
	// earlier work is in the workspace.
	resumeTask = "You were interrupted (the token budget ran out) and are resumed. Your earlier changes are in the workspace. Continue the task:\n\n"
)

// cliLoop drives a run of an agent CLI. A fresh run (msg set) and a
// resumed one start the CLI in a new session, with a new token; a
// re-attached one waits for the CLI still running in its session.
func (r *Runner) cliLoop(a *active, msg *corral.Message, reattach bool) (outcome, corral.Agent, bool) {
	ctx, run := a.ctx, &a.run
	agent, err := r.store.Agent(ctx, run.AgentID, "")
	if err != nil {
		return r.failed(a, "the agent could not be loaded", err), agent, false
	}
	var conv conversation
	if msg != nil {
		if out, ok := r.begin(a, agent); !ok {
			return out, agent, false
		}
		// The CLI's task is the message with what was retrieved for it;
		// the thread keeps the message as written.
		conv = conversation{{Role: "user", Content: r.withDocuments(a, msg.Content)}}
	} else {
		if out, ok := r.again(a, agent, reattach); !ok {
			return out, agent, false
		}
		b, err := r.store.Checkpoint(ctx, run.ID)
		if err == nil {
			conv, err = decodeConversation(b)
		}
		if err == nil && len(conv) == 0 {
			err = fmt.Errorf("empty checkpoint")
		}
		if err != nil {
			return r.failed(a, "the run's task could not be loaded", err), agent, true
		}
		if !reattach {
			conv = append(conv, corral.ModelMessage{Role: "user", Content: resumeTask + conv[0].Content})
		}
	}
	if err := r.checkpoint(ctx, run.ID, conv); err != nil {
		return r.failed(a, "the run's task could not be saved", err), agent, true
	}
	// One command per start of the CLI, named by how many tasks it was
	// given: a re-attached run finds its own, answer checkpointed or not.
	starts := 0
	for _, m := range conv {
		if m.Role == "user" {
			starts++
		}
	}
	cmdID := fmt.Sprintf("cli-%d", starts)

	timeout := r.cfg.RunTimeout
	if agent.Limits.RunTimeoutS > 0 {
		timeout = time.Duration(agent.Limits.RunTimeoutS) * time.Second
	}
	deadline := time.Now().Add(timeout)
	runCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if !reattach {
		token, hash := newToken()
		in := driver.Input{
			Task: conv[len(conv)-1].Content, Instructions: agent.Instructions,
			BaseURL: "http://" + corral.GatewayAddr + "/v1", Token: token,
			Model: r.model.ModelName(agent.Model), ToolsDir: corral.ToolsDir, Home: cliHome,
			ReadOnly: agent.Policy.FS == corral.FSReadOnly,
		}
		if r.deleg != nil || r.docs != nil {
			// The delegation tools and search_documents, through the
			// gateway's MCP server; a delegate call may wait as long as
			// the run may last.
			in.MCPURL, in.MCPTimeout = "http://"+corral.GatewayAddr+"/mcp", timeout
		}
		inv, err := driver.Build(run.Driver, in)
		if err != nil {
			return r.failed(a, safeMessage(err), err), agent, true
		}
		spec := sessionSpec(*run, agent, timeout)
		spec.Gateway, spec.Egress, spec.Tools = true, r.cfg.EgressCA != nil, run.Driver
		if agent.Limits.MemoryBytes == 0 {
			// The CLIs need more than a tool command does; an agent's own
			// limit stands, and a CLI that crosses it is a memory violation.
			spec.Memory = inv.MinMemory
		}
		if err := r.node.StartSession(r.as(ctx, *run), spec); err != nil {
			return r.failed(a, "the sandbox could not be started: "+safeMessage(err), err), agent, true
		}
		if err := r.store.SetRunToken(ctx, run.ID, hash); err != nil {
			return r.failed(a, "the run's token could not be kept", err), agent, true
		}
		if err := r.writeFiles(a, inv.Files); err != nil {
			return r.failed(a, "the CLI's configuration could not be written", err), agent, true
		}
		if err := r.installCA(a); err != nil {
			return r.failed(a, "the egress proxy's CA could not be installed in the sandbox", err), agent, true
		}
		env := inv.Env
		if r.cfg.EgressCA != nil {
			env = append(env, egressEnv()...)
		}
		// The run's trace context, which Codex and Claude Code read as
		// their own spans' parent (they export none: their telemetry is
		// off).
		env = append(env, telemetry.Env(a.ctx)...)
		if !r.setCommand(a, "") {
			return outcome{status: corral.RunKilled, reason: "killed on request"}, agent, true
		}
		err = r.node.Exec(r.as(ctx, *run), run.ID, corral.Command{
			ID: cmdID, Argv: inv.Argv, Env: env, Stdin: inv.Stdin,
			Timeout:   max(time.Until(deadline), time.Millisecond),
			OutputMax: cliOutputMax,
		})
		if err != nil {
			return r.failed(a, "the CLI could not be started: "+safeMessage(err), err), agent, true
		}
		r.record(ctx, run.ID, trace.ToolCall, map[string]any{"id": cmdID, "name": run.Driver, "command": cmdID})
	}
	// The transcript is recorded as the CLI reports it. A re-attached run
	// reads the CLI's output from its start again: the steps recorded
	// before the restart are not recorded twice.
	parser, err := driver.NewParser(run.Driver)
	if err != nil {
		return r.failed(a, safeMessage(err), err), agent, true
	}
	skip := 0
	if reattach {
		skip = r.stepsRecorded(ctx, run.ID, cmdID)
	}
	steps := 0
	spans := &cliTools{r: r, a: a}
	defer spans.close()
	exit, text, err := r.follow(a, cmdID, func(line []byte) {
		for _, e := range parser.Line(line) {
			if steps++; steps > skip {
				spans.event(e)
			}
			switch {
			case steps <= skip:
			case steps <= maxTranscript:
				r.record(ctx, run.ID, trace.Transcript, e)
			case steps == maxTranscript+1:
				r.record(ctx, run.ID, trace.Transcript, map[string]any{"kind": "truncated", "note": "the CLI's further steps are left out of the trace"})
			}
		}
	})
	if err != nil {
		if out, done := r.interrupted(a, runCtx); done {
			return out, agent, true
		}
		return r.failed(a, "the CLI's session ended before it did", err), agent, true
	}
	answer, perr := parser.Final()
	tail, _ := capText(lastLines(text, 20), maxTraceOutput)
	r.record(ctx, run.ID, trace.ToolResult, map[string]any{
		"id": cmdID, "name": run.Driver, "exit_code": exit.Code, "violation": exit.Violation, "output": tail,
	})
	if answer != "" {
		conv = append(conv, corral.ModelMessage{Role: "assistant", Content: answer})
		if err := r.checkpoint(ctx, run.ID, conv); err != nil {
			r.cfg.Log.Error("CLI's answer not checkpointed", "run", run.ID, "err", err)
		}
	}
	a.mu.Lock()
	need, treeSpent := a.budgetNeed, a.treeSpent
	a.budgetNeed, a.treeSpent = 0, ""
	a.mu.Unlock()
	switch out, done := r.interrupted(a, runCtx); {
	case done:
		return out, agent, true
	case !r.mayGoOn(a):
		return revoked, agent, true
	case treeSpent != "":
		return outcome{status: corral.RunErrored, reason: treeSpent}, agent, true
	case exit.Violation != "":
		return outcome{status: corral.RunErrored, violation: exit.Violation,
			reason: fmt.Sprintf("the %s CLI crossed the sandbox's %s limit", run.Driver, exit.Violation)}, agent, true
	case need > 0:
		return outcome{status: corral.RunPaused, need: need}, agent, true
	case exit.Code != 0:
		return outcome{status: corral.RunErrored, answer: answer,
			reason: fmt.Sprintf("the %s CLI exited with status %d", run.Driver, exit.Code)}, agent, true
	case perr != nil || answer == "":
		return outcome{status: corral.RunErrored, reason: fmt.Sprintf("the %s CLI gave no answer", run.Driver)}, agent, true
	}
	return outcome{status: corral.RunCompleted, reason: "the " + run.Driver + " CLI finished", answer: answer}, agent, true
}

// stepsRecorded counts the transcript steps the trace holds of command
// cmdID: those after its start (a resumed run's earlier CLI had its own).
func (r *Runner) stepsRecorded(ctx context.Context, runID, cmdID string) int {
	evs, err := r.store.Trace(ctx, runID)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range evs {
		switch e.Type {
		case trace.ToolCall:
			var call struct{ ID string }
			if json.Unmarshal(e.Data, &call) == nil && call.ID == cmdID {
				n = 0 // its start: count from here
			}
		case trace.Transcript:
			n++
		}
	}
	return n
}

// follow waits for a command of a's session to end, publishing its output
// as it comes and handing each whole line to line, and returns its exit
// and the end of what it wrote (its last cliTail bytes: the trace keeps
// its last lines).
func (r *Runner) follow(a *active, cmdID string, line func([]byte)) (*corral.CommandExit, string, error) {
	out := &output{live: func(offset int, text string) {
		r.hub.publish(a.run.ID, Event{Output: &Output{ToolCallID: cmdID, Offset: offset, Text: text}})
	}}
	a.setOutput(cmdID, out)
	defer a.setOutput("", nil)
	// False when the run was killed meanwhile: the command is killed by
	// it, and its end still comes.
	r.setCommand(a, cmdID)
	defer r.setCommand(a, "")
	var offset int64
	var red redactor
	var partial []byte // a line not ended yet
	var tail []byte    // the end of the output, at most 2*cliTail held
	lines := func(b []byte, last bool) {
		partial = append(partial, b...)
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				break
			}
			line(partial[:i])
			partial = partial[i+1:]
		}
		if last && len(partial) > 0 || len(partial) > maxLine {
			line(partial) // a line too long to hold is handed on as it is
			partial = nil
		}
		partial = append([]byte(nil), partial...)
	}
	for {
		// Not a.ctx: a killed run's CLI is killed and its end recorded;
		// only the server's stop leaves it running.
		o, err := r.node.Output(r.base, a.run.ID, cmdID, offset, true)
		if err != nil {
			return nil, "", err
		}
		offset += int64(len(o.Data))
		clean := red.next(o.Data, o.Exit != nil)
		out.Write(clean)
		lines(clean, o.Exit != nil)
		if tail = append(tail, clean...); len(tail) > 2*cliTail {
			tail = append([]byte(nil), tail[len(tail)-cliTail:]...)
		}
		if o.Exit != nil {
			return o.Exit, string(tail[max(0, len(tail)-cliTail):]), nil
		}
	}
}

// cliTail is how much of the end of a CLI's output follow keeps.
const cliTail = 64 << 10

// redactor takes every run token out of a stream that comes in pieces (a
// CLI may well print its environment, and what it prints goes to watchers
// and the trace): each piece is redacted with the end of the one before,
// and what could be the start of a token is held for the next.
type redactor struct{ held []byte }

// next returns what of piece can be passed on; last passes on the rest.
func (r *redactor) next(piece []byte, last bool) []byte {
	clean := redactTokens(append(r.held, piece...))
	r.held = nil
	if last {
		return clean
	}
	cut := max(len(clean)-len(tokenPrefix)-tokenChars, 0)
	r.held = append([]byte(nil), clean[cut:]...)
	return clean[:cut]
}

// tokenChars is the length of a token after its prefix.
const tokenChars = 43

var tokenPattern = regexp.MustCompile(tokenPrefix + `[A-Za-z0-9_-]{` + strconv.Itoa(tokenChars) + `}`)

// redactTokens replaces every run token in b.
func redactTokens(b []byte) []byte {
	return tokenPattern.ReplaceAll(b, []byte(tokenPrefix+"[redacted]"))
}

// writeFiles writes a CLI's configuration into its session, each file by
// a command of its own reading the content from stdin: never into the
// workspace (the driver keeps them under cliHome).
func (r *Runner) writeFiles(a *active, files map[string][]byte) error {
	i := 0
	for path, content := range files {
		if !strings.HasPrefix(path, cliHome+"/") {
			return fmt.Errorf("configuration file %q is outside %s", path, cliHome)
		}
		i++
		id := fmt.Sprintf("config-%d-%d", time.Now().UnixNano(), i)
		err := r.node.Exec(r.as(a.ctx, a.run), a.run.ID, corral.Command{
			ID:      id,
			Argv:    []string{"/bin/sh", "-c", `umask 077 && mkdir -p "$(dirname "$1")" && cat > "$1"`, "sh", path},
			Env:     []string{"PATH=/usr/bin:/bin"},
			Stdin:   content,
			Timeout: 30 * time.Second, OutputMax: 64 << 10,
		})
		if err != nil {
			return err
		}
		if err := r.waitQuiet(a, id); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// waitQuiet waits for a set-up command of the run to end: an error when
// it exits other than 0.
func (r *Runner) waitQuiet(a *active, id string) error {
	var offset int64
	for {
		o, err := r.node.Output(a.ctx, a.run.ID, id, offset, true)
		if err != nil {
			return err
		}
		offset += int64(len(o.Data))
		if o.Exit != nil {
			if o.Exit.Code != 0 {
				return fmt.Errorf("exit %d", o.Exit.Code)
			}
			return nil
		}
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
