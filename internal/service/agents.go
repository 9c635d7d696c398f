package service

import (
	"context"
	"strings"
	"time"

	"corral"
	"corral/internal/access"
	"corral/internal/auth"
	"corral/internal/egress"
	"corral/internal/glob"
	"corral/internal/sanitize"
)

// AgentStore is what the agent use cases need from storage.
type AgentStore interface {
	corral.AgentStore
	corral.ShareStore
	corral.MessageStore
	UserByID(ctx context.Context, id string) (corral.User, error)
	UserByEmail(ctx context.Context, email string) (corral.User, error)
	SetAgentState(ctx context.Context, agentID string, to corral.AgentState, from ...corral.AgentState) (bool, error)
	Run(ctx context.Context, id string) (corral.Run, error)
}

// Agents is everything done to agents: settings, sharing, and the thread.
type Agents struct {
	store   AgentStore
	cfg     Config
	resume  func(ctx context.Context, agentID string) error
	dropped []func(agentID string) error
}

// AgentsDeps is what the agent use cases are built on.
type AgentsDeps struct {
	Store AgentStore
	// Resume continues an agent's paused runs once its budget allows (the
	// runner's Resume): raising the budget resumes them with no new
	// message. nil: paused runs wait.
	Resume func(ctx context.Context, agentID string) error
	// Dropped are told of each deleted agent, after the store has deleted
	// it, to delete what it kept outside the store (its private documents,
	// what its node holds).
	Dropped []func(agentID string) error
}

// NewAgents returns the agent use cases.
func NewAgents(d AgentsDeps, cfg Config) *Agents {
	cfg.defaults()
	return &Agents{store: d.Store, cfg: cfg, resume: d.Resume, dropped: d.Dropped}
}

// MaxInstructions bounds an agent's instructions.
const MaxInstructions = 64 << 10

// Upper bounds of limits: past these a value is a typo, not a setting.
var limitMax = corral.Limits{
	MaxPromptBytes: sanitize.MaxContent,
	MaxRuns:        1 << 40,
	RunTimeoutS:    7 * 24 * 3600,
	CPUMillis:      1 << 20,
	MemoryBytes:    1 << 40,
	Pids:           1 << 16,
	OutputBytes:    1 << 30,
	// A run's disk is a sparse file: the bound is what a typo would ask
	// for, not what a host has. 1<<24 inodes make a 4 GiB inode table.
	DiskBytes:        1 << 40,
	DiskInodes:       1 << 24,
	PendingDiskBytes: 1 << 50,
}

// load reads the agent with the actor's level, fresh, and applies the
// policy. Every agent method starts here.
func (s *Agents) load(ctx context.Context, actor corral.User, id string, action access.Action) (corral.Agent, error) {
	return loadAgent(ctx, s.store, actor, id, action)
}

// agentReader reads an agent with a user's level on it.
type agentReader interface {
	Agent(ctx context.Context, id, userID string) (corral.Agent, error)
}

// loadAgent reads an agent with the actor's level, fresh from the store,
// and applies the access policy to action.
func loadAgent(ctx context.Context, store agentReader, actor corral.User, id string, action access.Action) (corral.Agent, error) {
	a, err := store.Agent(ctx, id, actor.ID)
	if err != nil {
		return corral.Agent{}, err
	}
	if err := access.Check(a.Access, action).Err("agent", action); err != nil {
		return corral.Agent{}, err
	}
	return a, nil
}

// List returns the agents the actor can see, each with the actor's level.
func (s *Agents) List(ctx context.Context, actor corral.User) ([]corral.Agent, error) {
	return s.store.AgentsFor(ctx, actor.ID)
}

// Get returns one agent.
func (s *Agents) Get(ctx context.Context, actor corral.User, id string) (corral.Agent, error) {
	return s.load(ctx, actor, id, access.ViewAgent)
}

// AgentInput is the settable part of an agent. A nil field is left as it is
// (on create: takes the default).
type AgentInput struct {
	Name         *string
	Instructions *string
	Model        *string
	Driver       *string // one of corral.AgentDrivers
	FS           *string
	Changes      *string
	Network      *string
	Egress       *corral.Egress // the whole allow-list; nil leaves it as it is
	Secrets      *[]string      // globs; nil leaves them as they are
	Protected    *[]string
	Risky        *[]string
	// Library: search the shared library for the agent (off for a new
	// agent).
	Library      *bool
	Limits       LimitsInput
	BudgetTokens *int64
}

