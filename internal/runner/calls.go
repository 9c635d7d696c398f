package runner

// A model turn's tool calls: each run as a command of the run's session,
// or, for the delegation tools, in the server (delegate.go); results
// recorded in the trace and checkpointed as they come.

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"corral"
	"corral/internal/trace"
)

// calls runs the tool calls of the assistant message at index at of conv
// that have no result yet, appends their results and checkpoints. done
// says the run must end, with out. Consecutive delegate calls run at once.
func (r *Runner) calls(a *active, agent corral.Agent, conv conversation, at int, calls []corral.ToolCall, runCtx context.Context, deadline time.Time) (_ conversation, out outcome, done bool) {
	ctx, run := a.ctx, &a.run
	// The command's id in the session (and a delegated run's key) is fixed
	// by the call's place in the conversation, so a re-attached or resumed
	// run finds it again.
	key := func(i int) string { return fmt.Sprintf("m%d-%d", at, i) }
	for i := len(conv) - 1 - at; i < len(calls); {
		if out, done := r.interrupted(a, runCtx); done {
			return conv, out, true
		}
		if !r.mayGoOn(a) {
			return conv, revoked, true
		}
		if calls[i].Name == toolDelegate {
			j := i
			for j < len(calls) && calls[j].Name == toolDelegate {
				j++
			}
			keys := make([]string, 0, j-i)
			for k := i; k < j; k++ {
				keys = append(keys, key(k))
				r.traceCall(a, key(k), calls[k])
			}
			for k, d := range r.delegateBatch(a, keys, calls[i:j], runCtx) {
				if d.shutdown {
					// Nothing more is recorded: the next start re-attaches
					// the run, and asks again from here.
					return conv, outcome{shutdown: true}, true
				}
				if d.paused != "" {
					// The results so far are kept; this call and those
					// after it are asked again when the run resumes.
					if err := r.checkpoint(ctx, run.ID, conv); err != nil {
						return conv, r.failed(a, "the conversation could not be saved", err), true
					}
					return conv, outcome{status: corral.RunPaused, waitingFor: d.paused}, true
				}
				r.traceResult(a, keys[k], calls[i+k], d.res)
				conv = append(conv, corral.ModelMessage{Role: "tool", ToolCallID: calls[i+k].ID, Content: d.res.forModel(calls[i+k].Name)})
			}
			i = j
		} else {
			res, err := r.runTool(a, agent, key(i), calls[i], runCtx, deadline)
			if err != nil {
				return conv, r.failed(a, "the sandbox failed: "+safeMessage(err), err), true
			}
			conv = append(conv, corral.ModelMessage{Role: "tool", ToolCallID: calls[i].ID, Content: res.forModel(calls[i].Name)})
			if res.Violation != "" {
				r.record(ctx, run.ID, trace.Violation, map[string]any{"limit": res.Violation, "tool_call_id": calls[i].ID})
				if err := r.checkpoint(ctx, run.ID, conv); err != nil {
					r.cfg.Log.Error("checkpoint", "run", run.ID, "err", err)
				}
				if _, killed := a.state(); killed {
					return conv, outcome{status: corral.RunKilled, reason: "killed on request"}, true
				}
				return conv, outcome{status: corral.RunErrored, violation: res.Violation,
					reason: fmt.Sprintf("the sandbox's %s limit ended the run", res.Violation)}, true
			}
			i++
		}
		if i < len(calls) {
			// Each result is kept as it comes, so a run that pauses or is
			// re-attached later in this turn does not ask for it again.
			if err := r.checkpoint(ctx, run.ID, conv); err != nil {
				return conv, r.failed(a, "the conversation could not be saved", err), true
			}
		}
	}
	if err := r.checkpoint(ctx, run.ID, conv); err != nil {
		return conv, r.failed(a, "the conversation could not be saved", err), true
	}
	return conv, outcome{}, false
}

