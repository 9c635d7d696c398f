package runner

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"corral"
	"corral/internal/telemetry"
	"corral/internal/trace"
)

// tokenPrefix marks a run's gateway token, so that one found where it
// should not be is recognisable.
const tokenPrefix = "crt_"

// newToken makes a run's gateway token and the hash the store keeps.
func newToken() (token string, hash []byte) {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, tokenHash(token)
}

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Grant is what one model call of an agent CLI may do: it belongs to one
// running run of this runner, and through it to one agent. It is made
// afresh for every call (Authorize), so a run that ended, paused or was
// killed has no grant for its next call.
type Grant struct {
	runID, agentID string
	model          string // the agent's model: what the call is sent as
	r              *Runner
	a              *active
	hold           *hold  // the call's reservation on the agent's budget, once Reserve made it
	release        func() // the call's reservation under the tree's cap, once Reserve made it
	chat           *telemetry.Chat
}

// Run is the run the call belongs to.
func (g *Grant) Run() string { return g.runID }

// Model is the model the call is made with: the agent's.
func (g *Grant) Model() string { return g.model }

// Authorize finds the run whose CLI holds token: it must be running, in
// this runner, now. EUNAUTH for anything else, the same for a
// token that never was and one whose run ended. The grant is a *Grant,
// returned as a corral.CLIGrant so that a *Runner is the model API's Runs
// as it is: neither package imports the other.
func (r *Runner) Authorize(ctx context.Context, token string) (corral.CLIGrant, error) {
	refused := corral.Errorf(corral.EUNAUTH, "the token is not a running run's")
	if !strings.HasPrefix(token, tokenPrefix) {
		return nil, refused
	}
	run, err := r.store.RunByToken(ctx, tokenHash(token))
	if err != nil {
		if corral.ErrorCode(err) == corral.ENOTFOUND {
			return nil, refused
		}
		return nil, err
	}
	a := r.lookup(run.ID)
	if a == nil || a.ctx.Err() != nil {
		return nil, refused
	}
	if stopping, killed := a.state(); stopping || killed {
		return nil, refused
	}
	if !r.mayGoOn(a) {
		// The person who started it lost access: the run ends.
		r.stopActive(a)
		return nil, refused
	}
	agent, err := r.store.Agent(ctx, run.AgentID, "")
	if err != nil {
		return nil, err
	}
	return &Grant{runID: run.ID, agentID: agent.ID, model: r.model.ModelName(agent.Model), r: r, a: a}, nil
}

// Reserve holds the call's ceiling (corral.Ceiling) on the agent's
// budget, and refuses it when the budget cannot hold it (or the agent is
// paused): the run then pauses when its CLI has ended, as a built-in run
// pauses at its budget. It then reserves the call under the tree's token
// cap, and refuses it when the tree's tokens are spent: the run then ends
// when its CLI has. Record settles both.
func (g *Grant) Reserve(ctx context.Context, ceiling int64) (err error) {
	g.chatStarted()
	defer func() {
		if err != nil {
			g.chatEnded(err, corral.Tokens{}, false, corral.CLICall{})
		}
	}()
	h, err := g.r.reserve(ctx, g.agentID, g.runID, g.model, ceiling)
	if refused := (budgetRefused{}); errors.As(err, &refused) {
		g.a.mu.Lock()
		g.a.budgetNeed = max(g.a.budgetNeed, refused.need)
		g.a.mu.Unlock()
	}
	if err != nil {
		return err
	}
	release, err := g.r.reserveTree(ctx, g.a.run, int(ceiling))
	var spent errTreeSpent
	if errors.As(err, &spent) {
		h.settle(ctx, corral.Tokens{}, true, nil)
		g.a.mu.Lock()
		g.a.treeSpent = spent.Error()
		g.a.mu.Unlock()
		return corral.Errorf(corral.EADMISSION, "%s: the run ends", spent.Error())
	}
	if err != nil {
		h.settle(ctx, corral.Tokens{}, true, nil)
		return err
	}
	g.hold, g.release = h, release
	return nil
}

// Record settles the call's reservation with its usage as the provider
// reported it (reported false: it reported none, or an answer came with
// none), metered at the call's ceiling when that usage is missing or
// impossible, and traces the call.
func (g *Grant) Record(ctx context.Context, u corral.Tokens, reported bool, c corral.CLICall) error {
	ctx = context.WithoutCancel(ctx)
	g.chatEnded(nil, u, reported, c)
	if g.release != nil {
		// After the usage is stored, so the next call of the tree sees it.
		defer g.release()
	}
	if len(c.Dropped) > 0 {
		g.r.record(ctx, g.runID, trace.GatewayNote, map[string]any{"protocol": c.Protocol, "dropped": c.Dropped})
	}
	if g.hold == nil {
		return corral.Errorf(corral.EINVALID, "a call settled without a reservation")
	}
	data := map[string]any{"protocol": c.Protocol, "model": c.Model, "status": c.Status}
	if c.Estimated {
		data["estimated"] = true
	}
	if c.Aborted {
		data["aborted"] = true
	}
	if c.Error != "" {
		data["error"] = c.Error
	}
	_, err := g.hold.settle(ctx, u, reported, data)
	g.hold = nil
	return err
}

// Tools are the tools the run's CLI is offered through the gateway's MCP
// server: search_documents when the server has documents, and the
// delegation tools when it offers delegation.
func (g *Grant) Tools() []corral.ModelTool {
	var out []corral.ModelTool
	if g.r.docs != nil {
		out = append(out, SearchTool)
	}
	if g.r.deleg != nil {
		out = append(out, DelegationTools...)
	}
	return out
}

// CallTool runs one tool call of the run's CLI, search_documents or a
// delegation tool (arguments as JSON), and returns its result as the model
// reads it, and whether it is an error. The call acts, like the built-in
// loop's, as the person who started the run's tree. A delegate call waits
// for its child run, also while that child is paused (a CLI cannot
// pause); when ctx ends (the CLI gave up on the call) the child is
// stopped and awaited.
func (g *Grant) CallTool(ctx context.Context, name, arguments string) (string, bool) {
	search := name == toolSearchDocuments && g.r.docs != nil
	if !search && (!isDelegation(name) || g.r.deleg == nil) {
		return "error: there is no tool " + strconv.Quote(name), true
	}
	b := make([]byte, 8)
	rand.Read(b)
	key := "mcp-" + hex.EncodeToString(b)
	call := corral.ToolCall{ID: key, Name: name, Arguments: arguments}
	g.r.traceCall(g.a, key, call)
	if search {
		res := g.r.searchTool(g.a, call)
		g.r.traceResult(g.a, key, call, res)
		return res.forModel(name), res.Error != ""
	}
	d := g.r.delegation(g.a, key, call, ctx, false)
	if d.shutdown {
		return "error: the server is stopping; ask again", true
	}
	res := d.res
	g.r.traceResult(g.a, key, call, res)
	return res.forModel(name), res.Error != ""
}
