package runner

// Delegation tools: list_agents, delegate and create_agent. They run in the
// server, not the sandbox: each asks the Delegator (the service), which
// acts as the person who started the run's tree, and delegate then waits
// for the child run it started. A refused hop is the tool's result (an
// error naming the cap), never the end of the run.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"corral"
	"corral/internal/access"
	"corral/internal/trace"
)

// Delegator is what a run may ask of other agents (service.Delegation).
// Every method acts as the person who started parent's tree, with that
// person's access loaded fresh.
type Delegator interface {
	ListAgents(ctx context.Context, parent corral.Run) ([]corral.Agent, error)
	// Delegate admits a child run for parent's call, which the runner
	// then starts, or returns the one that call started already (start
	// nil); an EADMISSION error names a cap.
	Delegate(ctx context.Context, parent corral.Run, call, agentID, task string) (child corral.Run, start *corral.Admitted, err error)
	CreateAgent(ctx context.Context, parent corral.Run, spec corral.AgentSpec) (corral.Agent, error)
	Caps() corral.TreeCaps
}

// The delegation tools' names.
const (
	toolListAgents  = "list_agents"
	toolDelegate    = "delegate"
	toolCreateAgent = "create_agent"
)

// DelegationTools are the delegation tools as the model is offered them.
var DelegationTools = []corral.ModelTool{
	{
		Name:        toolListAgents,
		Description: "List the agents you may hand a task to: id, name, driver, filesystem access and the start of their instructions.",
		Parameters:  map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
	},
	{
		Name: toolDelegate,
		Description: "Hand a task to another agent and wait for it: starts a run of that agent with the task as its message. " +
			"Returns its final answer, its status and the id of the change set its changes became (a person reviews it; nothing reaches your workspace). " +
			"Several delegate calls in one turn run at the same time.",
		Parameters: schema(map[string]string{"agent_id": "the agent's id, from list_agents or create_agent", "task": "what the agent should do, in full: it sees nothing else of this conversation"}, "agent_id", "task"),
	},
	{
		Name: toolCreateAgent,
		Description: "Create a new agent for a task no listed agent fits. It gets your model and rules; its policy may only be as wide as yours or narrower. " +
			"Returns its id, for delegate.",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":         map[string]any{"type": "string", "description": "a short name"},
				"instructions": map[string]any{"type": "string", "description": "its standing instructions"},
				"policy": map[string]any{
					"type":        "object",
					"description": "optional narrowing of what it may do",
					"properties": map[string]any{
						"fs":            map[string]any{"type": "string", "enum": []string{corral.FSReadOnly, corral.FSReadWrite}},
						"budget_tokens": map[string]any{"type": "integer", "minimum": 1, "description": "its token budget, carved out of what your budget has left (half of it when not given)"},
						"limits": map[string]any{"type": "object", "properties": map[string]any{
							"max_runs": map[string]any{"type": "integer"}, "run_timeout_s": map[string]any{"type": "integer"},
							"cpu_millis": map[string]any{"type": "integer"}, "memory_bytes": map[string]any{"type": "integer"},
							"pids": map[string]any{"type": "integer"}, "output_bytes": map[string]any{"type": "integer"},
						}, "additionalProperties": false},
					},
					"additionalProperties": false,
				},
			},
			"required":             []string{"name", "instructions"},
			"additionalProperties": false,
		},
	},
}

func isDelegation(name string) bool {
	return name == toolListAgents || name == toolDelegate || name == toolCreateAgent
}

// offered is what the model of a run is offered.
func (r *Runner) offered() []corral.ModelTool {
	out := append([]corral.ModelTool(nil), tools...)
	if r.docs != nil {
		out = append(out, SearchTool)
	}
	if r.deleg != nil {
		out = append(out, DelegationTools...)
	}
	return out
}

// delegated is how one delegation tool call ended: a result for the model,
// or (delegate only) the child run paused, which pauses the parent.
type delegated struct {
	res    toolResult
	paused string // the paused child's id
	// shutdown: the server is stopping while the call waited; it has no
	// result, and is asked again when the run is re-attached.
	shutdown bool
}

// delegation runs one delegation tool call of a's run as call key
// (unique in the run, and the same when asked again). pauseOK says the
// caller can pause while a child is paused (the built-in loop); an agent
// CLI's call keeps waiting instead.
func (r *Runner) delegation(a *active, key string, call corral.ToolCall, runCtx context.Context, pauseOK bool) delegated {
	ctx, run := a.ctx, a.run
	fail := func(target string, err error) delegated {
		msg := corral.ErrorMessage(err)
		data := map[string]any{"tool": call.Name, "tool_call_id": call.ID, "target": target, "error": msg}
		var e *corral.Error
		if errors.As(err, &e) && e.Code == corral.EADMISSION && e.Reason != "" {
			data["cap"] = e.Reason
		}
		r.record(ctx, run.ID, trace.DelegationRefused, data)
		return delegated{res: toolResult{ExitCode: -1, Error: msg}}
	}
	if r.deleg == nil {
		return delegated{res: toolResult{ExitCode: -1, Error: "delegation is not available on this server"}}
	}
	switch call.Name {
	case toolListAgents:
		agents, err := r.deleg.ListAgents(ctx, run)
		if err != nil {
			return delegated{res: toolResult{ExitCode: -1, Error: corral.ErrorMessage(err)}}
		}
		type entry struct {
			ID           string `json:"id"`
			Name         string `json:"name"`
			Driver       string `json:"driver"`
			FS           string `json:"fs"`
			Instructions string `json:"instructions"`
			Self         bool   `json:"self,omitempty"`
		}
		list := make([]entry, 0, len(agents))
		for _, ag := range agents {
			ins, _ := capText(ag.Instructions, 300)
			d := ag.Driver
			if d == "" {
				d = corral.DriverBuiltin
			}
			list = append(list, entry{ID: ag.ID, Name: ag.Name, Driver: d, FS: ag.Policy.FS, Instructions: ins, Self: ag.ID == run.AgentID})
		}
		b, _ := json.Marshal(list)
		return delegated{res: toolResult{Output: string(b)}}

	case toolCreateAgent:
		var args struct {
			Name         string `json:"name"`
			Instructions string `json:"instructions"`
			Policy       *struct {
				FS           string       `json:"fs"`
				BudgetTokens int64        `json:"budget_tokens"`
				Limits       *agentLimits `json:"limits"`
			} `json:"policy"`
		}
		if err := strictJSON(call.Arguments, &args); err != nil {
			return delegated{res: toolResult{ExitCode: -1, Error: err.Error()}}
		}
		spec := corral.AgentSpec{Name: args.Name, Instructions: args.Instructions}
		if p := args.Policy; p != nil {
			spec.FS, spec.BudgetTokens = p.FS, p.BudgetTokens
			if l := p.Limits; l != nil {
				spec.Limits = corral.Limits{MaxRuns: l.MaxRuns, RunTimeoutS: l.RunTimeoutS, CPUMillis: l.CPUMillis,
					MemoryBytes: l.MemoryBytes, Pids: l.Pids, OutputBytes: l.OutputBytes}
			}
		}
		ag, err := r.deleg.CreateAgent(ctx, run, spec)
		if err != nil {
			return fail(args.Name, err)
		}
		r.record(ctx, run.ID, trace.AgentCreated, map[string]any{"tool_call_id": call.ID, "agent_id": ag.ID, "name": ag.Name, "fs": ag.Policy.FS})
		b, _ := json.Marshal(map[string]any{"id": ag.ID, "name": ag.Name, "fs": ag.Policy.FS, "budget_tokens": ag.Budget.Tokens})
		return delegated{res: toolResult{Output: string(b)}}

	default: // toolDelegate
		var args struct {
			AgentID string `json:"agent_id"`
			Task    string `json:"task"`
		}
		if err := strictJSON(call.Arguments, &args); err != nil {
			return delegated{res: toolResult{ExitCode: -1, Error: err.Error()}}
		}
		if args.AgentID == "" || strings.TrimSpace(args.Task) == "" {
			return delegated{res: toolResult{ExitCode: -1, Error: "delegate needs \"agent_id\" and a \"task\""}}
		}
		child, start, err := r.deleg.Delegate(ctx, run, key, args.AgentID, args.Task)
		if err != nil {
			return fail(args.AgentID, err)
		}
		if start != nil {
			r.Start(start.Run, start.Message, start.Admission)
		}
		r.record(ctx, run.ID, trace.Delegated, map[string]any{
			"tool_call_id": call.ID, "run_id": child.ID, "agent_id": child.AgentID, "depth": child.Depth,
		})
		switch child, end := r.awaitChild(a, runCtx, child.ID, pauseOK); end {
		case childPaused:
			return delegated{paused: child.ID}
		case serverStopping:
			return delegated{shutdown: true}
		default:
			return delegated{res: r.childResult(ctx, child)}
		}
	}
}