// LimitsInput sets individual limits; nil leaves one as it is.
type LimitsInput struct {
	MaxPromptBytes, MaxRuns, RunTimeoutS, CPUMillis, MemoryBytes, Pids, OutputBytes *int64
	DiskBytes, DiskInodes, PendingDiskBytes                                         *int64
}

// Create makes an agent owned by the actor.
func (s *Agents) Create(ctx context.Context, actor corral.User, in AgentInput) (corral.Agent, error) {
	return createAgent(ctx, s.store, s.cfg.Now, actor, in, "", "")
}

// Update changes an agent's settings: editors may change everything but the
// budget, which is the owner's.
func (s *Agents) Update(ctx context.Context, actor corral.User, id string, in AgentInput) (corral.Agent, error) {
	a, err := s.load(ctx, actor, id, access.EditAgent)
	if err != nil {
		return corral.Agent{}, err
	}
	if in.BudgetTokens != nil {
		if err := access.Check(a.Access, access.SetBudget).Err("agent", access.SetBudget); err != nil {
			return corral.Agent{}, err
		}
	}
	before := a.Policy
	if err := apply(&a, in); err != nil {
		return corral.Agent{}, err
	}
	if a.CreatedByRun != "" && (in.Network != nil || in.Egress != nil) {
		if err := s.withinCreator(ctx, a, before); err != nil {
			return corral.Agent{}, err
		}
	}
	a.UpdatedAt = s.cfg.Now().UTC()
	if err := s.store.UpdateAgent(ctx, a); err != nil {
		return corral.Agent{}, err
	}
	// A paused agent goes on the moment its budget allows more work. The
	// state moves only if it is still paused, so a pause or quarantine made
	// meanwhile is never undone by a settings edit.
	if in.BudgetTokens != nil && a.State == corral.StatePaused && !a.Budget.Spent() {
		ok, err := s.store.SetAgentState(ctx, a.ID, corral.StateActive, corral.StatePaused)
		if err != nil {
			return corral.Agent{}, err
		}
		if ok {
			a.State = corral.StateActive
		}
	}
	if in.BudgetTokens != nil && s.resume != nil && !a.Budget.Spent() {
		if err := s.resume(ctx, a.ID); err != nil {
			s.cfg.Log.Error("resuming paused runs", "agent", a.ID, "err", err)
		}
	}
	return a, nil
}

// withinCreator refuses a network wider than that of the agent whose run
// created a: a created agent's egress is never wider than its parent's,
// at creation (it gets a copy) or after. With the parent gone, what a had
// is the bound.
func (s *Agents) withinCreator(ctx context.Context, a corral.Agent, before corral.Policy) error {
	bound := before
	if run, err := s.store.Run(ctx, a.CreatedByRun); err == nil {
		if parent, err := s.store.Agent(ctx, run.AgentID, ""); err == nil {
			bound = parent.Policy
		} else if corral.ErrorCode(err) != corral.ENOTFOUND {
			return err
		}
	} else if corral.ErrorCode(err) != corral.ENOTFOUND {
		return err
	}
	if a.Policy.Network == corral.NetworkNone {
		return nil
	}
	if bound.Network != corral.NetworkAllowlist || !egress.Covers(bound.Egress, a.Policy.Egress) {
		return corral.Errorf(corral.EFORBIDDEN, "policy.egress would be wider than that of the agent that created this one: an agent a run created reaches no more than its parent")
	}
	return nil
}

