package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"corral"
	"corral/internal/api"
	"corral/internal/auth"
	"corral/internal/driver"
	"corral/internal/fleet"
	"corral/internal/gateway"
	"corral/internal/modelapi"
	"corral/internal/proxy"
	"corral/internal/retrieval"
	"corral/internal/role"
	"corral/internal/runfeed"
	"corral/internal/runner"
	"corral/internal/sandbox"
	"corral/internal/secrets"
	"corral/internal/service"
	"corral/internal/store"
	"corral/internal/telemetry"
	"corral/internal/webui"
	"corral/internal/workspace"
)

// gatewaySocket is where, under the data directory, the gateway listens
// for agent CLIs (their sessions' supervisors join them to it).
const gatewaySocket = "gateway.sock"

// egressSocket is where, under the data directory, the egress proxy
// listens for the sessions' connections (role all), or the node carries
// them to control from (role sandbox).
const egressSocket = "egress.sock"

// dbPath is the database's file in a data directory.
func dbPath(data string) string { return filepath.Join(data, "corral.db") }

// DBPath is the database's file in the data directory data.
func DBPath(data string) string { return dbPath(data) }

// OpenStore opens the store a server keeps: the PostgreSQL database at
// url, or, when url is empty, the SQLite file in the data directory;
// either is created or migrated to this release's schema.
func OpenStore(ctx context.Context, data, url string) (*store.DB, error) {
	if url != "" {
		return store.OpenPostgres(ctx, url)
	}
	return store.Open(ctx, dbPath(data))
}

// OpenExistingStore opens a store a server has already made, for the
// commands that read or change one: it creates and migrates nothing.
func OpenExistingStore(ctx context.Context, data, url string) (*store.DB, error) {
	if url != "" {
		return store.OpenPostgresExisting(ctx, url)
	}
	return store.OpenExisting(ctx, dbPath(data))
}

