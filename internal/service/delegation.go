package service

// Delegation: the use cases behind a run's list_agents, delegate and
// create_agent tools. Every hop acts as the person who started the tree's
// root run, with that person's level on the target loaded fresh, through
// the same admission as a message; the tree's caps are decided inside the
// admission transaction, so parallel hops cannot both take the last slot.
// A target must also be one the person accepted (access.Target): a grant
// alone, which anyone can give anyone, never makes an agent a target.

import (
	"context"
	"fmt"

	"corral"
	"corral/internal/access"
	"corral/internal/keylock"
)

// Delegation is what runs may ask of other agents. The runner calls it for
// a run's delegation tools; it trusts nothing the run says but the run
// itself, which the runner loaded from the store.
type Delegation struct {
	store     DelegationStore
	admission *Admissions
	caps      corral.TreeCaps
	cfg       Config
	creating  keylock.Map // per tree: one create_agent counted and made at a time
}

// DelegationStore is what delegation needs from storage: the runs of a
// tree and the agents a hop may reach or create.
type DelegationStore interface {
	corral.RunStore
	agentMaker
	Agent(ctx context.Context, id, userID string) (corral.Agent, error)
	AgentsFor(ctx context.Context, userID string) ([]corral.Agent, error)
}

// NewDelegation returns the delegation use cases under caps (zero fields
// take their defaults). A hop is admitted by admission; the runner starts
// the child it returns.
func NewDelegation(store DelegationStore, admission *Admissions, caps corral.TreeCaps, cfg Config) *Delegation {
	cfg.defaults()
	return &Delegation{store: store, admission: admission, caps: caps.WithDefaults(), cfg: cfg}
}

// Caps are the tree caps in force.
func (d *Delegation) Caps() corral.TreeCaps { return d.caps }

// person is who a hop acts as: the person who started the run's tree.
func person(run corral.Run) (corral.User, error) {
	if run.TriggeredBy == nil {
		return corral.User{}, corral.Errorf(corral.EUNAUTH, "the person who started this run no longer has an account")
	}
	return corral.User{ID: run.TriggeredBy.ID, Name: run.TriggeredBy.Name}, nil
}

// ListAgents returns the agents the run's person may hand work to: those
// they may start runs on and own or accepted as delegation targets, the
// run's own agent included when it is one.
func (d *Delegation) ListAgents(ctx context.Context, parent corral.Run) ([]corral.Agent, error) {
	actor, err := person(parent)
	if err != nil {
		return nil, err
	}
	all, err := d.store.AgentsFor(ctx, actor.ID)
	if err != nil {
		return nil, err
	}
	var out []corral.Agent
	for _, a := range all {
		if access.Target(a.Access, a.Accepted) == access.Allow {
			out = append(out, a)
		}
	}
	return out, nil
}

// Delegate admits a child run of parent on agentID with task as its
// message, for parent's tool call call; the caller (the runner) starts it
// and waits for it. Asked again for the same call (after a restart, or a
// pause), it returns the run that call started, with start nil: it is
// started already. The person's access to the agent and their consent to
// it as a target are checked first and fresh: an agent they may not run,
// or have not accepted, is not found, exactly as a missing one. A cap that
// refuses the hop is an EADMISSION error whose Reason names it; so is any
// admission refusal of the target agent.
func (d *Delegation) Delegate(ctx context.Context, parent corral.Run, call, agentID, task string) (corral.Run, *corral.Admitted, error) {
	actor, err := person(parent)
	if err != nil {
		return corral.Run{}, nil, err
	}
	a, err := loadTarget(ctx, d.store, actor, agentID)
	if err != nil {
		return corral.Run{}, nil, err
	}
	if child, err := d.store.ChildRun(ctx, parent.ID, call); err == nil {
		return child, nil, nil
	} else if corral.ErrorCode(err) != corral.ENOTFOUND {
		return corral.Run{}, nil, err
	}
	depth := parent.Depth + 1
	in, err := d.admission.Admit(ctx, actor, a, task, corral.Run{
		TriggeredBy: parent.TriggeredBy,
		ParentRunID: parent.ID, RootRunID: parent.Root(), Depth: depth, ParentCall: call,
	}, func(f corral.AdmissionFacts) string { return AdmitHop(f, depth, d.caps) }, d.refusal)
	if corral.ErrorCode(err) == corral.ECONFLICT {
		// The same call, asked twice at once: the other one started it.
		if c, err := d.store.ChildRun(ctx, parent.ID, call); err == nil {
			return c, nil, nil
		}
	}
	if err != nil {
		return corral.Run{}, nil, err
	}
	return in.Run, &in, nil
}

