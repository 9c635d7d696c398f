package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"corral"

	"corral/internal/api"
	"corral/internal/archive"
	"corral/internal/auth"
	"corral/internal/driver"
	"corral/internal/egress"
	"corral/internal/fleet"
	"corral/internal/gateway"
	"corral/internal/gitrepo"
	"corral/internal/modelapi"
	"corral/internal/netguard"
	"corral/internal/retrieval"
	"corral/internal/role"
	"corral/internal/runner"
	"corral/internal/sandbox"
	"corral/internal/sanitize"
	"corral/internal/service"
	"corral/internal/store/sqlite"
	"corral/internal/webui"
	"corral/internal/workspace"
)

// serveConfig is everything serve reads from flags and the environment.
type serveConfig struct {
	Addr, Data, Role, Signup string
	SecureCookies            bool
	ChangeTTL                time.Duration
	// The model provider: CORRAL_MODEL_BASE_URL, CORRAL_MODEL_API_KEY and
	// CORRAL_MODEL, from the environment only, so the key never shows in
	// a process listing.
	Model gateway.Config
	// SecretKey is CORRAL_SECRET_KEY (environment only, never logged):
	// the base64 of the key that seals credentials; empty uses
	// DATA/secret.key.
	SecretKey string
	// QuarantineAfter violations within QuarantineWindow quarantine an
	// agent.
	QuarantineAfter  int
	QuarantineWindow time.Duration
	// SessionGrace is how long a run's session outlives a server that
	// went away without coming back.
	SessionGrace time.Duration
	// ToolsDir holds the agent CLIs (make tools), mounted read-only into
	// the sessions of runs that use one.
	ToolsDir string
	// MaxSessions is the most runs' sessions this machine runs at once
	// (roles all and sandbox); 0: no bound.
	MaxSessions int
	// MaxConns caps open connections in all: 0 takes
	// netguard.DefaultMaxConns, or what the descriptor limit allows after
	// its reserve when that is less; more than the limit allows is lowered.
	// MaxConnsPerAddr caps those of one client address; 0 is no such cap.
	MaxConns, MaxConnsPerAddr int
	// TrustedProxies are reverse proxies: their X-Forwarded-For names the
	// client, and they are exempt from the per-address cap.
	TrustedProxies []netip.Prefix
	// GitCAFile, when set, is the only CA git trusts for https (a
	// self-hosted git server with a private CA); CloneMaxBytes bounds a
	// clone on disk (0: gitrepo's default).
	GitCAFile     string
	CloneMaxBytes int64
	// EgressAllowPrivate are the private, loopback or link-local ranges a
	// clone or push may reach all the same (--egress-allow-private): by
	// default only public addresses are.
	EgressAllowPrivate []netip.Prefix
	// Imports bounds an archive import (zero fields: archive's defaults).
	Imports archive.Limits
	// Delegation caps trees of delegated runs (zero fields: defaults).
	Delegation corral.TreeCaps
	// PendingDisk bounds what pending change sets hold on disk, of all
	// one person's agents and of every agent.
	PendingDisk service.PendingDiskBounds
	// DocumentMaxBytes bounds one document; EmbedModel is the provider's
	// embedding model ("" ranks documents by BM25 alone).
	DocumentMaxBytes   int64
	EmbedModel         string
	RetrievalThreshold float64
	// A sandbox node's: control's URL, the one-time join token of its
	// first start (CORRAL_JOIN: environment only, like every secret), and
	// its name as admins see it.
	Control, Join, NodeName string
}

