package app

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"corral"
	"corral/internal/sandbox"
	"corral/internal/workspace"
)

// DefaultProbeTTL is how long the answer of a costly readiness check (the
// provider's, the sandbox's) is kept: a load balancer that polls /readyz
// every second asks the provider at most once in that time.
const DefaultProbeTTL = 10 * time.Second

// checkTimeout bounds one readiness check: a provider slower than this
// to list its models is as good as unreachable to a load balancer.
const checkTimeout = 3 * time.Second

// errStarting is the server's check while it starts: it answers nothing
// but the nodes' relay (and its health) until it has reconciled what the
// last process left.
var errStarting = corral.Errorf(corral.EUNAVAIL, "the server is starting")

// check is one named readiness check.
type check struct {
	name string
	run  func(context.Context) error
}

// readyChecks are the role's checks, in the order /readyz answers them.
// In roles all and control they are asked only once the server is open:
// before, their parts may not be built yet (control serves its nodes'
// relays, and /readyz, while it builds them).
func (a *App) readyChecks() []check {
	if a.agent != nil { // role sandbox
		return []check{
			{"sandbox", a.sandboxProbe.run},
			{"relay", func(context.Context) error {
				if !a.agent.Connected() {
					return corral.Errorf(corral.EUNAVAIL, "not connected to control")
				}
				return nil
			}},
		}
	}
	sandboxCheck := a.sandboxProbe.run
	if a.Fleet != nil {
		sandboxCheck = a.readyNode
	}
	checks := []check{
		{"server", func(context.Context) error { return nil }}, // open: see readyState
		{"store", func(ctx context.Context) error { return a.Store.Ping(ctx) }},
		{"sandbox", sandboxCheck},
		{"provider", a.providerProbe.run},
	}
	if a.leaseLost != nil {
		// A store shared with other controls: this one serves while it
		// holds the control lease (lease.go).
		checks = append(checks, check{"lease", func(ctx context.Context) error {
			if !a.holdsLease.Load() {
				return corral.Errorf(corral.EUNAVAIL, "this control no longer holds the control lease")
			}
			return nil
		}})
	}
	return checks
}

// readiness is the answer of /readyz.
type readiness struct {
	Status string            `json:"status"` // ok or unavailable
	Checks map[string]string `json:"checks"` // each check's "ok", or why not
}

// readyState runs the checks: each one's "ok" or its reason, in words an
// operator can act on (a corral.Error's message: never an address or a
// key), and whether all passed.
func (a *App) readyState(ctx context.Context) (readiness, bool) {
	if a.agent == nil && !a.opened.Load() {
		return readiness{Status: "unavailable", Checks: map[string]string{"server": corral.ErrorMessage(errStarting)}}, false
	}
	out := readiness{Status: "ok", Checks: map[string]string{}}
	// Not the caller's context: a load balancer that gives up on a slow
	// probe must not have its giving up kept as the provider's answer.
	ctx = context.WithoutCancel(ctx)
	for _, c := range a.readyChecks() {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		err := c.run(cctx)
		cancel()
		if err == nil {
			out.Checks[c.name] = "ok"
			continue
		}
		out.Status = "unavailable"
		out.Checks[c.name] = corral.ErrorMessage(err)
	}
	return out, out.Status == "ok"
}

// healthz answers 200 while the process serves: liveness, nothing more.
func healthz(w http.ResponseWriter, r *http.Request) {
	writeHealth(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when runs can happen here, else 503, naming each
// check.
func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	state, ok := a.readyState(r.Context())
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	writeHealth(w, status, state)
}

func writeHealth(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readyNode is control's sandbox check: a node is connected and not
// draining.
func (a *App) readyNode(ctx context.Context) error {
	nodes, err := a.Store.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if a.Fleet.Status(n) == corral.NodeReady {
			return nil
		}
	}
	return corral.Errorf(corral.EUNAVAIL, "no sandbox node is connected and ready: start one with corral serve --role sandbox")
}

// sandboxReady is this machine's sandbox check: the sandbox and the disk
// limits work here.
func sandboxReady(context.Context) error {
	if err := sandbox.Available(); err != nil {
		return err
	}
	return workspace.DiskAvailable()
}

// cachedCheck keeps a check's answer for ttl, so that it is cheap to ask
// often. The first to ask after ttl runs the check; those who ask
// meanwhile wait for its answer.
type cachedCheck struct {
	check func(context.Context) error
	ttl   time.Duration

	mu  sync.Mutex
	at  time.Time // when err was had; zero: never asked
	err error
}

func newCachedCheck(check func(context.Context) error, ttl time.Duration) *cachedCheck {
	if ttl <= 0 {
		ttl = DefaultProbeTTL
	}
	return &cachedCheck{check: check, ttl: ttl}
}

func (c *cachedCheck) run(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.ttl {
		return c.err
	}
	c.err, c.at = c.check(ctx), time.Now()
	return c.err
}
