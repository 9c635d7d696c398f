// Package app is Corral's composition root: it builds a server from its
// Config, every part in dependency order for the role, serves it, and
// closes the parts in reverse order. cmd/corral only maps flags and the
// environment to a Config; the integration tests build through New too,
// so what they test is what runs.
//
// The parts are wired at construction, each handed what it uses: no part
// is completed by a setter after it is made, so a part that exists works.
// The order is the dependency graph's:
//
//	store → node (or fleet and router) → repositories → decisions →
//	stages, files → tracer → gateway → admission →
//	delegation, documents → runner → agents, runs → API
//
// Admission only admits; the runner starts what it admitted for a
// delegated hop, and runs start what it admitted for a message, so no
// part needs one built after it.
package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"corral"
	"corral/internal/api"
	"corral/internal/auth"
	"corral/internal/fleet"
	"corral/internal/gateway"
	"corral/internal/metrics"
	"corral/internal/netguard"
	"corral/internal/node"
	"corral/internal/nodeagent"
	"corral/internal/proxy"
	"corral/internal/retrieval"
	"corral/internal/role"
	"corral/internal/runner"
	"corral/internal/service"
	"corral/internal/store"
	"corral/internal/telemetry"
)

// App is a built server.
type App struct {
	Parts

	cfg  Config
	role role.Role
	opt  options

	// closers are run by Close, last first.
	closers []func()
	// ctx is background work's (sweeps, deletions): Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	// Serving (roles all and control).
	guard   *netguard.Listener // nil without an address
	srv     *http.Server
	served  chan error // the HTTP server's end, once serving
	opened  atomic.Bool
	handler http.Handler
	ready   func() error

	agent *nodeagent.Agent // role sandbox

	// leaseLost receives why this control stopped holding the control
	// lease of a shared store (lease.go): Run returns it.
	leaseLost  chan error
	holdsLease atomic.Bool
	// egressCA is the CA the egress proxy signs with (roles all and
	// control).
	egressCA *proxy.CA

	// The metrics address's listener (nil without one), and the
	// readiness checks whose answers are kept a while.
	metricsLn                   net.Listener
	sandboxProbe, providerProbe *cachedCheck

	// Reconciled and Reattached count what the start-up did with the runs
	// the last process left: ended as interrupted, or taken up again in
	// the sessions that outlived it; FailedClones the clones it left
	// cloning.
	Reconciled, Reattached, FailedClones int
}

// Parts are what an App is built of, for its commands and its tests to
// reach. A part the role does not have is nil.
type Parts struct {
	Store *store.DB
	// Node is this machine's workspaces and sessions (roles all and
	// sandbox); Fleet and Router reach the nodes' (role control).
	Node   *node.Local
	Fleet  *fleet.Fleet
	Router *fleet.Router
	Model  *gateway.Gateway
	Runner *runner.Runner
	// Tracer makes the runs' spans (see --otlp-endpoint): off without an
	// endpoint, and in role sandbox, which sends none.
	Tracer *telemetry.Tracer
	// The use cases.
	Accounts   *service.Accounts
	Agents     *service.Agents
	Admissions *service.Admissions
	Runs       *service.Runs
	// Change sets: the runs' stages, their review, the workspace's files
	// and its repository.
	Stages       *service.Stages
	Decisions    *service.Decisions
	Files        *service.Files
	Repositories *service.Repositories
	Delegation   *service.Delegation
	Documents    *service.Documents
	Credentials  *service.Credentials
	Egress       *service.Egress
	Proxy        *proxy.Proxy
	Models       *service.Models
	Nodes        *service.Nodes
	Enrollment   *service.Enrollment
	// Stores are the agents' document stores.
	Stores *retrieval.Stores
	API    *api.Server
	// Metrics are the server's Prometheus families (every role).
	Metrics *metrics.Metrics
}

// Option changes how New builds, for tests: what a production server
// never varies.
type Option func(*options)

type options struct {
	log    *slog.Logger
	now    func() time.Time
	params auth.Params
	// terminals, when set, stands between the runs' terminals and the
	// node (a recorder of what crosses).
	terminals func(corral.Sessions) service.Terminals
	// api is the API's own configuration beyond what Config sets.
	api api.Config
	// resolver resolves names for the egress proxy (nil: the system's).
	resolver *net.Resolver
	// probeTTL is how long a costly readiness check's answer is kept (0:
	// DefaultProbeTTL).
	probeTTL time.Duration
}