// apply validates each given field and sets it on a.
func apply(a *corral.Agent, in AgentInput) error {
	if in.Name != nil {
		name, err := sanitize.Name(*in.Name)
		if err != nil {
			return err
		}
		a.Name = name
	}
	if in.Instructions != nil {
		text, err := sanitize.Text("instructions", *in.Instructions, MaxInstructions)
		if err != nil {
			return err
		}
		a.Instructions = text
	}
	if in.Model != nil {
		model, err := sanitize.ModelName(*in.Model)
		if err != nil {
			return err
		}
		a.Model = model
	}
	if in.Driver != nil {
		d := *in.Driver
		if err := setEnum(&d, in.Driver, "driver", corral.AgentDrivers...); err != nil {
			return err
		}
		if d == corral.DriverBuiltin {
			d = ""
		}
		a.Driver = d
	}
	if err := setEnum(&a.Policy.FS, in.FS, "policy.fs", corral.FSReadOnly, corral.FSReadWrite); err != nil {
		return err
	}
	if err := setEnum(&a.Policy.Changes, in.Changes, "policy.changes", corral.ChangesReview, corral.ChangesAuto); err != nil {
		return err
	}
	if err := setEnum(&a.Policy.Network, in.Network, "policy.network", corral.NetworkNone, corral.NetworkAllowlist); err != nil {
		return err
	}
	if in.Egress != nil {
		e, err := egress.Normalize(*in.Egress)
		if err != nil {
			return err
		}
		a.Policy.Egress = e
	}
	if in.Library != nil {
		a.Policy.Library = *in.Library
	}
	for _, g := range []struct {
		field string
		dst   *[]string
		in    *[]string
	}{
		{"policy.exclude", &a.Policy.Secrets, in.Secrets},
		{"policy.protected", &a.Policy.Protected, in.Protected},
		{"policy.risky", &a.Policy.Risky, in.Risky},
	} {
		if err := setGlobs(g.dst, g.in, g.field); err != nil {
			return err
		}
	}
	l := &a.Limits
	for _, f := range []struct {
		name string
		dst  *int64
		in   *int64
		max  int64
	}{
		{"max_prompt_bytes", &l.MaxPromptBytes, in.Limits.MaxPromptBytes, limitMax.MaxPromptBytes},
		{"max_runs", &l.MaxRuns, in.Limits.MaxRuns, limitMax.MaxRuns},
		{"run_timeout_s", &l.RunTimeoutS, in.Limits.RunTimeoutS, limitMax.RunTimeoutS},
		{"cpu_millis", &l.CPUMillis, in.Limits.CPUMillis, limitMax.CPUMillis},
		{"memory_bytes", &l.MemoryBytes, in.Limits.MemoryBytes, limitMax.MemoryBytes},
		{"pids", &l.Pids, in.Limits.Pids, limitMax.Pids},
		{"output_bytes", &l.OutputBytes, in.Limits.OutputBytes, limitMax.OutputBytes},
		{"disk_bytes", &l.DiskBytes, in.Limits.DiskBytes, limitMax.DiskBytes},
		{"disk_inodes", &l.DiskInodes, in.Limits.DiskInodes, limitMax.DiskInodes},
		{"pending_disk_bytes", &l.PendingDiskBytes, in.Limits.PendingDiskBytes, limitMax.PendingDiskBytes},
	} {
		if err := setBounded(f.dst, f.in, "limits."+f.name, f.max); err != nil {
			return err
		}
	}
	if in.BudgetTokens != nil {
		if err := setBounded(&a.Budget.Tokens, in.BudgetTokens, "budget.tokens", 1<<50); err != nil {
			return err
		}
	}
	return nil
}

// maxGlobs bounds each list of globs an agent may configure.
const maxGlobs = 64

func setGlobs(dst, in *[]string, field string) error {
	if in == nil {
		return nil
	}
	if len(*in) > maxGlobs {
		return corral.Errorf(corral.EINVALID, "%s: at most %d globs", field, maxGlobs)
	}
	for _, g := range *in {
		if len(g) > 256 || strings.ContainsAny(g, "\x00\\") {
			return corral.Errorf(corral.EINVALID, "%s: %q is not a glob", field, g)
		}
		if err := glob.Valid(g); err != nil {
			return corral.Errorf(corral.EINVALID, "%s: %v", field, err)
		}
	}
	*dst = append([]string(nil), *in...)
	if len(*dst) == 0 {
		*dst = nil
	}
	return nil
}

func setEnum(dst, in *string, field string, allowed ...string) error {
	if in == nil {
		return nil
	}
	for _, v := range allowed {
		if *in == v {
			*dst = v
			return nil
		}
	}
	return corral.Errorf(corral.EINVALID, "%s must be one of %q", field, allowed)
}

func setBounded(dst, in *int64, field string, max int64) error {
	if in == nil {
		return nil
	}
	if *in < 0 || *in > max {
		return corral.Errorf(corral.EINVALID, "%s must be between 0 and %d (0 means the server default)", field, max)
	}
	*dst = *in
	return nil
}

