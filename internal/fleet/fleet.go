// Package fleet is control's side of its sandbox nodes: it takes each
// node's relay connection (authenticated by the node's credential),
// keeps which are connected, renews their credentials, and routes the
// runner's and the services' corral.Trees and corral.Sessions calls to
// the node that holds each agent's workspace (router.go). The node's side is package
// nodeagent.
package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"corral"
	"corral/internal/relay"
	"corral/internal/relay/noderpc"
)

// Enroller is what the fleet needs of the node use cases
// (service.Nodes).
type Enroller interface {
	Join(ctx context.Context, token, name string) (corral.NodeRecord, string, time.Time, error)
	Authenticate(ctx context.Context, credential string) (corral.NodeRecord, error)
	Rotate(ctx context.Context, nodeID string) (string, time.Time, error)
	Seen(ctx context.Context, nodeID string) error
}

// Config holds the fleet's settings.
type Config struct {
	Relay relay.Config
	// Seen is how often a connected node's last_seen is written. Default 30 s.
	Seen time.Duration
	// MaxStreams bounds the streams one node has open to control at once
	// (its asks and its sessions' gateway connections); one past it is
	// closed at once. Each may hold a relay window of data (256 KiB), so
	// this bounds what a node can make control hold. Default 512.
	MaxStreams int
	Log        *slog.Logger
}

// Fleet is the set of connected nodes.
type Fleet struct {
	enroll Enroller
	cfg    Config

	gw *conns // the sessions' gateway connections the nodes carried here
	eg *conns // and their egress proxy connections
	// carries says whether a run's session is on a node: a node carries
	// gateway connections for its own sessions only (the Router's).
	carries func(ctx context.Context, nodeID, runID string) bool

	mu      sync.Mutex
	live    map[string]*member
	changed chan struct{}        // closed (and replaced) whenever a node connects
	away    map[string]time.Time // since when a node not connected now has been away
	refused map[string]Refusals  // connections refused while the node's relay was alive
}

// Refusals counts the connections made with a node's credential that were
// refused because the node's relay was alive: a copy of the credential in
// other hands, or a node started twice. Kept since control started (each
// is also logged).
type Refusals struct {
	Count int
	Last  time.Time
}

// member is one connected node.
type member struct {
	rec     corral.NodeRecord
	session *relay.Session
	node    *noderpc.Client
	since   time.Time
}

// New returns an empty fleet.
func New(enroll Enroller, cfg Config) *Fleet {
	if cfg.Seen <= 0 {
		cfg.Seen = 30 * time.Second
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 512
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Fleet{enroll: enroll, cfg: cfg, live: map[string]*member{}, gw: newConns(), eg: newConns(), changed: make(chan struct{}),
		away: map[string]time.Time{}, refused: map[string]Refusals{}}
}

// Gateway is the connections sessions on the nodes make to the
// in-sandbox gateway, each carried here by its node (its session's
// preamble first, as the node's supervisor wrote it): control's gateway
// serves them (modelapi.Serve), as it does its own socket's in role all.
func (f *Fleet) Gateway() net.Listener { return f.gw }

// Egress is the connections sessions on the nodes make to the egress
// proxy, which runs here, on control: the node carries bytes and holds
// no secret. Each starts with the session's preamble, checked as the
// gateway's are.
func (f *Fleet) Egress() net.Listener { return f.eg }

// RelayPath and JoinPath are where control takes nodes: outside /api/,
// which is for people.
const (
	RelayPath = "/relay"
	JoinPath  = "/relay/join"
)

// Handler serves RelayPath (a node's connection) and JoinPath (a node's
// first contact, with its join token).
func (f *Fleet) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+RelayPath, relay.Handler(f.authenticate, f.accept, f.cfg.Relay))
	mux.HandleFunc("POST "+JoinPath, f.join)
	return mux
}

// JoinRequest and JoinAnswer are a node's first contact.
type JoinRequest struct {
	Token string `json:"token"`
	Name  string `json:"name"`
}

type JoinAnswer struct {
	NodeID     string    `json:"node_id"`
	Credential string    `json:"credential"`
	Expires    time.Time `json:"expires_at"`
}

func (f *Fleet) join(w http.ResponseWriter, r *http.Request) {
	var req JoinRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&req); err != nil {
		http.Error(w, "send {token, name}", http.StatusBadRequest)
		return
	}
	n, cred, expires, err := f.enroll.Join(r.Context(), req.Token, req.Name)
	if err != nil {
		status := http.StatusUnauthorized
		if corral.ErrorCode(err) != corral.EUNAUTH {
			status = http.StatusBadRequest
		}
		http.Error(w, corral.ErrorMessage(err), status)
		return
	}
	f.cfg.Log.Info("sandbox node joined", "node", n.ID, "name", n.Name)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(JoinAnswer{NodeID: n.ID, Credential: cred, Expires: expires})
}