// loadTarget reads an agent with the actor's level and consent, fresh,
// and applies the delegation target policy (access.Target).
func loadTarget(ctx context.Context, store agentReader, actor corral.User, id string) (corral.Agent, error) {
	a, err := store.Agent(ctx, id, actor.ID)
	if err != nil {
		return corral.Agent{}, err
	}
	if err := access.Target(a.Access, a.Accepted).Err("agent", access.SendMessage); err != nil {
		return corral.Agent{}, err
	}
	return a, nil
}

// AdmitHop is the tree's part of admitting a delegated run at depth:
// "" or the cap that refuses it. Pure, like Admit.
func AdmitHop(f corral.AdmissionFacts, depth int, caps corral.TreeCaps) string {
	switch {
	case depth > caps.Depth:
		return corral.ReasonDelegationDepth
	case f.Children >= int64(caps.Fanout):
		return corral.ReasonDelegationFanout
	case f.TreeActive >= int64(caps.Concurrency):
		return corral.ReasonDelegationConcurrency
	}
	return ""
}

// refusal words a refused hop, naming the cap and its setting.
func (d *Delegation) refusal(ev corral.Admission) string {
	switch ev.Reason {
	case corral.ReasonDelegationDepth:
		return fmt.Sprintf("refused by the delegation depth cap (%d, --delegation-depth): a run this deep may not delegate further", d.caps.Depth)
	case corral.ReasonDelegationFanout:
		return fmt.Sprintf("refused by the delegation fan-out cap (%d, --delegation-fanout): this run has started as many delegated runs as it may", d.caps.Fanout)
	case corral.ReasonDelegationConcurrency:
		return fmt.Sprintf("refused by the delegation concurrency cap (%d, --delegation-concurrency): this tree has as many delegated runs going as it may; wait for one to end", d.caps.Concurrency)
	}
	return refusal(ev)
}

// CreateAgent makes an agent for parent's tree, owned by the tree's person,
// never more permissive than parent's agent: the same network, the same
// protected, risky and secret globs, the library only if parent's searches
// it, its changes always waiting for a person, fs and every limit at most
// the parent's, and a budget at most what the parent's has left. The tree may create caps.Create agents.
func (d *Delegation) CreateAgent(ctx context.Context, parent corral.Run, spec corral.AgentSpec) (corral.Agent, error) {
	actor, err := person(parent)
	if err != nil {
		return corral.Agent{}, err
	}
	// The person must still be allowed to run the parent's agent: whatever
	// they could not start, they cannot extend.
	p, err := loadAgent(ctx, d.store, actor, parent.AgentID, access.SendMessage)
	if err != nil {
		return corral.Agent{}, err
	}
	in, err := narrower(p, spec)
	if err != nil {
		return corral.Agent{}, err
	}
	root := parent.Root()
	unlock := d.creating.Lock(root)
	defer unlock()
	n, err := d.store.AgentsCreatedInTree(ctx, root)
	if err != nil {
		return corral.Agent{}, err
	}
	if n >= int64(d.caps.Create) {
		return corral.Agent{}, &corral.Error{Code: corral.EADMISSION, Reason: "delegation_create",
			Message: fmt.Sprintf("refused by the agent creation cap (%d, --delegation-create): this tree has created as many agents as it may", d.caps.Create)}
	}
	return createAgent(ctx, d.store, d.cfg.Now, actor, in, parent.ID, p.ID)
}