// WithLog logs to l (default: nowhere).
func WithLog(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock makes the use cases and the runner read the time from now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithPasswordParams hashes passwords with p (tests use cheap ones).
func WithPasswordParams(p auth.Params) Option { return func(o *options) { o.params = p } }

// WithTerminals puts wrap between the runs' terminals and the node.
func WithTerminals(wrap func(corral.Sessions) service.Terminals) Option {
	return func(o *options) { o.terminals = wrap }
}

// WithEgressResolver makes the egress proxy resolve names with r (tests
// name their upstreams on loopback).
func WithEgressResolver(r *net.Resolver) Option { return func(o *options) { o.resolver = r } }

// WithProbeTTL keeps the answers of the provider's and the sandbox's
// readiness checks for d (tests: short, to see them change).
func WithProbeTTL(d time.Duration) Option { return func(o *options) { o.probeTTL = d } }

// WithAPI sets the API's stream caps and write timeout (Config sets the
// rest).
func WithAPI(c api.Config) Option { return func(o *options) { o.api = c } }

// New builds the server c describes. Nothing is served until Run; role
// control alone starts serving its nodes' relays here, since reconciling
// the runs a stopped control left asks the nodes about their sessions.
// On an error, what was built is closed again.
func New(ctx context.Context, c Config, opts ...Option) (*App, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	o := options{log: slog.New(slog.DiscardHandler), params: auth.DefaultParams}
	for _, f := range opts {
		f(&o)
	}
	r, _ := role.Parse(c.Role) // Check parsed it
	bg, cancel := context.WithCancel(context.Background())
	a := &App{cfg: c, role: r, opt: o, ctx: bg, cancel: cancel}
	a.defer_(cancel)
	built := false
	defer func() {
		if !built {
			a.Close()
		}
	}()
	// One server per data directory: the lock comes before anything in it
	// is read, recovered or reconciled, and the address is bound before
	// that too, so a second server, or one whose address is taken, exits
	// having touched nothing.
	lock, err := lockDataDir(c.Data)
	if err != nil {
		return nil, err
	}
	a.defer_(lock.release)
	if err := a.listenMetrics(); err != nil {
		return nil, err
	}
	build := a.buildServer
	if role.DialsControl(r) {
		build = a.buildNode
	} else if err := a.listen(); err != nil {
		return nil, err
	}
	a.sandboxProbe = newCachedCheck(sandboxReady, o.probeTTL)
	if err := build(ctx); err != nil {
		return nil, err
	}
	a.serveMetrics()
	built = true
	return a, nil
}

// defer_ adds f to what Close runs, before everything added earlier.
func (a *App) defer_(f func()) { a.closers = append(a.closers, f) }

// goUntilClose runs f in a goroutine until Close, which cancels its
// context and waits for it to return.
func (a *App) goUntilClose(f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	a.defer_(func() {
		cancel()
		<-done
	})
}

// Close closes every part in the reverse of the order it was built.
// Runs' sessions go on (the next start re-attaches to them).
func (a *App) Close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// Handler is the server's HTTP handler: the API, the web app and, in role
// control, the nodes' relay. Until Run opens it, it answers 503 to all
// but the relay and /healthz and /readyz. Nil in role sandbox, which
// serves nothing (but its metrics address).
func (a *App) Handler() http.Handler { return a.handler }

// Open lets the handler answer everything: Run does it once the server
// is ready; a test that serves Handler itself calls it.
func (a *App) Open() { a.opened.Store(true) }

// Ready says whether runs can happen now: a model provider is
// configured, and the sandbox works here or a node is connected.
func (a *App) Ready() error { return a.ready() }

// errNoListener is Run's without an address to serve.
var errNoListener = errors.New("app: Run needs Config.Addr")

// mustListen returns the guarded listener or errNoListener.
func (a *App) mustListen() (net.Listener, error) {
	if a.guard == nil {
		return nil, errNoListener
	}
	return a.guard, nil
}