// authenticate is the relay's: the node's credential, as a bearer token.
func (f *Fleet) authenticate(r *http.Request) (string, error) {
	cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", corral.Errorf(corral.EUNAUTH, "a node presents its credential as a bearer token")
	}
	n, err := f.enroll.Authenticate(r.Context(), cred)
	if err != nil {
		return "", err
	}
	if v := r.Header.Get(noderpc.VersionHeader); v != noderpc.Version {
		f.cfg.Log.Warn("a node of another version refused", "node", n.ID, "protocol", sanitize(v))
		return "", corral.Errorf(corral.EFORBIDDEN, "control speaks node protocol %s and this node %q: run the same corral release on control and its nodes", noderpc.Version, sanitize(v))
	}
	if err := f.vacant(n.ID); err != nil {
		return "", err
	}
	return n.ID, nil
}

// vacant refuses a connection with a node's credential while that node's
// relay is alive (it answers a ping): never a takeover, which would hand
// the node's calls, and its runs' gateway tokens, to whoever copied its
// credential. A relay whose node is gone (restarted, or its network cut)
// fails the ping, and the new connection is taken in its place. Each
// refusal is logged and counted for the admin (Refused).
func (f *Fleet) vacant(nodeID string) error {
	_, err := f.vacantFrom(nodeID)
	return err
}

// vacantFrom is vacant, also answering the member it found gone (nil for
// none), so that accept replaces only that one.
func (f *Fleet) vacantFrom(nodeID string) (*member, error) {
	f.mu.Lock()
	old := f.live[nodeID]
	f.mu.Unlock()
	if old == nil || !old.session.Alive() {
		return old, nil
	}
	f.mu.Lock()
	r := f.refused[nodeID]
	r.Count++
	r.Last = time.Now()
	f.refused[nodeID] = r
	f.mu.Unlock()
	f.cfg.Log.Warn("a second connection with a node's credential refused: the node's relay is alive", "node", nodeID, "refused", r.Count)
	return nil, corral.Errorf(corral.ECONFLICT, "this node is connected already: a second connection with its credential is refused")
}

// Refused says how many connections with the node's credential were
// refused while its relay was alive, and when the last was.
func (f *Fleet) Refused(nodeID string) Refusals {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused[nodeID]
}

// accept registers a node's connection and serves what the node asks of
// control on it until it ends. It takes the place of an earlier one only
// when that one's node is gone (vacant, asked again: two connections may
// have passed authenticate together).
func (f *Fleet) accept(nodeID string, s *relay.Session) {
	m := &member{rec: corral.NodeRecord{ID: nodeID}, session: s, node: noderpc.NewClient(s.Open), since: time.Now()}
	var old *member
	for {
		gone, err := f.vacantFrom(nodeID)
		if err != nil {
			s.Close()
			return
		}
		f.mu.Lock()
		if f.live[nodeID] == gone {
			old = gone
			break // still locked
		}
		f.mu.Unlock() // another connection came meanwhile: ask again
	}
	f.live[nodeID] = m
	delete(f.away, nodeID)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	if old != nil {
		old.session.Close() // its node is gone
	}
	f.cfg.Log.Info("sandbox node connected", "node", nodeID)
	go f.serve(m)
	go f.keep(m)
}

// keep records the node as seen while it is connected, and forgets it
// when its connection ends.
func (f *Fleet) keep(m *member) {
	t := time.NewTicker(f.cfg.Seen)
	defer t.Stop()
	ctx := context.Background()
	f.enroll.Seen(ctx, m.rec.ID)
	for {
		select {
		case <-m.session.Done():
			f.mu.Lock()
			if f.live[m.rec.ID] == m {
				delete(f.live, m.rec.ID)
				f.away[m.rec.ID] = time.Now()
			}
			f.mu.Unlock()
			f.enroll.Seen(ctx, m.rec.ID)
			f.cfg.Log.Warn("sandbox node disconnected", "node", m.rec.ID)
			return
		case <-t.C:
			f.enroll.Seen(ctx, m.rec.ID)
		}
	}
}

// What a node may ask of control, each a stream whose first line names
// it. The node is handed exactly what it asks for, built here.
const (
	askRenew   = "renew"   // a fresh credential for this node, as JSON
	askGateway = "gateway" // a session's connection to the gateway follows
	askEgress  = "egress"  // a session's connection to the egress proxy follows
)

func (f *Fleet) serve(m *member) {
	open := make(chan struct{}, f.cfg.MaxStreams)
	for {
		c, err := m.session.Accept()
		if err != nil {
			return
		}
		select {
		case open <- struct{}{}:
		default:
			f.cfg.Log.Warn("a node's stream refused: it has the most open", "node", m.rec.ID, "streams", f.cfg.MaxStreams)
			c.Close()
			continue
		}
		go func() {
			f.answer(m, &countedConn{Conn: c, done: func() { <-open }})
		}()
	}
}

