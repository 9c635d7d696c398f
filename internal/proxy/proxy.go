// Package proxy is the egress proxy: the one way out of a run's sandbox
// when its network is an allow-list. The processes inside reach it as
// HTTP_PROXY and HTTPS_PROXY; the node joins each of their connections to
// the proxy's socket after a line naming the run (corral.GatewayPreamble).
//
// For every connection, and every request it can see, the proxy asks what
// the run may reach now (Config.Grant), so an edited allow-list applies to
// the next one. A host is matched by name and port (egress.Match), resolved
// once and connected to at that address (egress.Policy refuses private
// ranges unless allowed). HTTPS passes through as a tunnel whose TLS server
// name must be the host the tunnel was opened for, so that an allowed front
// cannot carry another site; a rule that names methods or paths, or a
// secret header for the host, makes the proxy terminate the TLS with its
// own CA (which the sandbox trusts) and check and forward each request.
//
// Each run's upstream connections and bytes are capped; crossing a cap
// ends all the run's connections and tells Events, which ends the run as
// a violation. Traffic is summed per host and told when the run's last
// connection to the host closes. Secret values never reach a log line or
// an event, and request headers are never logged.
package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"corral"
	"corral/internal/egress"
)

// Grant is what one run may reach at this moment, built by the caller for
// each connection (and each request the proxy terminates).
type Grant struct {
	Rules   []corral.EgressRule // presets already expanded
	Headers []Header            // secrets: set on requests to their Host
}

// Header is a secret the proxy sets, as Name: Value, on every request to
// Host (replacing any the client sent). Host is matched as a rule's host
// is, so "*.example.com" is allowed.
type Header struct{ Host, Name, Value string }

// Denial is a connection or request the proxy refused.
type Denial struct {
	Host   string
	Port   int
	Method string // "" for a refused connection
	Path   string // "" for a refused connection
	Reason string // the words for people: the rule, or what failed
}

// Traffic is a run's traffic with one host while it had connections to it.
// BytesIn came from the host, BytesOut went to it (as on the wire, TLS
// included); Requests counts each tunnel once and each request the proxy
// saw (plain HTTP, terminated HTTPS) once.
type Traffic struct {
	Host              string
	Requests          int64
	BytesIn, BytesOut int64
}

// Events hears what the proxy did. Its methods are called from the
// connections' goroutines, never under the proxy's locks, and must not
// block for long.
type Events interface {
	Denied(run string, d Denial)
	// Traffic is a summary per host, told when the run's last open
	// connection to that host closes.
	Traffic(run string, t Traffic)
	// Exceeded: the run crossed a cap, "bytes" or "connections". The
	// proxy has closed the run's connections and refuses new ones; the
	// caller ends the run as a violation. Told once per run.
	Exceeded(run string, what string)
}

// Defaults for the Config fields left zero.
const (
	DefaultMaxBytes    = 4 << 30
	DefaultMaxConns    = 10_000
	DefaultMaxOpen     = 1024
	DefaultIdleTimeout = 5 * time.Minute
)

// Bounds on what a client sends before the proxy knows what it wants.
const (
	maxPreamble    = 256
	preambleWait   = 10 * time.Second
	maxHeaderBytes = 64 << 10
	headerWait     = 30 * time.Second
	helloWait      = 10 * time.Second
)

// Config is what the proxy needs.
type Config struct {
	// Grant answers what run may reach now; an error refuses (the run is
	// over, or its network is none). Its corral.Error message, if any, is
	// shown to the run.
	Grant func(ctx context.Context, run string) (Grant, error)
	// Dial resolves hosts and refuses private ranges unless allowed.
	Dial egress.Policy
	// CA signs the certificates of terminated hosts.
	CA *CA
	// Upstream holds the roots upstream TLS is verified against when the
	// proxy terminates (nil: the system's). Only RootCAs is used.
	Upstream *tls.Config
	// MaxBytes caps a run's bytes, in and out (0: DefaultMaxBytes);
	// MaxConns its upstream connections (0: DefaultMaxConns).
	MaxBytes int64
	MaxConns int64
	// MaxOpen caps the connections a run has open to the proxy at once
	// (0: DefaultMaxOpen): the proxy's descriptors are every run's.
	MaxOpen int
	// IdleTimeout ends a connection that moved nothing for so long (0:
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	Events      Events // nil: nobody hears
	Log         *slog.Logger
}

// Proxy is the egress proxy. Serve it on the listener the nodes join runs'
// connections to.
type Proxy struct {
	cfg    Config
	log    *slog.Logger
	ledger *ledger

	mu    sync.Mutex
	conns map[*runConn]struct{} // every client connection, for Serve's end
}