// Delete removes an agent and everything that belongs to it.
func (s *Agents) Delete(ctx context.Context, actor corral.User, id string) error {
	if _, err := s.load(ctx, actor, id, access.DeleteAgent); err != nil {
		return err
	}
	if err := s.store.DeleteAgent(ctx, id); err != nil {
		return err
	}
	for _, f := range s.dropped {
		// The agent is gone and its id is never made again: what is left
		// behind can be reached by nobody, so a failure is logged, not
		// answered.
		if err := f(id); err != nil {
			s.cfg.Log.Error("deleting what a deleted agent kept", "agent", id, "err", err)
		}
	}
	return nil
}

// Release lifts a quarantine.
func (s *Agents) Release(ctx context.Context, actor corral.User, id string) (corral.Agent, error) {
	a, err := s.load(ctx, actor, id, access.Release)
	if err != nil {
		return corral.Agent{}, err
	}
	if a.State != corral.StateQuarantined {
		return a, nil
	}
	to := corral.StateActive
	if a.Budget.Spent() {
		to = corral.StatePaused
	}
	if _, err := s.store.SetAgentState(ctx, a.ID, to, corral.StateQuarantined); err != nil {
		return corral.Agent{}, err
	}
	return s.store.Agent(ctx, id, actor.ID)
}

// Grants lists who the agent is shared with.
func (s *Agents) Grants(ctx context.Context, actor corral.User, id string) ([]corral.Grant, error) {
	if _, err := s.load(ctx, actor, id, access.Share); err != nil {
		return nil, err
	}
	return s.store.Grants(ctx, id)
}

// PutGrant gives a user a level on the agent, or changes it.
func (s *Agents) PutGrant(ctx context.Context, actor corral.User, id, userID, level string) (corral.Grant, error) {
	a, err := s.load(ctx, actor, id, access.Share)
	if err != nil {
		return corral.Grant{}, err
	}
	l, err := corral.ParseLevel(level)
	if err != nil || l == corral.LevelOwner {
		return corral.Grant{}, corral.Errorf(corral.EINVALID, "level must be one of viewer, runner, editor")
	}
	if userID == a.Owner.ID {
		return corral.Grant{}, corral.Errorf(corral.ECONFLICT, "the owner already has full access")
	}
	u, err := s.store.UserByID(ctx, userID)
	if err != nil {
		return corral.Grant{}, err
	}
	now := s.cfg.Now().UTC()
	if err := s.store.PutGrant(ctx, id, userID, l, now, actor.ID); err != nil {
		return corral.Grant{}, err
	}
	return corral.Grant{AgentID: id, User: corral.User{ID: u.ID, Email: u.Email, Name: u.Name}, Level: l, CreatedAt: now}, nil
}

// GrantByEmail gives the account with email a level on the agent, or
// changes it: sharing by the address a person knows. ENOTFOUND "user" when
// no account has it (signup already tells whether an address is taken, so
// this reveals nothing new).
func (s *Agents) GrantByEmail(ctx context.Context, actor corral.User, id, email, level string) (corral.Grant, error) {
	if _, err := s.load(ctx, actor, id, access.Share); err != nil {
		return corral.Grant{}, err
	}
	email, err := sanitize.Email(email)
	if err != nil {
		return corral.Grant{}, err
	}
	u, err := s.store.UserByEmail(ctx, email)
	if err != nil {
		return corral.Grant{}, err
	}
	return s.PutGrant(ctx, actor, id, u.ID, level)
}

// DeleteGrant revokes a user's grant; it bites on their next request.
func (s *Agents) DeleteGrant(ctx context.Context, actor corral.User, id, userID string) error {
	if _, err := s.load(ctx, actor, id, access.Share); err != nil {
		return err
	}
	return s.store.DeleteGrant(ctx, id, userID, actor.ID)
}

// Links lists the agent's share links (never their tokens).
func (s *Agents) Links(ctx context.Context, actor corral.User, id string) ([]corral.Link, error) {
	if _, err := s.load(ctx, actor, id, access.Share); err != nil {
		return nil, err
	}
	return s.store.Links(ctx, id)
}