// agentLimits are the limits create_agent may ask for.
type agentLimits struct {
	MaxRuns     int64 `json:"max_runs"`
	RunTimeoutS int64 `json:"run_timeout_s"`
	CPUMillis   int64 `json:"cpu_millis"`
	MemoryBytes int64 `json:"memory_bytes"`
	Pids        int64 `json:"pids"`
	OutputBytes int64 `json:"output_bytes"`
}

// strictJSON decodes a tool call's arguments, refusing unknown fields so a
// misspelt policy field is an error, not a silent default.
func strictJSON(args string, v any) error {
	dec := json.NewDecoder(strings.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the arguments are not what the tool takes: %v", err)
	}
	return nil
}

// childWait is how often a parent looks at its child's status when no
// event of the child wakes it (a child run by another process's runner,
// or a watcher that fell behind).
const childWait = time.Second

// How a wait for a child ended.
type waitEnd int

const (
	childEnded     waitEnd = iota // or the parent was killed, which killed it
	childPaused                   // on its budget: the parent pauses too
	serverStopping                // the tree is left for the next start to re-attach
)

// awaitChild waits for a's child run to end, and returns it as it ended.
// A stop of the parent (or its time running out) stops the child, and the
// wait goes on until the child has ended; a kill kills it and returns at
// once. With pauseOK, a child that pauses on its budget ends the wait
// (childPaused): the parent pauses too.
func (r *Runner) awaitChild(a *active, runCtx context.Context, childID string, pauseOK bool) (corral.Run, waitEnd) {
	ctx := context.WithoutCancel(a.ctx)
	tick := time.NewTicker(childWait)
	defer tick.Stop()
	// Every event of the child wakes the wait (its end closes the
	// channel), so a parent goes on as soon as its child has ended.
	events, unsubscribe := r.hub.subscribe(childID)
	defer unsubscribe()
	stopped, done, deadline := a.stopped, a.ctx.Done(), runCtx.Done()
	asked := false
	var child corral.Run
	for {
		c, err := r.store.Run(ctx, childID)
		if err == nil {
			child = c
			if !corral.RunActive(c.Status) {
				return c, childEnded
			}
			if c.Status == corral.RunPaused && pauseOK && !asked {
				return c, childPaused
			}
		}
		_, killed := a.state()
		switch {
		case r.base.Err() != nil:
			return child, serverStopping
		case killed || a.ctx.Err() != nil:
			if err := r.Kill(ctx, childID); err != nil && corral.ErrorCode(err) != corral.ECONFLICT {
				r.cfg.Log.Error("killing a delegated run", "run", childID, "err", err)
			}
			child.Status, child.Reason = corral.RunKilled, "its parent was killed"
			return child, childEnded
		case !asked && (stopped == nil || deadline == nil):
			asked = true
			if err := r.Stop(ctx, childID); err != nil && corral.ErrorCode(err) != corral.ECONFLICT {
				r.cfg.Log.Error("stopping a delegated run", "run", childID, "err", err)
			}
		}
		select {
		case <-tick.C:
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case <-stopped:
			stopped = nil
		case <-deadline:
			deadline = nil
		case <-done:
			done = nil
		}
	}
}

// childResult is a child run's end as its parent's model reads it.
func (r *Runner) childResult(ctx context.Context, child corral.Run) toolResult {
	out := map[string]any{
		"run_id": child.ID, "agent_id": child.AgentID, "status": child.Status,
		"answer": r.answerOf(ctx, child), "change_set_id": child.ChangeSetID,
	}
	if child.Reason != "" {
		out["reason"] = child.Reason
	}
	b, _ := json.Marshal(out)
	res := toolResult{Output: string(b)}
	if child.Status != corral.RunCompleted {
		res.ExitCode = 1
	}
	return res
}

// answerOf finds the final answer a run added to its agent's thread.
func (r *Runner) answerOf(ctx context.Context, run corral.Run) string {
	msgs, err := r.store.Messages(ctx, run.AgentID, "", 50)
	if err != nil {
		return ""
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i]; m.RunID == run.ID && m.Role == corral.RoleAssistant {
			text, _ := capText(m.Content, maxToolOutput)
			return text
		}
	}
	return ""
}