// New returns a proxy for cfg.
func New(cfg Config) *Proxy {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxOpen <= 0 {
		cfg.MaxOpen = DefaultMaxOpen
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Events == nil {
		cfg.Events = noEvents{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Proxy{cfg: cfg, log: cfg.Log, ledger: newLedger(cfg.MaxBytes, cfg.MaxConns, cfg.MaxOpen, cfg.Events),
		conns: map[*runConn]struct{}{}}
}

func (p *Proxy) add(c *runConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
}

func (p *Proxy) remove(c *runConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// closeAll closes every client connection; each takes its upstream ones
// with it.
func (p *Proxy) closeAll() {
	p.mu.Lock()
	all := make([]*runConn, 0, len(p.conns))
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
}

type noEvents struct{}

func (noEvents) Denied(string, Denial)   {}
func (noEvents) Traffic(string, Traffic) {}
func (noEvents) Exceeded(string, string) {}

// End forgets run's counters: the run has ended. Its connections still
// open are closed, and what they moved goes to Events before End returns.
func (p *Proxy) End(run string) { p.ledger.end(run) }

// Serve serves the proxy on ln until ln is closed, then closes every
// connection it has open. Each connection starts with the preamble naming
// its run; one without is closed unanswered.
func (p *Proxy) Serve(ln net.Listener) error {
	srv := &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: headerWait,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c.(*runConn))
		},
	}
	rl := &runListener{Listener: ln, p: p, conns: make(chan net.Conn), done: make(chan struct{})}
	go rl.accept()
	err := srv.Serve(rl)
	srv.Close()
	p.closeAll()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// runListener accepts connections and hands them on once their preamble
// is read, each read on its own goroutine: a client that is slow to write
// one holds up no other.
type runListener struct {
	net.Listener
	p     *Proxy
	conns chan net.Conn
	done  chan struct{}
	err   error
}

func (l *runListener) accept() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.err = err
			close(l.done)
			return
		}
		go l.admit(c)
	}
}

func (l *runListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

// admit reads c's preamble, bounded in size and time, and hands c on as
// a connection of the run it names.
func (l *runListener) admit(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(preambleWait))
	r := bufio.NewReaderSize(c, maxPreamble)
	line, err := r.ReadSlice('\n')
	prefix := strings.TrimSuffix(corral.GatewayPreamble(""), "\n")
	run, ok := strings.CutPrefix(strings.TrimSuffix(string(line), "\n"), prefix)
	if err != nil || !ok || !validRun(run) {
		l.p.log.Debug("egress: a connection without a preamble closed", "remote", c.RemoteAddr().String())
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	rc := &runConn{Conn: c, r: r, run: run, p: l.p, acct: l.p.ledger.account(run)}
	if !l.p.ledger.enter(rc.acct, c) {
		l.p.log.Warn("egress: a run has too many connections open; one more closed", "run", run, "max", l.p.cfg.MaxOpen)
		c.Close()
		return
	}
	l.p.add(rc)
	select {
	case l.conns <- rc:
	case <-l.done:
		rc.Close()
	}
}

// validRun: a run's id as the node writes it, printable and short; it goes
// into log lines and events.
func validRun(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

type connKey struct{}

// runConn is a client connection whose preamble has been read: reads go
// through the buffer that read it. Closing it ends what it reached: its
// plain HTTP transport, and its share of the run's traffic per host.
type runConn struct {
	net.Conn
	r    *bufio.Reader
	run  string
	p    *Proxy
	acct *account

	mu     sync.Mutex
	closed bool
	plain  *plainState // see forward.go
}

func (c *runConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the connection: the client is told that nothing
// more comes, and may still send.
func (c *runConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *runConn) Close() error {
	c.mu.Lock()
	plain := c.plain
	already := c.closed
	c.closed, c.plain = true, nil
	c.mu.Unlock()
	err := c.Conn.Close()
	if !already {
		c.p.ledger.leave(c.acct, c.Conn)
		c.p.remove(c)
		if plain != nil {
			plain.end(c.p, c.acct)
		}
	}
	return err
}

// serveHTTP is every request a client connection makes to the proxy
// itself: CONNECT, a plain HTTP request in absolute form, or a mistake.
func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rc := r.Context().Value(connKey{}).(*runConn)
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r, rc)
	case r.URL.IsAbs() && r.URL.Scheme == "http" && r.URL.Host != "":
		p.plain(w, r, rc)
	case r.URL.IsAbs():
		http.Error(w, "corral egress: only http:// URLs are proxied as requests; https goes through CONNECT", http.StatusBadRequest)
	default:
		http.Error(w, "corral egress: this is a proxy: ask for an absolute URL (http://host/path) or CONNECT host:port", http.StatusBadRequest)
	}
}

// admission is what every connection and plain request passes before its
// host is looked at: the run may reach the network, and is within its caps.
// It answers the grant, or the reason for a refusal.
func (p *Proxy) admission(ctx context.Context, rc *runConn) (Grant, string) {
	if what := p.ledger.exceeded(rc.acct); what != "" {
		return Grant{}, capReason(what)
	}
	g, err := p.cfg.Grant(ctx, rc.run)
	if err != nil {
		p.log.Debug("egress: no grant", "run", rc.run, "err", err)
		reason := "this run may not reach the network"
		if corral.ErrorCode(err) != corral.EINTERNAL {
			reason += ": " + corral.ErrorMessage(err)
		}
		return Grant{}, reason
	}
	return g, ""
}

func capReason(what string) string {
	return fmt.Sprintf("this run has crossed its cap on egress %s; it may not reach the network", what)
}

// deny tells Events and the log of a refusal; the caller answers the
// client.
func (p *Proxy) deny(run string, d Denial) {
	d.Path = bound(d.Path)
	p.log.Info("egress denied", "run", run, "host", d.Host, "port", d.Port, "method", d.Method, "path", d.Path, "reason", d.Reason)
	p.cfg.Events.Denied(run, d)
}

// refuse answers a refused request: status and the reason, in text.
func refuse(w http.ResponseWriter, status int, reason string) {
	http.Error(w, "corral egress: "+reason, status)
}

// bound shortens what a client sent before it goes into a log line or an
// event.
func bound(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}

// readerConn is a connection whose reads come from r: a buffer that
// already holds what the client sent first.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }
