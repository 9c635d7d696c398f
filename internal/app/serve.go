package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"corral"
	"corral/internal/fleet"
	"corral/internal/netguard"
	"corral/internal/service"
)

// listen binds the address, when the Config names one, and puts the
// connection caps on it.
func (a *App) listen() error {
	if a.cfg.Addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.Addr, err)
	}
	a.guard = guardListener(ln, a.cfg, a.opt.log)
	a.defer_(func() { a.guard.Close() })
	return nil
}

// serve starts the HTTP server on the listener, once.
func (a *App) serve() {
	if a.served != nil {
		return
	}
	a.served = make(chan error, 1)
	go func() { a.served <- a.srv.Serve(a.guard) }()
}

// Run serves until ctx is cancelled, then shuts down gracefully: role
// sandbox runs its node until then; the others open the handler, serve
// on Config.Addr and sweep what expires. ready, when not nil, receives
// the listen address once the server answers. The caller closes the App
// after.
func (a *App) Run(ctx context.Context, ready chan<- string) error {
	log := a.opt.log
	if a.agent != nil {
		log.Info("corral sandbox node", "version", Version(), "control", a.cfg.Control, "data", a.cfg.Data)
		return a.agent.Run(ctx)
	}
	if _, err := a.mustListen(); err != nil {
		return err
	}
	go sweepChanges(ctx, a.Decisions, log)
	go sweepSessions(ctx, a.Store, log)
	addr := a.guard.Addr().String()
	a.Open()
	log.Info("corral serving", "version", Version(), "role", a.role, "addr", "http://"+addr, "data", a.cfg.Data, "store", a.storeName(), "signup", a.cfg.Signup)
	a.serve()
	if ready != nil {
		ready <- addr
	}
	select {
	case err := <-a.served:
		return fmt.Errorf("serve: %w", err)
	case err := <-a.leaseLost:
		// Another control serves now: stop driving runs at once (Close
		// leaves their sessions for it to re-attach).
		a.srv.Close()
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
func guardListener(ln net.Listener, c Config, log *slog.Logger) *netguard.Listener {
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

// sweepChanges expires change sets nobody decided in time, once a minute.
func sweepChanges(ctx context.Context, changes *service.Decisions, log *slog.Logger) {
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
func sweepSessions(ctx context.Context, db interface {
	DeleteExpiredSessions(context.Context, time.Time) (int64, error)
}, log *slog.Logger) {
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

// sandboxUser owns workspaces: the sandbox's host user when Corral runs as
// root (see sandbox.Config), else Corral itself, and then no chown is
// needed (0).
func sandboxUser() int {
	if os.Geteuid() == 0 {
		return 65534
	}
	return 0
}

// gated answers 503 to everything but the nodes' relay and the health
// checks until open: what a starting control serves. /healthz says the
// process serves; /readyz says it is starting. reads, when not nil (a
// control on a shared store), answers the store reads meanwhile, handing
// it the 503 for the rest: a control taking over goes on answering what
// it answered standing by.
func gated(h http.Handler, open *atomic.Bool, reads func(rest http.Handler) http.Handler) http.Handler {
	var starting http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":"unavailable","message":"the server is starting"}}`+"\n")
	})
	if reads != nil {
		starting = reads(starting)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if !open.Load() && !strings.HasPrefix(p, fleet.RelayPath) && p != "/healthz" && p != "/readyz" {
			starting.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// describe shows a user-facing message, and the internal cause too: the
// log's reader is the operator, who needs it.
func describe(err error) string {
	var e *corral.Error
	if errors.As(err, &e) && e.Code != corral.EINTERNAL {
		return e.Message
	}
	return err.Error()
}

// version is set at build time (-ldflags "-X corral/internal/app.version=v1.2.3").
var version = "dev"

// Version is the build's version: the one it was given, else dev and the
// commit it was built from.
func Version() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return version
}

// storeName says where the store is, for the log: never the URL, which
// may hold a password.
func (a *App) storeName() string {
	if a.cfg.Database != "" {
		return "postgres"
	}
	return "sqlite"
}