// batch runs consecutive delegate calls of one model turn at once, at most
// the tree's concurrency at a time; every other call one by one. res[i] is
// calls[i]'s result.
func (r *Runner) delegateBatch(a *active, keys []string, calls []corral.ToolCall, runCtx context.Context) []delegated {
	out := make([]delegated, len(calls))
	limit := 1
	if r.deleg != nil {
		limit = max(1, r.deleg.Caps().Concurrency)
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = r.delegation(a, keys[i], calls[i], runCtx, true)
		}()
	}
	wg.Wait()
	return out
}

// mayGoOn checks, fresh, that the person who started a's run may still
// run its agent: a grant revoked mid-run ends it at its next step.
func (r *Runner) mayGoOn(a *active) bool {
	run := a.run
	if run.TriggeredBy == nil {
		return false
	}
	ag, err := r.store.Agent(a.ctx, run.AgentID, run.TriggeredBy.ID)
	if err != nil {
		// A store failure is not a revocation: the step after will tell.
		return corral.ErrorCode(err) != corral.ENOTFOUND
	}
	return access.Check(ag.Access, access.SendMessage) == access.Allow
}

// as is ctx carrying the run's actor, its person's level on its agent
// read now: what a node replays access from for a call that acts in the
// run's sandbox (corral.Actor). A run whose person lost access carries
// level none, which a node refuses.
func (r *Runner) as(ctx context.Context, run corral.Run) context.Context {
	a := corral.Actor{AgentID: run.AgentID}
	if run.TriggeredBy != nil {
		a.UserID = run.TriggeredBy.ID
		if ag, err := r.store.Agent(ctx, run.AgentID, run.TriggeredBy.ID); err == nil {
			a.Level = ag.Access
		}
	}
	return corral.WithActor(ctx, a)
}

// revoked is the outcome of a run whose person lost access.
var revoked = outcome{status: corral.RunCancelled, reason: "the person who started the run may no longer run this agent"}

// afterEnd carries a run's end through its tree: its active children end
// with it (killed with a killed run, else stopped), and a parent paused
// while waiting for it goes on.
func (r *Runner) afterEnd(ctx context.Context, run corral.Run) {
	if run.Depth == 0 && r.deleg == nil {
		return
	}
	tree, err := r.store.TreeRuns(ctx, run.Root())
	if err != nil {
		r.cfg.Log.Error("ended run's tree not read", "run", run.ID, "err", err)
		return
	}
	for _, c := range tree {
		if c.ParentRunID != run.ID || !corral.RunActive(c.Status) {
			continue
		}
		end := r.Stop
		if run.Status == corral.RunKilled {
			end = r.Kill
		}
		if err := end(ctx, c.ID); err != nil && corral.ErrorCode(err) != corral.ECONFLICT {
			r.cfg.Log.Error("ending an ended run's child", "run", c.ID, "err", err)
		}
	}
	if run.ParentRunID != "" {
		r.resumeRun(ctx, run.ParentRunID)
	}
}

// pausedChild returns the id of a paused child of run, "" when none is.
func (r *Runner) pausedChild(ctx context.Context, run corral.Run) string {
	tree, err := r.store.TreeRuns(ctx, run.Root())
	if err != nil {
		return ""
	}
	for _, c := range tree {
		if c.ParentRunID == run.ID && c.Status == corral.RunPaused {
			return c.ID
		}
	}
	return ""
}

// pauseWaiting parks a run whose delegated child paused: unlike a budget
// pause, its agent stays active. It goes on when the child does (Resume)
// or ends (afterEnd).
func (r *Runner) pauseWaiting(ctx context.Context, run corral.Run, childID string) {
	r.record(ctx, run.ID, trace.Paused, map[string]any{"waiting_for": childID})
	from := run.Status
	run.Status = corral.RunPaused
	run.Reason = "waiting for its delegated run " + childID + ", which is paused"
	if err := r.store.UpdateRun(ctx, run, from); err != nil {
		r.cfg.Log.Error("run's pause not recorded", "run", run.ID, "err", err)
		return
	}
	// The child may have gone on between the check and the pause.
	if r.pausedChild(ctx, run) == "" {
		r.resumeRun(ctx, run.ID)
	}
}

// resumeRun continues one paused run, if its agent may go on and no child
// of it is paused (takeUp).
func (r *Runner) resumeRun(ctx context.Context, runID string) {
	run, err := r.store.Run(ctx, runID)
	if err != nil || run.Status != corral.RunPaused {
		return
	}
	agent, err := r.store.Agent(ctx, run.AgentID, "")
	if err != nil || agent.Budget.Spent() || agent.State != corral.StateActive {
		return
	}
	r.takeUp(ctx, run)
}
