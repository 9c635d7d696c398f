package runner

// The run's OpenTelemetry spans (internal/telemetry), when the server has
// a collector: an invoke_agent span from the start of its loop to its end
// or pause, and under it an execute_tool span for each tool call and a
// chat span for each of its CLI's model calls (the built-in loop's are the
// gateway's, under the same span through the run's context). A delegated
// run's span is a child of its parent's delegate call, when the parent
// runs here. A terminal run is a person's, not an agent's: it has none.

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"corral"
	"corral/internal/driver"
	"corral/internal/telemetry"
)

// startSpan starts the span of run's loop, under the tool call of parent
// (the run's parent, when it runs here: nil else) that started it, and
// returns ctx carrying it.
func (r *Runner) startSpan(ctx context.Context, run corral.Run, parent *active) (context.Context, *telemetry.Run) {
	if !r.tracer.On() || run.Driver == corral.DriverTerminal {
		return ctx, nil
	}
	if parent != nil {
		parent.mu.Lock()
		ctx = parent.tools[run.ParentCall].Context(ctx)
		parent.mu.Unlock()
	}
	return r.tracer.StartRun(ctx, telemetry.RunStart{RunID: run.ID, AgentID: run.AgentID, Tree: run.Root()})
}

// endSpan ends the span of a's loop, which ended with out, and those of
// its tool calls still open (the run was killed or the server stops).
func (r *Runner) endSpan(a *active, agent corral.Agent, out outcome) {
	if a.span == nil {
		return
	}
	a.mu.Lock()
	open := a.tools
	a.tools = nil
	a.mu.Unlock()
	for _, t := range open {
		t.End("interrupted")
	}
	end := telemetry.RunEnd{AgentName: agent.Name, Status: out.status}
	if agent.ID != "" {
		end.Model = r.model.ModelName(agent.Model)
	}
	switch {
	case out.shutdown:
		// The run goes on in the next process, in a span of its own.
		end.Status = corral.RunRunning
	case out.violation != "":
		end.ErrorType = string(out.violation)
	case out.status == corral.RunErrored:
		end.ErrorType = string(corral.RunErrored)
	}
	a.span.End(end)
}

// toolStarted starts the span of a tool call of a's run, made as key: the
// command's id in the session, or the key of an MCP call (its only id: the
// model's is not known then).
func (r *Runner) toolStarted(a *active, key string, call corral.ToolCall) {
	if a.span == nil {
		return
	}
	id := call.ID
	if id == key {
		id = ""
	}
	// The model may name a tool it was not offered: whatever it wrote
	// there stays out of the span.
	name := call.Name
	if !slices.ContainsFunc(r.offered(), func(t corral.ModelTool) bool { return t.Name == name }) {
		name = telemetry.Other
	}
	t := r.tracer.StartTool(a.ctx, name, id)
	a.mu.Lock()
	if a.tools == nil {
		a.tools = map[string]*telemetry.Tool{}
	}
	prev := a.tools[key]
	a.tools[key] = t
	a.mu.Unlock()
	prev.End("interrupted")
}

// toolEnded ends the span of a tool call of a's run made as key.
func (r *Runner) toolEnded(a *active, key string, res toolResult) {
	if a.span == nil {
		return
	}
	a.mu.Lock()
	t := a.tools[key]
	delete(a.tools, key)
	a.mu.Unlock()
	switch {
	case res.Violation != "":
		t.End(string(res.Violation))
	case res.Error != "":
		t.End("tool_error")
	default:
		t.End("")
	}
}

// cliTools makes the spans of an agent CLI's own tool calls from its
// transcript: each from the line that reports the call to the one that
// reports its result (Codex reports both at its end). The calls of the
// gateway's MCP tools are left out: the server made their spans as it
// ran them.
type cliTools struct {
	r    *Runner
	a    *active
	open map[string]*telemetry.Tool
}

func (c *cliTools) event(e driver.Event) {
	if c.a.span == nil || servedByGateway(e.Name) {
		return
	}
	switch e.Kind {
	case driver.EventToolCall:
		if c.open == nil {
			c.open = map[string]*telemetry.Tool{}
		}
		c.open[e.ID].End("interrupted") // an id told twice
		c.open[e.ID] = c.r.tracer.StartTool(c.a.ctx, e.Name, e.ID)
	case driver.EventToolResult:
		t, ok := c.open[e.ID]
		if !ok {
			return
		}
		delete(c.open, e.ID)
		if e.IsError {
			t.End("tool_error")
		} else {
			t.End("")
		}
	}
}

// close ends the spans of the calls whose results never came (a tool
// without one, such as Codex's web search, or a CLI that ended first).
func (c *cliTools) close() {
	for _, t := range c.open {
		t.End("")
	}
	c.open = nil
}

// servedByGateway reports whether a CLI's tool name is one of the
// gateway's MCP tools, as each CLI names them: mcp__corral__delegate
// (Claude Code, Codex's model), corral.delegate (Codex's transcript),
// corral_delegate (OpenCode).
func servedByGateway(name string) bool {
	for _, prefix := range []string{"mcp__corral__", "corral.", "corral_"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok && (rest == toolSearchDocuments || isDelegation(rest)) {
			return true
		}
	}
	return false
}

// chatStarted starts the span of one model call of the run's CLI (the
// grant's), as its budget is reserved.
func (g *Grant) chatStarted() {
	if g.a.span != nil {
		g.chat = g.r.tracer.StartChat(g.a.ctx, telemetry.ChatStart{Provider: telemetry.ProviderOpenAI, Model: g.model})
	}
}

// chatEnded ends it: refused (err), or with what the model API knew of it.
func (g *Grant) chatEnded(err error, u corral.Tokens, reported bool, c corral.CLICall) {
	if g.chat == nil {
		return
	}
	end := telemetry.ChatEnd{ResponseModel: c.Model, Usage: u, Reported: reported && !c.Estimated}
	if c.Native && c.Protocol == "messages" {
		end.Provider = telemetry.ProviderAnthropic
	}
	if c.Finish != "" {
		end.FinishReasons = []string{c.Finish}
	}
	switch {
	case err != nil:
		end.ErrorType = string(corral.ErrorCode(err))
	case c.Status >= 400:
		end.ErrorType = strconv.Itoa(c.Status)
	case c.Error != "" && c.Status == 0:
		end.ErrorType = "unavailable"
	case c.Error != "" && !c.Estimated:
		// (An answer without usage is metered at an estimate, not failed:
		// its span just has no usage.)
		end.ErrorType = "response_error"
	case c.Aborted:
		end.ErrorType = "cancelled"
	}
	g.chat.End(end)
	g.chat = nil
}