// countedConn gives back its place among a node's open streams once, when
// it is closed.
type countedConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}

// askTimeout bounds how long a node's stream may take to say what it asks.
const askTimeout = 10 * time.Second

func (f *Fleet) answer(m *member, c net.Conn) {
	// A node is untrusted input: what it asks is one short line, read
	// from a 256-byte buffer (a longer one is refused unread), in time.
	br := bufio.NewReaderSize(c, 256)
	c.SetReadDeadline(time.Now().Add(askTimeout))
	line, err := br.ReadSlice('\n')
	if err != nil {
		c.Close()
		return
	}
	switch ask := strings.TrimSpace(string(line)); ask {
	case askRenew:
		defer c.Close()
		cred, expires, err := f.enroll.Rotate(context.Background(), m.rec.ID)
		if err != nil {
			f.cfg.Log.Error("node credential not renewed", "node", m.rec.ID, "err", err)
			return
		}
		json.NewEncoder(c).Encode(JoinAnswer{NodeID: m.rec.ID, Credential: cred, Expires: expires})
	case askGateway, askEgress:
		to := f.gw
		if ask == askEgress {
			to = f.eg
		}
		c, ok := f.gatewayConn(m, c, br)
		c.SetReadDeadline(time.Time{}) // the preamble is read; the call has no deadline here
		if !ok || !to.push(c) {
			c.Close()
		}
	default:
		c.Close()
	}
}

// gatewayConn reads the preamble of a session's gateway connection: a
// node carries them only for sessions it runs, so one cannot spend the
// token of another node's run (were it to learn one). The preamble is
// then read again by the gateway, as on this machine's socket.
func (f *Fleet) gatewayConn(m *member, c net.Conn, br *bufio.Reader) (net.Conn, bool) {
	line, err := br.ReadSlice('\n')
	run, ok := strings.CutPrefix(string(line), strings.TrimSuffix(corral.GatewayPreamble(""), "\n"))
	run = strings.TrimSuffix(run, "\n")
	if err != nil || !ok || run == "" || f.carries == nil || !f.carries(context.Background(), m.rec.ID, run) {
		f.cfg.Log.Warn("a node's gateway connection refused: it names no session of the node's", "node", m.rec.ID, "run", sanitize(run))
		return c, false
	}
	return &bufferedConn{Conn: c, r: io.MultiReader(strings.NewReader(string(line)), br)}, true
}

// sanitize bounds what a node wrote before it goes into a log line.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return s
}

// bufferedConn is a stream whose first bytes were read into r.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// Status is a node's status now.
func (f *Fleet) Status(rec corral.NodeRecord) string {
	f.mu.Lock()
	_, up := f.live[rec.ID]
	f.mu.Unlock()
	switch {
	case !up:
		return corral.NodeLost
	case rec.Draining:
		return corral.NodeDraining
	}
	return corral.NodeReady
}

// node is the live connection to a node.
func (f *Fleet) node(id string) (*member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.live[id]
	return m, ok
}

// await is the live connection to a node, waiting for the node to
// connect (again) until grace after it went away (or after this control
// first asked for it, when it has not been here since it started), or
// ctx ends: false when it did not come. So a node that stays away costs
// its calls one grace in all, not one each.
func (f *Fleet) await(ctx context.Context, id string, grace time.Duration) (*member, bool) {
	f.mu.Lock()
	since, ok := f.away[id]
	if !ok {
		// Connected (maybe just gone, not yet noticed), or never seen
		// since this control started: the grace counts from now.
		since = time.Now()
		if _, up := f.live[id]; !up {
			f.away[id] = since
		}
	}
	f.mu.Unlock()
	timer := time.NewTimer(time.Until(since.Add(grace)))
	defer timer.Stop()
	for {
		f.mu.Lock()
		m, ok := f.live[id]
		changed := f.changed
		f.mu.Unlock()
		if ok {
			select {
			case <-m.session.Done(): // gone, not yet forgotten
			default:
				return m, true
			}
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
	}
}

// Connected lists the connected nodes' ids.
func (f *Fleet) Connected() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.live))
	for id := range f.live {
		out = append(out, id)
	}
	return out
}

// Close drops every node's connection.
func (f *Fleet) Close() {
	f.mu.Lock()
	live := f.live
	f.live = map[string]*member{}
	f.mu.Unlock()
	for _, m := range live {
		m.session.Close()
	}
	f.gw.Close()
	f.eg.Close()
}

// conns is a net.Listener of connections handed to it.
type conns struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newConns() *conns { return &conns{ch: make(chan net.Conn), closed: make(chan struct{})} }

// push hands c to Accept; false when the listener is closed.
func (l *conns) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *conns) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *conns) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *conns) Addr() net.Addr { return relayAddr{} }

type relayAddr struct{}

func (relayAddr) Network() string { return "relay" }
func (relayAddr) String() string  { return "relay" }