// CreateLink makes a share link. The token is returned once; only its hash
// is kept. Links give at most runner: editing is granted to people by name.
func (s *Agents) CreateLink(ctx context.Context, actor corral.User, id, level string) (corral.Link, string, error) {
	if _, err := s.load(ctx, actor, id, access.Share); err != nil {
		return corral.Link{}, "", err
	}
	l, err := corral.ParseLevel(level)
	if err != nil || l > corral.LevelRunner {
		return corral.Link{}, "", corral.Errorf(corral.EINVALID, "a link's level must be viewer or runner")
	}
	token, hash := auth.NewToken(prefixLink)
	link := corral.Link{ID: corral.NewID("lnk"), AgentID: id, Level: l, CreatedBy: actor.ID, CreatedAt: s.cfg.Now().UTC()}
	if err := s.store.CreateLink(ctx, link, hash); err != nil {
		return corral.Link{}, "", err
	}
	return link, token, nil
}

// DeleteLink deletes a share link and so ends the access of everyone who
// joined through it, on their next request.
func (s *Agents) DeleteLink(ctx context.Context, actor corral.User, id, linkID string) error {
	if _, err := s.load(ctx, actor, id, access.Share); err != nil {
		return err
	}
	return s.store.DeleteLink(ctx, id, linkID, actor.ID)
}

// AcceptLink gives the actor the link's level for as long as the link
// lives, and returns the agent as the actor now sees it.
func (s *Agents) AcceptLink(ctx context.Context, actor corral.User, token string) (corral.Agent, error) {
	if !auth.WellFormed(prefixLink, token) {
		return corral.Agent{}, corral.NotFound("link")
	}
	link, err := s.store.LinkByHash(ctx, auth.HashToken(token))
	if err != nil {
		return corral.Agent{}, err
	}
	if err := s.store.JoinLink(ctx, link.ID, actor.ID, s.cfg.Now().UTC()); err != nil {
		return corral.Agent{}, err
	}
	return s.load(ctx, actor, link.AgentID, access.ViewAgent)
}

// Accept records that the actor consents to the agent as a delegation
// target of their runs (access.Target), which a grant alone never makes
// it. It answers as a missing agent when the actor has no access to it;
// an owner's agent, or one whose link the actor joined, is accepted
// already, and accepting twice is fine.
func (s *Agents) Accept(ctx context.Context, actor corral.User, id string) error {
	a, err := s.load(ctx, actor, id, access.ViewAgent)
	if err != nil {
		return err
	}
	if a.Access == corral.LevelOwner {
		return nil
	}
	err = s.store.AcceptGrant(ctx, id, actor.ID)
	if corral.ErrorCode(err) == corral.ENOTFOUND && a.Accepted {
		return nil // a link joined, and no grant: joining was accepting
	}
	return err
}

// Messages returns a page of the agent's thread, oldest first.
func (s *Agents) Messages(ctx context.Context, actor corral.User, id, before string, limit int) ([]corral.Message, error) {
	if _, err := s.load(ctx, actor, id, access.ReadMessages); err != nil {
		return nil, err
	}
	return s.store.Messages(ctx, id, before, limit)
}

// agentMaker stores new agents.
type agentMaker interface {
	CreateAgent(ctx context.Context, a corral.Agent) error
	CreateAgentFrom(ctx context.Context, a corral.Agent, parentID string) error
}

// createAgent makes an agent owned by actor from in; byRun is the run
// whose create_agent asked for it ("" for a person), and parentID its
// agent, out of whose budget the new agent's is carved ("" for none).
func createAgent(ctx context.Context, store agentMaker, now func() time.Time, actor corral.User, in AgentInput, byRun, parentID string) (corral.Agent, error) {
	if in.Name == nil {
		return corral.Agent{}, corral.Errorf(corral.EINVALID, "name is required")
	}
	at := now().UTC()
	a := corral.Agent{
		ID:        corral.NewID("agt"),
		Owner:     corral.UserRef{ID: actor.ID, Name: actor.Name},
		Policy:    corral.Policy{FS: corral.DefaultFS, Changes: corral.DefaultChanges, Network: corral.NetworkNone},
		State:     corral.StateActive,
		CreatedAt: at,
		UpdatedAt: at,
		Access:    corral.LevelOwner,
		Accepted:  true, // an owner's agent is always a target of their runs
		// Who made it is recorded, so that a tree's creations are counted.
		CreatedByRun: byRun,
	}
	if err := apply(&a, in); err != nil {
		return corral.Agent{}, err
	}
	var err error
	if parentID != "" && a.Budget.Tokens > 0 {
		err = store.CreateAgentFrom(ctx, a, parentID)
	} else {
		err = store.CreateAgent(ctx, a)
	}
	if err != nil {
		return corral.Agent{}, err
	}
	return a, nil
}
