// Package netguard keeps the server's listener from being exhausted: it caps
// open connections in total and per client address, refusing the excess the
// moment it is accepted, and it sizes the total cap so that a reserve of file
// descriptors always stays free for the database, the sandbox, staging and the
// trace. A flood of idle or slow connections then costs the flooder its own
// connections and nobody else anything: a run that ends meanwhile can still
// record its end.
package netguard

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConnsPerAddr is the per-address cap when none is configured. A
// browser opens about six connections plus one per live event stream (at
// most eight per session); 128 leaves room for several people behind one NAT
// (an office) while one address alone cannot take more than a sliver of the
// total.
const DefaultMaxConnsPerAddr = 128

// DefaultMaxConns is the total cap when none is configured and the descriptor
// limit allows it. Each idle connection costs a goroutine and its buffers
// (some tens of kilobytes); ten thousand is far above what one Corral server
// is meant to carry and still a bounded amount of memory when the hard
// descriptor limit is in the hundreds of thousands.
const DefaultMaxConns = 10000

// Reserve is how many file descriptors are held back from connections, for
// everything else the server opens: the SQLite database and its journal, the
// sandbox (pipes, cgroup files, the init's descriptors), staging (overlay,
// loop device, image file) and the trace. A run in progress needs a few tens;
// the reserve covers dozens of runs at once.
const Reserve = 1024

// Budget returns the most connections a soft descriptor limit allows and the
// reserve held back from it: limit − Reserve, or half the limit when the limit
// is too small for the full reserve (a server with a tiny limit must still
// accept some connections).
func Budget(limit uint64) (conns, reserve int) {
	if limit == 0 {
		return 0, 0
	}
	r := uint64(Reserve)
	if limit < 2*r {
		r = limit / 2
	}
	return int(limit - r), int(r)
}

// Config sets a Listener's caps.
type Config struct {
	// MaxConns caps the connections open at once; it must be positive.
	MaxConns int
	// MaxConnsPerAddr caps the connections open at once from one client
	// address (an IPv6 client's whole /64, which one host can hold); zero
	// means no per-address cap.
	MaxConnsPerAddr int
	// Exempt peers are not held to MaxConnsPerAddr: a trusted reverse proxy
	// carries everyone's connections from its one address. They still
	// count towards MaxConns.
	Exempt []netip.Prefix
	// Log receives the refusals, summed, at most once per LogEvery
	// (default 5s), so a flood cannot flood the log. Nil logs nothing.
	Log      *slog.Logger
	LogEvery time.Duration
}

// Refusals counts the connections refused since the listener started.
type Refusals struct {
	OverTotal   uint64 // refused because MaxConns were open
	OverPerAddr uint64 // refused because their address had MaxConnsPerAddr open
}

// Sum is every refusal.
func (r Refusals) Sum() uint64 { return r.OverTotal + r.OverPerAddr }

// Listener is a net.Listener that enforces Config's caps on Accept.
type Listener struct {
	net.Listener
	cfg Config

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]int

	overTotal, overAddr atomic.Uint64
	lastRefused         atomic.Value // netip.Addr of the last refused peer, for the log

	stop      chan struct{}
	logged    chan struct{} // closed when the log loop has written its last line
	closeOnce sync.Once
}

// Wrap returns ln with cfg's caps. Closing the Listener closes ln.
func Wrap(ln net.Listener, cfg Config) *Listener {
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = 5 * time.Second
	}
	l := &Listener{Listener: ln, cfg: cfg, byAddr: map[netip.Addr]int{},
		stop: make(chan struct{}), logged: make(chan struct{})}
	if cfg.Log != nil {
		go l.logLoop()
	} else {
		close(l.logged)
	}
	return l
}

// Accept returns the next connection within the caps. A connection over a
// cap is closed at once, with a reset and before anything is read from it,
// and Accept goes on to the next: a refusal costs one accept and one close,
// no goroutine and no buffer.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := peerAddr(c)
		key, ok := l.admit(addr)
		if ok {
			return &conn{Conn: c, l: l, key: key}, nil
		}
		l.lastRefused.Store(addr)
		if tc, isTCP := c.(*net.TCPConn); isTCP {
			// A reset, not a FIN: the client learns at once, and the
			// server keeps no TIME_WAIT state for the refused.
			tc.SetLinger(0)
		}
		c.Close()
	}
}

// admit takes a slot for a connection from addr, or counts the refusal.
func (l *Listener) admit(addr netip.Addr) (netip.Addr, bool) {
	key := addrKey(addr)
	perAddr := l.cfg.MaxConnsPerAddr > 0 && !l.exempt(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.cfg.MaxConns {
		l.overTotal.Add(1)
		return key, false
	}
	if perAddr && l.byAddr[key] >= l.cfg.MaxConnsPerAddr {
		l.overAddr.Add(1)
		return key, false
	}
	l.open++
	l.byAddr[key]++
	return key, true
}

func (l *Listener) release(key netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if n := l.byAddr[key] - 1; n > 0 {
		l.byAddr[key] = n
	} else {
		delete(l.byAddr, key) // the map holds only addresses with open connections
	}
}

func (l *Listener) exempt(addr netip.Addr) bool {
	for _, p := range l.cfg.Exempt {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Refused returns the refusals so far.
func (l *Listener) Refused() Refusals {
	return Refusals{OverTotal: l.overTotal.Load(), OverPerAddr: l.overAddr.Load()}
}

// MaxConns is the total cap in force.
func (l *Listener) MaxConns() int { return l.cfg.MaxConns }

// Open returns how many accepted connections are still open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Close closes the underlying listener and logs the refusals not yet
// logged. Connections already accepted are their owners' to close.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.stop) })
	<-l.logged
	return err
}

// logLoop writes one line per interval in which connections were refused,
// and a last one at Close for the refusals since the last line.
func (l *Listener) logLoop() {
	defer close(l.logged)
	t := time.NewTicker(l.cfg.LogEvery)
	defer t.Stop()
	var last Refusals
	flush := func() {
		now := l.Refused()
		if now == last {
			return
		}
		prev := last
		last = now
		attrs := []any{
			"refused", now.Sum() - prev.Sum(),
			"refused_total", now.Sum(),
			"over_max_conns", now.OverTotal,
			"over_max_conns_per_addr", now.OverPerAddr,
			"open", l.Open(),
		}
		if a, ok := l.lastRefused.Load().(netip.Addr); ok && a.IsValid() {
			attrs = append(attrs, "last_addr", a.String())
		}
		l.cfg.Log.Warn("connections refused", attrs...)
	}
	for {
		select {
		case <-t.C:
			flush()
		case <-l.stop:
			flush()
			return
		}
	}
}

// peerAddr is the connection's remote address, IPv4-mapped IPv6 unmapped and
// without a zone, so that one client always has one key; the zero Addr when
// the connection is not IP (all such share one key).
func peerAddr(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap().WithZone("")
	}
	return netip.Addr{}
}

// addrKey is what the per-address cap counts by: an IPv4 address, or an IPv6
// address's /64, since one host is routinely given a whole /64 and could
// otherwise spread its connections over as many addresses as it likes.
func addrKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}

// conn gives its slot back when closed, once however often it is closed.
type conn struct {
	net.Conn
	l    *Listener
	key  netip.Addr
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}

// CloseWrite and ReadFrom pass through what the wrapped connection offers:
// net/http half-closes a connection before closing it, and sends files with
// sendfile through ReadFrom.

func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