// buildServer builds roles all and control, in dependency order.
func (a *App) buildServer(ctx context.Context) error {
	c, r, log := a.cfg, a.role, a.opt.log
	if role.HoldsWorktree(r) {
		if err := prepareDataDir(c.Data, log); err != nil {
			return err
		}
	}
	db, err := OpenStore(ctx, c.Data, c.Database)
	if err != nil {
		return err
	}
	a.Store = db
	a.defer_(func() { db.Close() })
	key, err := loadSecretKey(c, log)
	if err != nil {
		return err
	}
	cfg := service.Config{Signup: c.Signup, PendingDisk: c.PendingDisk, Now: a.opt.now, Log: log}
	if c.Database != "" {
		// Controls sharing the store share the login throttles' records:
		// each sees the locks the others set, and a takeover forgets none.
		// On SQLite, one server's, they stay in its memory.
		cfg.ThrottleState = func(name string) auth.ThrottleState { return db.ThrottleState(name, key.Digest) }
		if a.opt.now == nil {
			// Their locks are reckoned by the database's clock, which
			// every control reads alike (each lease renewal sets it).
			cfg.ThrottleClock = db.Now
		}
	}
	// Before anything is reconciled, settled or swept: of the controls
	// sharing a PostgreSQL store, the one holding the lease serves; one
	// whose key is not theirs says so now, not once it takes over.
	var reads func(rest http.Handler) http.Handler // a shared store's: what a control not serving yet answers
	var relay runner.Relay                         // a shared store's: runs' events for the other controls
	if c.Database != "" {
		if role.HoldsWorktree(r) {
			log.Warn("role all on a shared store: this control's workspaces and runs' sessions are in its data directory, " +
				"and a control that takes over elsewhere will not have them; for failover run --role control with sandbox nodes")
		}
		if len(c.TrustedProxies) == 0 {
			log.Warn("no --trusted-proxy: requests the other controls forward to this one will count as their address, not the client's " +
				"(login throttling, connection caps); list the other controls and the load balancer in --trusted-proxy")
		}
		if err := checkSharedKey(ctx, db, key); err != nil {
			return err
		}
		// Runs' live events travel between the controls as
		// notifications: this one publishes its runs' once it serves,
		// and its feed hands the serving one's to the event streams it
		// answers standing by.
		pub := runfeed.NewPublisher(db, log)
		relay = pub
		a.goUntilClose(pub.Run)
		feed := runfeed.NewFeed(db, log)
		a.goUntilClose(feed.Run)
		// Standing by, it answers the store reads itself (they need
		// nothing a serving control has) and forwards the rest; and
		// while it starts to serve, it goes on answering them.
		if reads, err = a.storeReads(db, key, cfg, feed); err != nil {
			return err
		}
		if err := a.holdControl(ctx, db, reads); err != nil {
			return err
		}
	}
	a.Metrics = a.newMetrics()
	if role.HoldsWorktree(r) {
		// Runs arrive with the runs capability; say now whether they could.
		if err := sandbox.Available(); err != nil {
			log.Warn("agent runs will be refused: "+describe(err), "role", r)
		} else {
			log.Info("sandbox ready", "role", r)
		}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	a.handler = gated(mux, &a.opened, reads)
	a.srv = newHTTPServer(a.handler, log, defaultTimeouts)
	a.Accounts, err = service.NewAccounts(db, a.opt.params, cfg)
	if err != nil {
		return err
	}
	a.Credentials = service.NewCredentials(db, key, cfg)
	a.Egress = service.NewEgress(db, key, cfg)

	// The machine that holds the workspaces, staged trees and sessions:
	// this one (role all), or the sandbox nodes (control).
	var (
		trees    corral.Trees
		sessions corral.Sessions
	)
	if role.ReachesNodes(r) {
		a.Enrollment = service.NewEnrollment(db, service.NodesConfig{})
		a.Fleet = fleet.New(a.Enrollment, fleet.Config{Log: log})
		a.defer_(a.Fleet.Close)
		a.Router = fleet.NewRouter(a.Fleet, db, 0) // a node away for less than fleet.DefaultGrace (2 min) kills no run
		a.Nodes = service.NewNodes(service.NodesDeps{Store: db, Live: a.live, Checks: db, Move: a.Router.Move})
		trees, sessions = a.Router, a.Router
		mux.Handle(fleet.RelayPath, a.Fleet.Handler())
		mux.Handle(fleet.JoinPath, a.Fleet.Handler())
		// Control serves its nodes' relays while it starts: everything
		// else answers 503 until Run opens the gate.
		if a.guard != nil {
			a.serve()
		}
	} else {
		// What an earlier process left half done of an import or a clone
		// goes.
		local, err := newLocalNode(c, log)
		if err != nil {
			return err
		}
		a.Node = local
		a.defer_(local.Close) // after the runs' loops: the sessions go on
		// Before anything touches a workspace: finish or roll back every
		// apply a crash interrupted. (A sandbox node does its own, before
		// it connects.)
		if err := local.Recover(ctx); err != nil {
			return err
		}
		trees, sessions = local, local
	}

	// Change sets: a repository's commits, the review, the runs' stages,
	// the workspace's files.
	a.Repositories = service.NewRepositories(db, trees, &service.RepositoryConfig{Store: db, Secrets: a.Credentials, Trace: db}, cfg)
	a.defer_(a.Repositories.Close) // stops running clones before the database closes
	if a.FailedClones, err = a.Repositories.Reconcile(ctx); err != nil {
		return err
	} else if n := a.FailedClones; n > 0 {
		log.Warn("clones interrupted by the last stop were failed", "repositories", n)
	}
	a.Decisions = service.NewDecisions(db, trees, a.Repositories, cfg)
	a.Stages = service.NewStages(db, trees, a.Decisions, c.ChangeTTL, cfg)
	a.Files = service.NewFiles(db, trees, a.Repositories)

	// The runs' spans, made by the gateway and the runner: the tracer is
	// closed after them, and flushes what they ended.
	if a.Tracer, err = telemetry.New(ctx, telemetry.Config{Endpoint: c.OTLPEndpoint, Version: Version()}); err != nil {
		return err
	}
	a.defer_(func() { closeTracer(a.Tracer, log) })
	if a.Tracer.On() {
		log.Info("runs are traced", "otlp_endpoint", c.OTLPEndpoint)
	}
	model := c.Model
	model.Tracer = a.Tracer
	model.Observer = a.Metrics
	if a.Model, err = gateway.New(model); err != nil {
		return err
	}
	a.providerProbe = newCachedCheck(a.Model.Probe, a.opt.probeTTL)
	if err := a.Model.Configured(); err != nil {
		log.Warn("messages will be refused until a model provider is configured: " + describe(err))
	} else {
		log.Info("model provider configured", "base_url", c.Model.BaseURL, "model", c.Model.Model)
	}
	a.Models = service.NewModels(a.Model, log)
	a.ready = a.readiness
	a.Admissions = service.NewAdmissions(db, a.ready, cfg)
	a.Delegation = service.NewDelegation(db, a.Admissions, c.Delegation, cfg)
	// Documents: each agent's private store and the library, files of
	// their own apart from the database.
	if a.Stores, err = retrieval.OpenStores(ctx, filepath.Join(c.Data, "documents")); err != nil {
		return err
	}
	a.defer_(func() { a.Stores.Close() })
	docCfg := service.DocumentsConfig{MaxBytes: c.DocumentMaxBytes, EmbeddingModel: c.EmbedModel, Threshold: c.RetrievalThreshold, Log: log}
	if c.Database != "" {
		// Controls sharing the store keep every document's passages
		// there too, and this one, serving now, makes its indexes hold
		// exactly those before it takes a request.
		docCfg.Copies = db
	}
	a.Documents = service.NewDocuments(db, a.Stores, a.Model, docCfg)
	if docCfg.Copies != nil {
		r, err := a.Documents.Sync(ctx)
		if err != nil {
			return fmt.Errorf("making the document indexes match the store: %w", err)
		}
		log.Info("document indexes match the store", "copied", r.Copied, "indexed", r.Indexed, "removed", r.Removed)
	}

	// The egress proxy's CA: the sandboxes trust it for the hosts the
	// proxy terminates (those with a secret, or a rule on methods or
	// paths).
	ca, err := proxy.LoadCA(c.Data)
	if err != nil {
		return err
	}
	if c.Database != "" {
		if ca, err = sharedCA(ctx, db, key, ca); err != nil {
			return err
		}
	}
	a.egressCA = ca
	a.Runner = runner.New(runner.Deps{Store: db, Model: a.Model, Workspaces: a.Stages, Node: sessions,
		Delegator: a.Delegation, Retriever: a.Documents, Tracer: a.Tracer, Relay: relay},
		runner.Config{QuarantineAfter: c.QuarantineAfter, QuarantineWindow: c.QuarantineWindow, Now: a.opt.now, Log: log,
			EgressCA: ca.CertPEM(), Ended: a.egressEnded, Finished: a.Metrics.RunEnded})
	a.defer_(a.Runner.Close)
	if err := a.serveEgress(ca, log); err != nil {
		return err
	}
	// The gateway agent CLIs reach from their sessions, before any run is
	// re-attached: a CLI that outlived the last server calls again. In
	// role control they arrive over the nodes' relays.
	var gwLn net.Listener
	if a.Fleet != nil {
		gwLn = a.Fleet.Gateway()
	} else if gwLn, err = modelapi.Listen(filepath.Join(c.Data, gatewaySocket)); err != nil {
		return err
	}
	gw := modelapi.Serve(gwLn, a.Metrics.HTTP(modelapi.Handler(a.Runner, a.Model, a.Metrics, log)))
	a.defer_(func() { gw.Close() })
	if role.HoldsWorktree(r) {
		for _, d := range corral.AgentDrivers[1:] {
			if err := driver.Installed(c.ToolsDir, d); err != nil {
				log.Warn("agents with this driver will not run: "+describe(err), "driver", d)
			}
		}
	}

	var terminals service.Terminals = sessions
	if a.opt.terminals != nil {
		terminals = a.opt.terminals(sessions)
	}
	a.Runs = service.NewRuns(service.RunsDeps{Store: db, Admission: a.Admissions, Engine: a.Runner, Terminals: terminals}, cfg)
	a.Agents = service.NewAgents(service.AgentsDeps{Store: db, Resume: a.Runner.Resume, Dropped: []func(string) error{
		a.Documents.DropAgent,
		// And what its node holds: workspace, staged trees, journal.
		func(id string) error {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), time.Minute)
			defer cancel()
			return trees.DropAgent(dctx, id)
		},
	}}, cfg)
	// Then settle the runs a stopped server left behind.
	n, back, err := a.Runner.Reconcile(ctx)
	if err != nil {
		return err
	}
	a.Reconciled, a.Reattached = n, back
	if back > 0 {
		log.Info("runs whose sessions outlived the last stop were re-attached", "runs", back)
	}
	if n > 0 {
		log.Warn("runs interrupted by the last stop were reconciled", "runs", n)
	}

	a.API = api.New(a.apiConfig(), api.Services{Accounts: a.Accounts, Agents: a.Agents, Decisions: a.Decisions, Files: a.Files, Repositories: a.Repositories, Runs: a.Runs,
		Credentials: a.Credentials, Egress: a.Egress, Documents: a.Documents, Models: a.Models, Nodes: a.Nodes,
		Operations: service.NewOperations(db, cfg)})
	mux.Handle("/api/", a.Metrics.HTTP(a.API))
	mux.Handle("GET /metrics", a.API.AdminOnly(a.Metrics.Handler()))
	mux.Handle("/v1/", api.NotFound())
	mux.Handle("/", webui.Handler())
	if !webui.Built() {
		log.Info("this binary has no web app (built without -tags ui): make run builds it")
	}
	return nil
}