func parseServe(args []string, stderr io.Writer, getenv func(string) string) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", envOr(getenv, "CORRAL_ADDR", "127.0.0.1:8080"), "listen address")
	fs.StringVar(&c.Data, "data", envOr(getenv, "CORRAL_DATA", "./data"), "data directory")
	fs.StringVar(&c.Role, "role", envOr(getenv, "CORRAL_ROLE", string(role.All)), "all, control or sandbox")
	fs.StringVar(&c.Signup, "signup", envOr(getenv, "CORRAL_SIGNUP", service.SignupOpen), "open, invite or closed")
	fs.BoolVar(&c.SecureCookies, "secure-cookies", getenv("CORRAL_SECURE_COOKIES") == "true", "mark cookies Secure (behind a TLS proxy)")
	ttl, err := time.ParseDuration(envOr(getenv, "CORRAL_CHANGE_TTL", "168h"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_CHANGE_TTL: %v", errUsage, err)
	}
	fs.DurationVar(&c.ChangeTTL, "change-ttl", ttl, "how long a change set waits for a decision before it expires")
	after, err := strconv.Atoi(envOr(getenv, "CORRAL_QUARANTINE_AFTER", "3"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_QUARANTINE_AFTER: %v", errUsage, err)
	}
	fs.IntVar(&c.QuarantineAfter, "quarantine-after", after, "limit violations within the window that quarantine an agent")
	window, err := time.ParseDuration(envOr(getenv, "CORRAL_QUARANTINE_WINDOW", "1h"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_QUARANTINE_WINDOW: %v", errUsage, err)
	}
	fs.DurationVar(&c.QuarantineWindow, "quarantine-window", window, "the window in which violations count towards quarantine")
	grace, err := time.ParseDuration(envOr(getenv, "CORRAL_SESSION_GRACE", "10m"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_SESSION_GRACE: %v", errUsage, err)
	}
	fs.DurationVar(&c.SessionGrace, "session-grace", grace, "how long runs' sandboxes outlive a server that does not come back")
	fs.StringVar(&c.ToolsDir, "tools-dir", envOr(getenv, "CORRAL_TOOLS_DIR", "build/tools"), "the agent CLIs' directory (make tools fills it)")
	maxSessions, err := strconv.Atoi(envOr(getenv, "CORRAL_MAX_SESSIONS", "0"))
	if err != nil || maxSessions < 0 {
		return c, fmt.Errorf("%w: CORRAL_MAX_SESSIONS must be a whole number of sessions, 0 for no bound", errUsage)
	}
	fs.IntVar(&c.MaxSessions, "max-sessions", maxSessions, "most runs' sandboxes this machine runs at once (roles all and sandbox); 0: no bound")
	maxConns, err := strconv.Atoi(envOr(getenv, "CORRAL_MAX_CONNS", "0"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_MAX_CONNS: %v", errUsage, err)
	}
	fs.IntVar(&c.MaxConns, "max-conns", maxConns, "most connections open at once; 0: "+strconv.Itoa(netguard.DefaultMaxConns)+" or what the descriptor limit allows")
	perAddr, err := strconv.Atoi(envOr(getenv, "CORRAL_MAX_CONNS_PER_ADDR", strconv.Itoa(netguard.DefaultMaxConnsPerAddr)))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_MAX_CONNS_PER_ADDR: %v", errUsage, err)
	}
	fs.IntVar(&c.MaxConnsPerAddr, "max-conns-per-addr", perAddr, "most connections open at once from one client address (IPv6: one /64); 0: no such cap")
	proxies := &prefixList{}
	if v := getenv("CORRAL_TRUSTED_PROXY"); v != "" {
		if err := proxies.Set(v); err != nil {
			return c, fmt.Errorf("%w: CORRAL_TRUSTED_PROXY: %v", errUsage, err)
		}
		proxies.fromEnv = true
	}
	fs.Var(proxies, "trusted-proxy", "a reverse proxy's address or CIDR whose X-Forwarded-For is believed (repeatable, or comma-separated)")
	threshold, err := strconv.ParseFloat(envOr(getenv, "CORRAL_RETRIEVAL_THRESHOLD", "0"), 64)
	if err != nil || threshold < 0 || threshold > 1 {
		return c, fmt.Errorf("%w: CORRAL_RETRIEVAL_THRESHOLD: want a number from 0 to 1", errUsage)
	}
	fs.Float64Var(&c.RetrievalThreshold, "retrieval-threshold", threshold, "the confidence below which a document search tells an agent nothing relevant was found (0: the calibrated default, 0.5; 0.85 refuses nine in ten near misses)")
	fs.StringVar(&c.Control, "control", getenv("CORRAL_CONTROL"), "role sandbox: control's URL, such as https://corral.example.org")
	fs.StringVar(&c.Join, "join", getenv("CORRAL_JOIN"), "role sandbox: the one-time join token of the node's first start (from corral node token on control)")
	fs.StringVar(&c.NodeName, "node-name", getenv("CORRAL_NODE_NAME"), "role sandbox: the node's name as admins see it (default: the host name)")
	fs.StringVar(&c.EmbedModel, "embed-model", getenv("CORRAL_EMBED_MODEL"), "the provider's embedding model for document retrieval (empty: BM25 alone)")
	fs.StringVar(&c.GitCAFile, "git-ca-file", getenv("CORRAL_GIT_CA_FILE"), "PEM file of the CA git trusts for https, in place of the system's (a git server with a private CA)")
	allowPrivate := fs.String("egress-allow-private", getenv("CORRAL_EGRESS_ALLOW_PRIVATE"),
		"comma-separated CIDR ranges of private, loopback or link-local addresses a clone or push may reach (an internal git server); by default only public addresses")
	sizes := []struct {
		dst       *int64
		flag, env string
		def       int64
		usage     string
	}{
		{&c.CloneMaxBytes, "clone-max-bytes", "CORRAL_CLONE_MAX_BYTES", gitrepo.DefaultMaxBytes, "largest clone on disk, in bytes"},
		{&c.Imports.MaxArchive, "import-max-archive", "CORRAL_IMPORT_MAX_ARCHIVE", archive.DefaultMaxArchive, "largest archive an import takes, in bytes as uploaded"},
		{&c.Imports.MaxBytes, "import-max-bytes", "CORRAL_IMPORT_MAX_BYTES", archive.DefaultMaxBytes, "most bytes an import writes, uncompressed"},
		{&c.Imports.MaxFiles, "import-max-files", "CORRAL_IMPORT_MAX_FILES", archive.DefaultMaxFiles, "most files one import writes"},
		{&c.Imports.MaxDirs, "import-max-dirs", "CORRAL_IMPORT_MAX_DIRS", archive.DefaultMaxDirs, "most directories one import holds"},
		{&c.Imports.MaxFileSize, "import-max-file-size", "CORRAL_IMPORT_MAX_FILE_SIZE", archive.DefaultMaxFileSize, "largest file an import writes, in bytes"},
		{&c.DocumentMaxBytes, "document-max-bytes", "CORRAL_DOCUMENT_MAX_BYTES", 4 << 20, "largest document retrieval indexes, in bytes"},
		{&c.PendingDisk.PerUser, "pending-disk-per-user", "CORRAL_PENDING_DISK_PER_USER", service.DefaultPendingDiskPerUser, "most bytes the change sets waiting for review of all one person's agents may hold on disk before their messages are refused"},
		{&c.PendingDisk.Total, "pending-disk-total", "CORRAL_PENDING_DISK_TOTAL", service.DefaultPendingDiskTotal, "most bytes the change sets waiting for review of every agent may hold on disk before messages are refused"},
	}
	caps := []struct {
		dst       *int
		flag, env string
		def       int
		usage     string
	}{
		{&c.Delegation.Depth, "delegation-depth", "CORRAL_DELEGATION_DEPTH", 3, "how deep a tree of delegated runs may go"},
		{&c.Delegation.Fanout, "delegation-fanout", "CORRAL_DELEGATION_FANOUT", 4, "how many runs one run may delegate to"},
		{&c.Delegation.Concurrency, "delegation-concurrency", "CORRAL_DELEGATION_CONCURRENCY", 4, "how many delegated runs of one tree may be active at once"},
		{&c.Delegation.Create, "delegation-create", "CORRAL_DELEGATION_CREATE", 3, "how many agents one tree's runs may create"},
	}
	for _, cp := range caps {
		def := cp.def
		if v := getenv(cp.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return c, fmt.Errorf("%w: %s=%q: want a number, 0 or more", errUsage, cp.env, v)
			}
			def = n
		}
		fs.IntVar(cp.dst, cp.flag, def, cp.usage+" (0: none)")
	}
	treeTokens := int64(0)
	if v := getenv("CORRAL_DELEGATION_TOKENS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return c, fmt.Errorf("%w: CORRAL_DELEGATION_TOKENS=%q: want a number, 0 or more", errUsage, v)
		}
		treeTokens = n
	}
	fs.Int64Var(&c.Delegation.Tokens, "delegation-tokens", treeTokens, "tokens one tree of delegated runs may use in all (0: only the agents' own budgets)")
	for _, sz := range sizes {
		def := sz.def
		if v := getenv(sz.env); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return c, fmt.Errorf("%w: %s=%q: want a positive number", errUsage, sz.env, v)
			}
			def = n
		}
		fs.Int64Var(sz.dst, sz.flag, def, sz.usage)
	}
	c.Model = gateway.Config{
		BaseURL: getenv("CORRAL_MODEL_BASE_URL"),
		APIKey:  getenv("CORRAL_MODEL_API_KEY"),
		Model:   getenv("CORRAL_MODEL"),
	}
	if v := getenv("CORRAL_MODEL_NATIVE"); v != "" {
		// The protocols the provider also speaks itself, passed through.
		for _, p := range strings.Split(v, ",") {
			c.Model.Native = append(c.Model.Native, strings.TrimSpace(p))
		}
	}
	maxOutput := int64(gateway.DefaultMaxOutput)
	if v := getenv("CORRAL_MODEL_MAX_OUTPUT"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%w: CORRAL_MODEL_MAX_OUTPUT=%q: want a positive number", errUsage, v)
		}
		maxOutput = n
	}
	fs.Int64Var(&c.Model.MaxOutput, "model-max-output", maxOutput,
		"the output cap every model call is sent with: with its request's size, what it reserves of its agent's budget before it goes")
	// OpenAI's reasoning models refuse max_tokens; other OpenAI-compatible
	// servers know only it.
	field := "max_tokens"
	if u, err := url.Parse(c.Model.BaseURL); err == nil && u.Hostname() == "api.openai.com" {
		field = "max_completion_tokens"
	}
	fs.StringVar(&c.Model.OutputField, "model-output-field", envOr(getenv, "CORRAL_MODEL_OUTPUT_FIELD", field),
		"the Chat Completions field that carries the output cap: max_tokens, or max_completion_tokens (the default for api.openai.com)")
	c.SecretKey = getenv("CORRAL_SECRET_KEY")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	c.TrustedProxies = proxies.list
	if c.Role == string(role.Sandbox) {
		if c.Control == "" {
			return c, fmt.Errorf("%w: --role sandbox needs --control, control's URL (and --join TOKEN on its first start)", errUsage)
		}
		if _, err := sanitize.ServerURL(c.Control); err != nil {
			return c, fmt.Errorf("%w: --control must be control's http or https URL, such as https://corral.example.org", errUsage)
		}
	}
	if c.RetrievalThreshold < 0 || c.RetrievalThreshold > 1 {
		return c, fmt.Errorf("%w: --retrieval-threshold must be from 0 to 1", errUsage)
	}
	if c.MaxConns < 0 || c.MaxConnsPerAddr < 0 {
		return c, fmt.Errorf("%w: --max-conns and --max-conns-per-addr must not be negative", errUsage)
	}
	if c.MaxSessions < 0 {
		return c, fmt.Errorf("%w: --max-sessions must not be negative (0: no bound)", errUsage)
	}
	for _, sz := range sizes {
		if *sz.dst <= 0 {
			return c, fmt.Errorf("%w: --%s must be positive", errUsage, sz.flag)
		}
	}
	if c.EgressAllowPrivate, err = egress.ParsePrefixes(*allowPrivate); err != nil {
		return c, fmt.Errorf("%w: --egress-allow-private: %s", errUsage, corral.ErrorMessage(err))
	}
	if c.GitCAFile != "" {
		if _, err := os.Stat(c.GitCAFile); err != nil {
			return c, fmt.Errorf("%w: --git-ca-file: %v", errUsage, err)
		}
		// git runs in a workspace, where a relative path names nothing.
		if c.GitCAFile, err = filepath.Abs(c.GitCAFile); err != nil {
			return c, fmt.Errorf("%w: --git-ca-file: %v", errUsage, err)
		}
	}
	// Every path handed to a child process (a session's supervisor starts
	// in "/") must be absolute: resolve them once, here.
	if c.Data, err = absData(c.Data); err != nil {
		return c, err
	}
	if c.ToolsDir, err = filepath.Abs(c.ToolsDir); err != nil {
		return c, fmt.Errorf("%w: --tools-dir: %v", errUsage, err)
	}
	if c.SessionGrace <= 0 {
		return c, fmt.Errorf("%w: --session-grace must be positive", errUsage)
	}
	if c.ChangeTTL <= 0 {
		return c, fmt.Errorf("%w: --change-ttl must be positive", errUsage)
	}
	if c.QuarantineAfter < 1 || c.QuarantineWindow <= 0 {
		return c, fmt.Errorf("%w: --quarantine-after must be at least 1 and --quarantine-window positive", errUsage)
	}
	return c, nil
}

