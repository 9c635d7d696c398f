// Package relay is the one connection between control and a sandbox
// node: the node dials control (so a node needs no open port) with an
// HTTP request upgraded to a WebSocket, and both ends run yamux on it.
// Each call, command output, terminal and model stream is a stream of its
// own on that connection.
//
// Why these: a WebSocket passes the proxies and load balancers in front
// of control on the port browsers already use (coder/websocket, which
// the terminal uses too); yamux (hashicorp/yamux, the multiplexer of
// Consul and Nomad) gives each stream its own flow-control window, so a
// reader that stops reading stops its writer after at most one window,
// end to end, and never grows a buffer on either side; and it pings, so
// a peer that is gone is noticed within Config.Heartbeat + Config.Timeout
// (2 s + 5 s by default, inside the 10 s the design asks for).
//
// What crosses and who may send it is decided above this package: it
// carries bytes between two authenticated ends.
package relay

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"

	"corral"
)

// Config tunes both ends of a relay.
type Config struct {
	// Heartbeat is how often each end pings the other; Timeout how long a
	// ping (or any write) may wait before the connection counts as dead.
	// Defaults 2 s and 5 s.
	Heartbeat, Timeout time.Duration
	// Window is each stream's flow-control window: what a writer may have
	// in flight before its reader reads. Default 256 KiB.
	Window uint32
	// RootCAs are the CAs a node trusts control's certificate by, for a
	// wss:// control; nil is the system's.
	RootCAs *x509.CertPool
	Log     *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Heartbeat <= 0 {
		c.Heartbeat = 2 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Window < 256<<10 {
		c.Window = 256 << 10
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) yamux() *yamux.Config {
	y := yamux.DefaultConfig()
	y.EnableKeepAlive = true
	y.KeepAliveInterval = c.Heartbeat
	y.ConnectionWriteTimeout = c.Timeout
	y.MaxStreamWindowSize = c.Window
	y.StreamOpenTimeout = 2 * c.Timeout
	y.StreamCloseTimeout = 2 * c.Timeout
	y.LogOutput = io.Discard
	return y
}

// frameLimit bounds one WebSocket message: a yamux frame is at most a
// window plus its 12-byte header.
func (c Config) frameLimit() int64 { return int64(c.Window) + 64 }

// Session is one end of a relay connection. Either end may open streams
// and accept the other's.
type Session struct {
	y *yamux.Session
}

// Open opens a stream to the other end; it fails at once when the
// connection is gone.
func (s *Session) Open(ctx context.Context) (net.Conn, error) {
	type opened struct {
		c   net.Conn
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		c, err := s.y.Open()
		ch <- opened{c, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, unreachable(o.err)
		}
		return o.c, nil
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.c != nil {
				o.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Accept waits for the other end's next stream. Session is a
// net.Listener, so a server can serve on it.
func (s *Session) Accept() (net.Conn, error) { return s.y.Accept() }

// Addr is the connection's local address.
func (s *Session) Addr() net.Addr { return s.y.Addr() }

// Close ends the connection and every stream on it.
func (s *Session) Close() error { return s.y.Close() }

// Done is closed when the connection is gone: closed by either end, or
// dead (a heartbeat or a write that did not go through in time).
func (s *Session) Done() <-chan struct{} { return s.y.CloseChan() }

// Alive reports whether the other end answers a ping, within the relay's
// write timeout: a session whose peer is gone but not yet noticed is not.
func (s *Session) Alive() bool {
	select {
	case <-s.Done():
		return false
	default:
	}
	_, err := s.y.Ping()
	return err == nil
}

// Streams is how many streams are open now.
func (s *Session) Streams() int { return s.y.NumStreams() }

func unreachable(err error) error {
	return &corral.Error{Code: corral.EUNAVAIL, Message: "the relay to the sandbox node is down", Err: err}
}

// Dial connects to control at url (ws:// or wss://), sending header (the
// node's credential), and returns the node's end.
func Dial(ctx context.Context, url string, header http.Header, cfg Config) (*Session, error) {
	cfg = cfg.withDefaults()
	var made atomic.Pointer[coalescer]
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header,
		HTTPClient: dialClient(cfg.RootCAs, func(c *coalescer) { made.Store(c) })})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, &corral.Error{Code: corral.EUNAUTH, Message: "control refused the node's credential", Err: err}
		}
		if resp != nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusConflict) {
			// Control says why (Handler answers auth's message).
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			msg := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
			code := corral.EFORBIDDEN
			if resp.StatusCode == http.StatusConflict {
				code = corral.ECONFLICT
			}
			return nil, &corral.Error{Code: code, Message: "control refused the node: " + msg, Err: err}
		}
		return nil, unreachable(err)
	}
	c.SetReadLimit(cfg.frameLimit())
	// The connection outlives the dial's ctx: it ends with the session.
	var stream net.Conn = websocket.NetConn(context.Background(), c, websocket.MessageBinary)
	if co := made.Load(); co != nil {
		stream = &messages{Conn: stream, co: co}
	}
	y, err := yamux.Client(stream, cfg.yamux())
	if err != nil {
		c.CloseNow()
		return nil, unreachable(err)
	}
	return &Session{y: y}, nil
}

// Handler is control's end: it authenticates each node's request with
// auth (whose error is answered as is, and nothing is upgraded), upgrades
// it, and hands the session to accept, named by what auth returned.
// accept owns the session; the request ends when the session does.
func Handler(auth func(*http.Request) (string, error), accept func(nodeID string, s *Session), cfg Config) http.Handler {
	cfg = cfg.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := auth(r)
		if err != nil {
			status := http.StatusForbidden
			switch corral.ErrorCode(err) {
			case corral.EUNAUTH:
				status = http.StatusUnauthorized
			case corral.ECONFLICT:
				status = http.StatusConflict
			}
			http.Error(w, corral.ErrorMessage(err), status)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return // Accept has answered
		}
		c.SetReadLimit(cfg.frameLimit())
		y, err := yamux.Server(websocket.NetConn(context.Background(), c, websocket.MessageBinary), cfg.yamux())
		if err != nil {
			c.CloseNow()
			return
		}
		s := &Session{y: y}
		accept(id, s)
		<-s.Done()
	})
}

// IsGone reports whether err says the relay connection is gone.
func IsGone(err error) bool {
	return errors.Is(err, yamux.ErrSessionShutdown) || errors.Is(err, yamux.ErrKeepAliveTimeout) ||
		errors.Is(err, yamux.ErrConnectionReset) || errors.Is(err, io.EOF) || corral.ErrorCode(err) == corral.EUNAVAIL
}