// apiConfig is the API's settings.
func (a *App) apiConfig() api.Config {
	c := a.opt.api
	c.SecureCookies, c.Log, c.Done, c.TrustedProxies = a.cfg.SecureCookies, a.opt.log, a.ctx.Done(), a.cfg.TrustedProxies
	// Streams hold connections: at most half of them, so ordinary
	// requests always find room.
	if a.guard != nil && c.MaxStreams == 0 {
		c.MaxStreams = max(1, a.guard.MaxConns()/2)
	}
	return c
}

// storeReads is what a control standing by answers itself
// (api.Server.StoreReads): an API on services built on the store alone,
// with the same settings as the serving control's, so each read is
// answered as that control would.
func (a *App) storeReads(db *store.DB, key *secrets.Key, cfg service.Config, feed service.Feed) (func(rest http.Handler) http.Handler, error) {
	accounts, err := service.NewAccounts(db, a.opt.params, cfg)
	if err != nil {
		return nil, err
	}
	srv := api.New(a.apiConfig(), api.Services{
		Accounts:    accounts,
		Agents:      service.NewAgents(service.AgentsDeps{Store: db}, cfg),
		Runs:        service.NewRuns(service.RunsDeps{Store: db, Feed: feed}, cfg), // watched through feed
		Decisions:   service.NewDecisions(db, nil, nil, cfg),                       // lists only: a set's diffs are its node's
		Credentials: service.NewCredentials(db, key, cfg),
		Egress:      service.NewEgress(db, key, cfg),
		Operations:  service.NewOperations(db, cfg),
	})
	return srv.StoreReads, nil
}