// runTool runs one tool call as command cmdID of the run's session. An
// error is Corral's failure (the session is gone); the model's mistakes
// are results.
func (r *Runner) runTool(a *active, agent corral.Agent, cmdID string, call corral.ToolCall, runCtx context.Context, deadline time.Time) (toolResult, error) {
	r.traceCall(a, cmdID, call)
	var res toolResult
	switch {
	case isDelegation(call.Name):
		res = r.delegation(a, cmdID, call, runCtx, false).res
	case call.Name == toolSearchDocuments && r.docs != nil:
		res = r.searchTool(a, call)
	default:
		var err error
		if res, err = r.tool(a, agent, cmdID, call, deadline); err != nil {
			return res, err
		}
	}
	r.traceResult(a, cmdID, call, res)
	return res, nil
}

// traceCall records a tool call of a's run, made as cmdID (the command's
// id in the session, a delegated run's key), and starts its span.
func (r *Runner) traceCall(a *active, cmdID string, call corral.ToolCall) {
	args, _ := capText(call.Arguments, maxTraceOutput)
	r.record(a.ctx, a.run.ID, trace.ToolCall, map[string]any{"id": call.ID, "name": call.Name, "arguments": args, "command": cmdID})
	r.toolStarted(a, cmdID, call)
}

// traceResult records how the call made as cmdID ended, and ends its span.
func (r *Runner) traceResult(a *active, cmdID string, call corral.ToolCall, res toolResult) {
	r.toolEnded(a, cmdID, res)
	out, truncated := capText(res.Output, maxTraceOutput)
	r.record(a.ctx, a.run.ID, trace.ToolResult, map[string]any{
		"id": call.ID, "name": call.Name, "exit_code": res.ExitCode, "violation": res.Violation,
		"error": res.Error, "output": out, "truncated": truncated,
	})
}

func (r *Runner) tool(a *active, agent corral.Agent, cmdID string, call corral.ToolCall, deadline time.Time) (toolResult, error) {
	spec, err := parseTool(call)
	if err != nil {
		return toolResult{ExitCode: -1, Error: err.Error()}, nil
	}
	out := &output{live: func(offset int, text string) {
		r.hub.publish(a.run.ID, Event{Output: &Output{ToolCallID: call.ID, Offset: offset, Text: text}})
	}}
	a.setOutput(call.ID, out)
	defer a.setOutput("", nil)
	if !r.setCommand(a, "") {
		return toolResult{ExitCode: -1, Error: "the run was killed"}, nil
	}
	err = r.node.Exec(r.as(a.ctx, a.run), a.run.ID, corral.Command{
		ID:        cmdID,
		Argv:      spec.argv,
		Env:       r.sessionEnv(a, "/tmp"),
		Stdin:     spec.stdin,
		Timeout:   min(commandTimeout, max(time.Until(deadline), time.Millisecond)),
		OutputMax: outputMax(agent.Limits),
	})
	if err != nil {
		return toolResult{}, err
	}
	if !r.setCommand(a, cmdID) {
		return toolResult{ExitCode: -1, Error: "the run was killed"}, nil
	}
	defer r.setCommand(a, "")
	var offset int64
	var exit *corral.CommandExit
	for exit == nil {
		// Not a.ctx: a killed run's command is killed, and its result
		// still recorded; only the server's stop leaves it running.
		o, err := r.node.Output(r.base, a.run.ID, cmdID, offset, true)
		if err != nil {
			return toolResult{}, err
		}
		out.Write(o.Data)
		offset += int64(len(o.Data))
		exit = o.Exit
	}
	text, _ := out.text(maxToolOutput)
	tr := toolResult{ExitCode: exit.Code, Output: text, Violation: exit.Violation}
	if call.Name == "shell" || exit.Violation != "" {
		return tr, nil
	}
	if exit.Code != 0 {
		tr.Error = toolError(call.Name, text, exit.Code, agent.Policy.FS == corral.FSReadOnly)
		return tr, nil
	}
	if call.Name == "write_file" {
		tr.Output = "ok"
	}
	return tr, nil
}

// toolError words a failed file tool's result for the model.
func toolError(name, output string, code int, readOnly bool) string {
	msg := string(bytes.TrimSpace([]byte(output)))
	if msg == "" {
		msg = fmt.Sprintf("%s failed with exit status %d", name, code)
	}
	if name == "write_file" && readOnly {
		msg += " (the workspace is read-only for this agent)"
	}
	return msg
}