// narrower builds the new agent's settings from the parent agent p and
// what was asked: an error for anything wider than p's.
func narrower(p corral.Agent, spec corral.AgentSpec) (AgentInput, error) {
	name, instructions := spec.Name, spec.Instructions
	builtin, review := corral.DriverBuiltin, corral.ChangesReview
	fs, network := p.Policy.FS, p.Policy.Network
	if spec.FS != "" {
		if spec.FS != corral.FSReadOnly && spec.FS != corral.FSReadWrite {
			return AgentInput{}, corral.Errorf(corral.EINVALID, "policy.fs must be %q or %q", corral.FSReadOnly, corral.FSReadWrite)
		}
		if spec.FS == corral.FSReadWrite && p.Policy.FS != corral.FSReadWrite {
			return AgentInput{}, corral.Errorf(corral.EINVALID, "policy.fs %q is wider than this agent's %q", spec.FS, p.Policy.FS)
		}
		fs = spec.FS
	}
	secrets, protected, risky := p.Policy.Secrets, p.Policy.Protected, p.Policy.Risky
	// What anyone can publish reaches the new agent only if it reaches
	// this one already.
	library := p.Policy.Library
	in := AgentInput{
		Name: &name, Instructions: &instructions, Model: &p.Model, Driver: &builtin,
		FS: &fs, Changes: &review, Network: &network, Egress: &p.Policy.Egress,
		Secrets: &secrets, Protected: &protected, Risky: &risky, Library: &library,
	}
	l := p.Limits
	limits := LimitsInput{
		MaxPromptBytes: &l.MaxPromptBytes, MaxRuns: &l.MaxRuns, RunTimeoutS: &l.RunTimeoutS,
		CPUMillis: &l.CPUMillis, MemoryBytes: &l.MemoryBytes, Pids: &l.Pids, OutputBytes: &l.OutputBytes,
		DiskBytes: &l.DiskBytes, DiskInodes: &l.DiskInodes, PendingDiskBytes: &l.PendingDiskBytes,
	}
	a := spec.Limits
	if a.MaxPromptBytes != 0 || a.DiskBytes != 0 || a.DiskInodes != 0 || a.PendingDiskBytes != 0 {
		return AgentInput{}, corral.Errorf(corral.EINVALID, "a new agent may set only limits max_runs, run_timeout_s, cpu_millis, memory_bytes, pids and output_bytes")
	}
	for _, f := range []struct {
		name   string
		parent int64
		asked  int64
		dst    **int64
	}{
		{"max_runs", l.MaxRuns, a.MaxRuns, &limits.MaxRuns},
		{"run_timeout_s", l.RunTimeoutS, a.RunTimeoutS, &limits.RunTimeoutS},
		{"cpu_millis", l.CPUMillis, a.CPUMillis, &limits.CPUMillis},
		{"memory_bytes", l.MemoryBytes, a.MemoryBytes, &limits.MemoryBytes},
		{"pids", l.Pids, a.Pids, &limits.Pids},
		{"output_bytes", l.OutputBytes, a.OutputBytes, &limits.OutputBytes},
	} {
		switch {
		case f.asked == 0:
			continue
		case f.asked < 0:
			return AgentInput{}, corral.Errorf(corral.EINVALID, "limits.%s must be positive", f.name)
		case f.parent == 0:
			// The server's default, which this layer does not know: a
			// number asked for could be above it.
			return AgentInput{}, corral.Errorf(corral.EINVALID, "limits.%s: this agent has the server's default, which a new agent keeps", f.name)
		case f.asked > f.parent:
			return AgentInput{}, corral.Errorf(corral.EINVALID, "limits.%s %d is above this agent's %d", f.name, f.asked, f.parent)
		}
		v := f.asked
		*f.dst = &v
	}
	in.Limits = limits
	// A new agent's budget is carved out of what this one has left (the
	// store takes it from this agent's remainder when it stores the new
	// one), never added beside it: half of it unless one is asked for.
	budget, left := int64(0), p.Budget.Left()
	if left == 0 {
		return AgentInput{}, corral.Errorf(corral.EADMISSION, "this agent's token budget is spent: it cannot give a new agent any")
	}
	if left > 0 {
		budget = max(1, left/2)
	}
	if b := spec.BudgetTokens; b != 0 {
		switch {
		case b < 0:
			return AgentInput{}, corral.Errorf(corral.EINVALID, "budget_tokens must be positive")
		case left > 0 && b > left:
			return AgentInput{}, corral.Errorf(corral.EINVALID, "budget_tokens %d is above what this agent has left (%d): a new agent's budget is carved out of it", b, left)
		default:
			budget = b
		}
	}
	in.BudgetTokens = &budget
	return in, nil
}