// closeTracer sends the spans still waiting, giving a collector that does
// not answer ten seconds.
func closeTracer(t *telemetry.Tracer, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := t.Close(ctx); err != nil {
		log.Warn("spans not sent to the collector", "err", err)
	}
}

// live is how an enrolled node is now, as this control sees it.
func (a *App) live(ctx context.Context, rec corral.NodeRecord) service.NodeLive {
	refused := a.Fleet.Refused(rec.ID)
	live := service.NodeLive{Status: a.Fleet.Status(rec), Refused: refused.Count, LastRefused: refused.Last}
	if live.Status == corral.NodeLost {
		return live
	}
	load, err := a.Router.Load(ctx, rec.ID)
	if err != nil { // the node's own count is not to be had: this control's
		load = corral.NodeLoad{Sessions: a.Router.Sessions(rec.ID)}
	}
	live.Load = load
	return live
}

// readiness says whether runs can happen now.
func (a *App) readiness() error {
	if err := a.Model.Configured(); err != nil {
		return err
	}
	if a.Fleet != nil {
		if len(a.Fleet.Connected()) == 0 {
			return corral.Errorf(corral.EUNAVAIL, "no sandbox node is connected: start one with corral serve --role sandbox --control URL --join TOKEN")
		}
		return nil
	}
	if err := sandbox.Available(); err != nil {
		return err
	}
	return workspace.DiskAvailable()
}