func serve(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	c, err := parseServe(args, stderr, getenv)
	if err != nil {
		return err
	}
	return runServer(ctx, c, newLogger(stderr, getenv), nil)
}

// runServer starts what the role needs, serves until ctx is cancelled, then
// shuts down gracefully. ready, when not nil, receives the listen address.
func runServer(ctx context.Context, c serveConfig, log *slog.Logger, ready chan<- string) error {
	ctx, cancel := context.WithCancel(ctx) // ends background work however we return
	defer cancel()
	r, err := role.Parse(c.Role)
	if err != nil {
		return err
	}
	if err := role.Supported(r); err != nil {
		return err
	}

	// One server per data directory: the lock comes before anything in it
	// is read, recovered or reconciled, and the address is bound before
	// that too, so a second server, or one whose address is taken, exits
	// having touched nothing.
	lock, err := lockDataDir(c.Data)
	if err != nil {
		return err
	}
	defer lock.release()
	if r == role.Sandbox {
		// A node dials control and listens on nothing.
		return runNode(ctx, c, log)
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.Addr, err)
	}
	defer ln.Close()
	guard := guardListener(ln, c, log)
	defer guard.Close()

	if role.HoldsWorktree(r) {
		if err := prepareDataDir(c.Data, log); err != nil {
			return err
		}
	}
	var db *sqlite.DB
	if role.NeedsDatabase(r) {
		if db, err = sqlite.Open(ctx, dbPath(c.Data)); err != nil {
			return err
		}
		defer db.Close()
	}
	if role.HoldsWorktree(r) {
		// Runs arrive with the runs capability; say now whether they could.
		if err := sandbox.Available(); err != nil {
			log.Warn("agent runs will be refused: "+describe(err), "role", r)
		} else {
			log.Info("sandbox ready", "role", r)
		}
	}

	mux := http.NewServeMux()
	// Role control serves its nodes' relays while it starts: reconciling
	// the runs a stopped control left behind asks the nodes about their
	// sessions, so they must be able to connect first. Everything else
	// answers 503 until the server is ready.
	var opened atomic.Bool
	srv := newHTTPServer(gated(mux, &opened), log, defaultTimeouts)
	errc := make(chan error, 1)
	early := r == role.Control
	if early {
		go func() { errc <- srv.Serve(guard) }()
	}
	if role.ServesBrowsers(r) {
		cfg := serviceConfig(c, log)
		accounts, err := service.NewAccounts(db, auth.NewThrottle(auth.ThrottleConfig{}), auth.DefaultParams, cfg)
		if err != nil {
			return err
		}
		key, err := loadSecretKey(c, log)
		if err != nil {
			return err
		}
		creds := service.NewCredentials(db, key, cfg)
		agents := service.NewAgents(db, cfg)
		// The machine that holds the workspaces, staged trees and
		// sessions: this one (role all), or the sandbox nodes (control).
		var sessions corral.Node
		var nodes *service.Nodes
		var fl *fleet.Fleet
		if r == role.Control {
			nodes = service.NewNodes(db, service.NodesConfig{})
			fl = fleet.New(nodes, fleet.Config{Log: log})
			defer fl.Close()
			router := fleet.NewRouter(fl, db, 0) // a node away for less than fleet.DefaultGrace (2 min) kills no run
			nodes.SetMover(db, router.Move)
			nodes.SetLive(func(ctx context.Context, rec corral.NodeRecord) service.NodeLive {
				r := fl.Refused(rec.ID)
				live := service.NodeLive{Status: fl.Status(rec), Refused: r.Count, LastRefused: r.Last}
				if live.Status == corral.NodeLost {
					return live
				}
				load, err := router.Load(ctx, rec.ID)
				if err != nil { // the node's own count is not to be had: this control's
					load = corral.NodeLoad{Sessions: router.Sessions(rec.ID)}
				}
				live.Load = load
				return live
			})
			sessions = router
			mux.Handle(fleet.RelayPath, fl.Handler())
			mux.Handle(fleet.JoinPath, fl.Handler())
		} else {
			// What an earlier process left half done of an import or a
			// clone goes.
			local, err := newLocalNode(c, log)
			if err != nil {
				return err
			}
			defer local.Close() // after the runs' loops: the sessions go on
			sessions = local
		}
		changes := service.NewChanges(db, sessions, c.ChangeTTL, cfg)
		// Before anything touches a workspace: finish or roll back every
		// apply a crash interrupted.
		if err := changes.Recover(ctx); err != nil {
			return err
		}
		changes.UseRepositories(service.RepositoryConfig{Store: db, Secrets: creds, Trace: db})
		defer changes.CloseRepositories() // stops running clones before the database closes
		if n, err := changes.ReconcileRepositories(ctx); err != nil {
			return err
		} else if n > 0 {
			log.Warn("clones interrupted by the last stop were failed", "repositories", n)
		}
		model, err := gateway.New(c.Model)
		if err != nil {
			return err
		}
		if err := model.Configured(); err != nil {
			log.Warn("messages will be refused until a model provider is configured: " + describe(err))
		} else {
			log.Info("model provider configured", "base_url", c.Model.BaseURL, "model", c.Model.Model)
		}
		runs := runner.New(db, model, changes, sessions, runner.Config{
			QuarantineAfter: c.QuarantineAfter, QuarantineWindow: c.QuarantineWindow, Log: log,
		})
		defer runs.Close()
		// The gateway agent CLIs reach from their sessions, before any run
		// is re-attached: a CLI that outlived the last server calls again.
		// In role control they arrive over the nodes' relays.
		gwHandler := modelapi.Handler(modelapi.Runner(runs), model, log)
		var gwLn net.Listener
		if fl != nil {
			gwLn = fl.Gateway()
		} else if gwLn, err = modelapi.Listen(filepath.Join(c.Data, gatewaySocket)); err != nil {
			return err
		}
		gwSrv := modelapi.Serve(gwLn, gwHandler)
		defer gwSrv.Close()
		if role.HoldsWorktree(r) {
			for _, d := range corral.AgentDrivers[1:] {
				if err := driver.Installed(c.ToolsDir, d); err != nil {
					log.Warn("agents with this driver will not run: "+describe(err), "driver", d)
				}
			}
		}
		ready := func() error {
			if err := model.Configured(); err != nil {
				return err
			}
			if fl != nil {
				if len(fl.Connected()) == 0 {
					return corral.Errorf(corral.EUNAVAIL, "no sandbox node is connected: start one with corral serve --role sandbox --control URL --join TOKEN")
				}
				return nil
			}
			if err := sandbox.Available(); err != nil {
				return err
			}
			return workspace.DiskAvailable()
		}
		runService := service.NewRuns(db, runs, ready, cfg)
		runService.UseNode(sessions)
		// Delegation before any run is re-attached: a parent taken up
		// again asks for its child at once.
		runs.UseDelegation(service.NewDelegation(runService, agents, delegationCaps(c.Delegation)))
		// Documents: each agent's private store and the library, files of
		// their own apart from the database.
		stores, err := retrieval.OpenStores(ctx, filepath.Join(c.Data, "documents"))
		if err != nil {
			return err
		}
		defer stores.Close()
		documents := service.NewDocuments(db, stores, model, service.DocumentsConfig{
			MaxBytes: c.DocumentMaxBytes, EmbeddingModel: c.EmbedModel, Threshold: c.RetrievalThreshold, Log: log})
		agents.OnDelete(documents.DropAgent)
		// And what its node holds: workspace, staged trees, journal.
		agents.OnDelete(func(id string) error {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			return sessions.DropAgent(dctx, id)
		})
		runs.UseRetrieval(documents)
		// Then settle the runs a stopped server left behind.
		n, back, err := runs.Reconcile(ctx)
		if err != nil {
			return err
		}
		if back > 0 {
			log.Info("runs whose sessions outlived the last stop were re-attached", "runs", back)
		}
		if n > 0 {
			log.Warn("runs interrupted by the last stop were reconciled", "runs", n)
		}
		agents.SetResume(runs.Resume)
		go sweepChanges(ctx, changes, log)
		// Streams hold connections: at most half of them, so ordinary
		// requests always find room.
		apiCfg := api.Config{SecureCookies: c.SecureCookies, Log: log, Done: ctx.Done(),
			TrustedProxies: c.TrustedProxies, MaxStreams: max(1, guard.MaxConns()/2)}
		apiServer := api.New(apiCfg, accounts, agents, changes, runService)
		apiServer.SetCredentials(creds)
		apiServer.SetDocuments(documents)
		apiServer.SetModels(service.NewModels(model))
		if nodes != nil {
			apiServer.SetNodes(nodes)
		}
		mux.Handle("/api/", apiServer)
		mux.Handle("/v1/", api.NotFound())
		mux.Handle("/", webui.Handler())
		if !webui.Built() {
			log.Info("this binary has no web app (built without -tags ui): make run builds it")
		}
	}

	if db != nil {
		go sweepSessions(ctx, db, log)
	}
	addr := ln.Addr().String()
	opened.Store(true)
	log.Info("corral serving", "version", buildVersion(), "role", r, "addr", "http://"+addr, "data", c.Data, "signup", c.Signup)
	if !early {
		go func() { errc <- srv.Serve(guard) }()
	}
	if ready != nil {
		ready <- addr
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// httpTimeouts bound how long a client may take.
type httpTimeouts struct {
	// Header bounds reading a request's headers, from the connection's
	// start (on a kept-alive one, from its next request's first byte): a
	// slowloris trickling headers, or a connection that sends nothing, is
	// cut off.
	Header time.Duration
	// Request bounds reading the whole request, headers and body: a slow
	// body is cut off. net/http lifts the read deadline once the body is
	// read, so it bounds neither the handler nor an event stream (those
	// set their own write deadlines, see api.Config.StreamWriteTimeout).
	Request time.Duration
	// Idle bounds a kept-alive connection's wait for its next request.
	Idle time.Duration
	// Write bounds writing an answer, from the request's start: a client
	// that never reads a large answer (a file, a trace) is dropped instead
	// of holding a goroutine and its buffers. An event stream moves the
	// deadline before each of its writes, so it may last as long as it
	// writes.
	Write time.Duration
}

// defaultTimeouts: ten seconds for headers, which any client sends in one
// packet; a minute for a request, which carries at most api.MaxBody (2 MiB:
// 35 KB/s suffices); a minute idle, so connections a browser keeps give
// their slot back soon.
var defaultTimeouts = httpTimeouts{Header: 10 * time.Second, Request: 60 * time.Second, Idle: 60 * time.Second, Write: 2 * time.Minute}

// newHTTPServer is the server's HTTP settings. There is no WriteTimeout: it
// would cut every event stream at that age; each request gets a write
// deadline of t.Write instead, which a stream moves as it writes.
func newHTTPServer(h http.Handler, log *slog.Logger, t httpTimeouts) *http.Server {
	if t.Write > 0 {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(t.Write))
			next.ServeHTTP(w, r)
		})
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.Header,
		ReadTimeout:       t.Request,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// guardListener puts the connection caps on ln (see netguard), after raising
// the descriptor limit: the total is lowered to what the limit allows after
// netguard's reserve, so that a flood of connections can never take the
// descriptors the database, the sandbox, staging and the trace need (a run
// ending meanwhile must be able to record its end). An operator's
// --max-conns above that is lowered with a warning rather than refused: the
// reserve is not negotiable, and a limit changed under a service manager
// should not keep the server from starting.
func guardListener(ln net.Listener, c serveConfig, log *slog.Logger) *netguard.Listener {
	maxConns := c.MaxConns
	limit, err := netguard.RaiseFileLimit()
	budget, reserve := netguard.Budget(limit)
	switch {
	case err != nil || budget == 0:
		log.Warn("the descriptor limit is unknown: no descriptors are held back from connections", "err", err)
		if maxConns == 0 {
			maxConns = netguard.DefaultMaxConns
		}
	case maxConns == 0:
		maxConns = min(netguard.DefaultMaxConns, budget)
	case maxConns > budget:
		log.Warn("--max-conns lowered to what the descriptor limit allows after the reserve",
			"asked", maxConns, "max_conns", budget, "nofile", limit, "reserve", reserve)
		maxConns = budget
	}
	log.Info("connection limits", "max_conns", maxConns, "max_conns_per_addr", c.MaxConnsPerAddr,
		"nofile", limit, "reserve", reserve, "trusted_proxies", len(c.TrustedProxies))
	return netguard.Wrap(ln, netguard.Config{MaxConns: maxConns, MaxConnsPerAddr: c.MaxConnsPerAddr,
		Exempt: c.TrustedProxies, Log: log})
}

// prefixList is the --trusted-proxy flag: repeatable, each value a
// comma-separated list of CIDRs or single addresses. Values from the
// environment are replaced, not added to, by the first flag.
type prefixList struct {
	list    []netip.Prefix
	fromEnv bool
}

func (p *prefixList) String() string {
	s := make([]string, len(p.list))
	for i, x := range p.list {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixList) Set(v string) error {
	if p.fromEnv {
		p.list, p.fromEnv = nil, false
	}
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return fmt.Errorf("%q is neither a CIDR nor an address", f)
			}
			a = a.Unmap()
			prefix = netip.PrefixFrom(a, a.BitLen())
		}
		p.list = append(p.list, prefix.Masked())
	}
	return nil
}

// sweepChanges expires change sets nobody decided in time, once a minute.
func sweepChanges(ctx context.Context, changes *service.Changes, log *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if n, err := changes.ExpireDue(ctx); err != nil && ctx.Err() == nil {
			log.Warn("expiring change sets", "err", err)
		} else if n > 0 {
			log.Info("expired change sets", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepSessions deletes expired sessions once an hour. Expired sessions are
// refused on lookup anyway; this only keeps the table small.
func sweepSessions(ctx context.Context, db *sqlite.DB, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := db.DeleteExpiredSessions(ctx, time.Now()); err != nil && ctx.Err() == nil {
			log.Warn("sweeping expired sessions", "err", err)
		} else if n > 0 {
			log.Info("swept expired sessions", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// prepareDataDir makes the data directory traversable by the sandbox's
// user, who must reach the staged trees inside it (nothing in it becomes
// readable: the database stays 0600), and warns when a directory above it
// stops that user, which would make every run fail.
func prepareDataDir(data string, log *slog.Logger) error {
	abs, err := filepath.Abs(data)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o711); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if st.Mode().Perm()&0o001 == 0 {
		if err := os.Chmod(abs, st.Mode().Perm()|0o011); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
	}
	uid := sandboxUser()
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		owner := -1
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			owner = int(sys.Uid)
		}
		if uid != 0 && owner != uid && st.Mode().Perm()&0o001 == 0 {
			log.Warn("agent runs will fail: the sandbox's user cannot pass through "+dir+
				" to reach the data directory; use a --data outside it (e.g. /var/lib/corral) or chmod o+x "+dir,
				"data", abs)
			break
		}
		if dir == "/" {
			break
		}
	}
	return nil
}

// gatewaySocket is where, under the data directory, the gateway listens
// for agent CLIs (their sessions' supervisors join them to it).
const gatewaySocket = "gateway.sock"

// serviceConfig is what the use cases take of serve's settings.
func serviceConfig(c serveConfig, log *slog.Logger) service.Config {
	return service.Config{Signup: c.Signup, PendingDisk: c.PendingDisk, Log: log}
}

// delegationCaps turns the flags' caps into the domain's: a flag's 0 is
// "none allowed", which corral.TreeCaps spells as a negative number (its
// zero is "the default").
func delegationCaps(c corral.TreeCaps) corral.TreeCaps {
	for _, v := range []*int{&c.Depth, &c.Fanout, &c.Concurrency, &c.Create} {
		if *v == 0 {
			*v = -1
		}
	}
	return c
}

// gated answers 503 to everything but the nodes' relay until open: what a
// starting control serves.
func gated(h http.Handler, open *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !open.Load() && !strings.HasPrefix(r.URL.Path, fleet.RelayPath) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"code":"unavailable","message":"the server is starting"}}`+"\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}
