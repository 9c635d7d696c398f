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
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"corral/internal/api"
	"corral/internal/auth"
	"corral/internal/gateway"
	"corral/internal/role"
	"corral/internal/runner"
	"corral/internal/sandbox"
	"corral/internal/service"
	"corral/internal/store/sqlite"
	"corral/internal/webui"
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
	// QuarantineAfter violations within QuarantineWindow quarantine an
	// agent.
	QuarantineAfter  int
	QuarantineWindow time.Duration
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
	c.Model = gateway.Config{
		BaseURL: getenv("CORRAL_MODEL_BASE_URL"),
		APIKey:  getenv("CORRAL_MODEL_API_KEY"),
		Model:   getenv("CORRAL_MODEL"),
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
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
	if role.ServesBrowsers(r) {
		cfg := service.Config{Signup: c.Signup, Log: log}
		accounts, err := service.NewAccounts(db, auth.NewThrottle(auth.ThrottleConfig{}), auth.DefaultParams, cfg)
		if err != nil {
			return err
		}
		agents := service.NewAgents(db, cfg)
		changes := service.NewChanges(db, service.WorkspaceConfig{DataDir: c.Data, UID: sandboxUser(), GID: sandboxUser(), ChangeTTL: c.ChangeTTL}, cfg)
		// Before anything touches a workspace: finish or roll back every
		// apply a crash interrupted.
		if err := changes.Recover(ctx); err != nil {
			return err
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
		runs := runner.New(db, model, changes, runner.Config{
			QuarantineAfter: c.QuarantineAfter, QuarantineWindow: c.QuarantineWindow, Log: log,
		})
		defer runs.Close()
		// Then settle the runs a stopped server left behind.
		n, err := runs.Reconcile(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			log.Warn("runs interrupted by the last stop were reconciled", "runs", n)
		}
		agents.SetResume(runs.Resume)
		ready := func() error {
			if err := model.Configured(); err != nil {
				return err
			}
			return sandbox.Available()
		}
		go sweepChanges(ctx, changes, log)
		mux.Handle("/api/", api.New(api.Config{SecureCookies: c.SecureCookies, Log: log, Done: ctx.Done()},
			accounts, agents, changes, service.NewRuns(db, runs, ready, cfg)))
		mux.Handle("/", webui.Handler())
		if !webui.Built() {
			log.Info("this binary has no web app (built without -tags ui): make run builds it")
		}
	}

	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.Addr, err)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if db != nil {
		go sweepSessions(ctx, db, log)
	}
	addr := ln.Addr().String()
	log.Info("corral serving", "version", buildVersion(), "role", r, "addr", "http://"+addr, "data", c.Data, "signup", c.Signup)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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

// sandboxUser owns workspaces: the sandbox's host user when Corral runs as
// root (see sandbox.Config), else Corral itself, and then no chown is
// needed (0).
func sandboxUser() int {
	if os.Geteuid() == 0 {
		return 65534
	}
	return 0
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
