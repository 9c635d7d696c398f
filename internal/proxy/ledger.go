package proxy

import (
	"io"
	"net"
	"sync"
)

// ledger keeps each run's account: the upstream connections it made and
// the bytes it moved, against its caps; the connections it has open, so
// that crossing a cap can end them; and the traffic per host, summed
// until the run's last connection to the host closes.
type ledger struct {
	maxBytes, maxConns int64
	maxOpen            int
	events             Events

	mu   sync.Mutex
	runs map[string]*account
}

// account is one run's. Its fields are guarded by the ledger's mutex.
type account struct {
	run      string
	bytes    int64
	conns    int64
	exceeded string // "", or what was crossed: "bytes" or "connections"
	ended    bool   // End was called: nothing more is counted or told
	clients  int    // client connections open
	open     map[io.Closer]struct{}
	hosts    map[string]*hostTally
}

// hostTally is a host's traffic while the run has connections to it.
type hostTally struct {
	open int // client connections of the run that reached the host
	t    Traffic
}

func newLedger(maxBytes, maxConns int64, maxOpen int, events Events) *ledger {
	return &ledger{maxBytes: maxBytes, maxConns: maxConns, maxOpen: maxOpen, events: events, runs: map[string]*account{}}
}

// account answers run's account, opening one the first time.
func (l *ledger) account(run string) *account {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.runs[run]
	if a == nil {
		a = &account{run: run, open: map[io.Closer]struct{}{}, hosts: map[string]*hostTally{}}
		l.runs[run] = a
	}
	return a
}

// end forgets run's account: its open connections are closed and what
// its hosts moved so far goes to Events now, so a run's trace has its
// egress summary before its end, never after. A later connection starts
// a new account (and is refused: the run is over).
func (l *ledger) end(run string) {
	l.mu.Lock()
	a := l.runs[run]
	delete(l.runs, run)
	if a == nil {
		l.mu.Unlock()
		return
	}
	a.ended = true
	open := make([]io.Closer, 0, len(a.open))
	for c := range a.open {
		open = append(open, c)
	}
	clear(a.open)
	var moved []Traffic
	for _, h := range a.hosts {
		moved = append(moved, h.t)
	}
	clear(a.hosts) // a connection released later hands nothing twice
	l.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
	for _, t := range moved {
		l.events.Traffic(run, t)
	}
}

// exceeded answers the cap a has crossed, or "".
func (l *ledger) exceeded(a *account) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return a.exceeded
}

// enter counts a client connection c of a; false (and c is not counted)
// when a has as many open as it may. A run over a cap is let in, to be
// told so, but c is not kept: it is already refused.
func (l *ledger) enter(a *account, c io.Closer) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.clients >= l.maxOpen || a.ended {
		return false
	}
	a.clients++
	if a.exceeded == "" {
		a.open[c] = struct{}{}
	}
	return true
}

// leave ends what enter began.
func (l *ledger) leave(a *account, c io.Closer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a.clients--
	delete(a.open, c)
}

// track keeps c among a's open connections, to be closed if a crosses a
// cap; false (and c is not kept) when a already has.
func (l *ledger) track(a *account, c io.Closer) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.exceeded != "" || a.ended {
		return false
	}
	a.open[c] = struct{}{}
	return true
}

func (l *ledger) untrack(a *account, c io.Closer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(a.open, c)
}

// dial counts an upstream connection a is about to make; false when it
// would be one more than the cap (a has then crossed it).
func (l *ledger) dial(a *account) bool {
	l.mu.Lock()
	if a.exceeded == "" && a.conns < l.maxConns {
		a.conns++
		l.mu.Unlock()
		return true
	}
	l.mu.Unlock()
	l.exceed(a, "connections")
	return false
}

// spend counts in and out bytes of a's traffic with host; false, and
// nothing counted, when they would take a past its cap: the bytes are then
// not to be passed on, so a run never moves more than the cap allows.
func (l *ledger) spend(a *account, host string, in, out int64) bool {
	l.mu.Lock()
	if a.exceeded == "" && a.bytes+in+out <= l.maxBytes {
		a.bytes += in + out
		if h := a.hosts[host]; h != nil {
			h.t.BytesIn += in
			h.t.BytesOut += out
		}
		l.mu.Unlock()
		return true
	}
	l.mu.Unlock()
	l.exceed(a, "bytes")
	return false
}

// exceed marks a as over its cap what, tells Events the first time, and
// closes every connection a has open. Later connections are refused by
// track, dial and spend.
func (l *ledger) exceed(a *account, what string) {
	l.mu.Lock()
	first := a.exceeded == ""
	if first {
		a.exceeded = what
	}
	open := make([]io.Closer, 0, len(a.open))
	for c := range a.open {
		open = append(open, c)
	}
	clear(a.open)
	l.mu.Unlock()
	if first {
		l.events.Exceeded(a.run, what)
	}
	for _, c := range open {
		c.Close()
	}
}

// acquire records that a client connection of a reaches host; each
// acquire is matched by one release.
func (l *ledger) acquire(a *account, host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.ended {
		return // its summary was told at its end; its release finds nothing
	}
	h := a.hosts[host]
	if h == nil {
		h = &hostTally{t: Traffic{Host: host}}
		a.hosts[host] = h
	}
	h.open++
}

// request counts one request (or one tunnel) of a to host.
func (l *ledger) request(a *account, host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := a.hosts[host]; h != nil {
		h.t.Requests++
	}
}

// release ends what acquire began; the last release of a host hands its
// summary to Events.
func (l *ledger) release(a *account, host string) {
	l.mu.Lock()
	h := a.hosts[host]
	if h == nil {
		l.mu.Unlock()
		return
	}
	h.open--
	if h.open > 0 {
		l.mu.Unlock()
		return
	}
	delete(a.hosts, host)
	l.mu.Unlock()
	l.events.Traffic(a.run, h.t)
}

// meteredConn is an upstream connection: what it reads and writes is
// spent from its run's account, and a transfer that would cross the cap
// fails instead.
type meteredConn struct {
	net.Conn
	l     *ledger
	a     *account
	host  string
	close sync.Once
}

func (m *meteredConn) Read(p []byte) (int, error) {
	n, err := m.Conn.Read(p)
	if n > 0 && !m.l.spend(m.a, m.host, int64(n), 0) {
		return 0, errCap
	}
	return n, err
}

func (m *meteredConn) Write(p []byte) (int, error) {
	if len(p) > 0 && !m.l.spend(m.a, m.host, 0, int64(len(p))) {
		return 0, errCap
	}
	return m.Conn.Write(p)
}

func (m *meteredConn) Close() error {
	m.close.Do(func() { m.l.untrack(m.a, m) })
	return m.Conn.Close()
}

// CloseWrite passes a half-close on, so that a tunnel can say the client
// is done sending while the answer still comes.
func (m *meteredConn) CloseWrite() error {
	if cw, ok := m.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
