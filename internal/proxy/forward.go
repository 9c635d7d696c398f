package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"

	"corral"
	"corral/internal/egress"
)

// This file is the proxy's requests: plain HTTP ones a client sends in
// absolute form, and those it sends inside a terminated tunnel. Each is
// checked against the grant of the moment and forwarded with the run's
// secrets for its host.

// plainState is what a client connection's plain HTTP requests share:
// one transport (so that keep-alive works upstream too) and the hosts it
// reached, whose traffic is the connection's until it closes.
type plainState struct {
	tr    *http.Transport
	hosts map[string]bool
}

// end closes the transport's connections and gives up the connection's
// share of its hosts' traffic.
func (s *plainState) end(p *Proxy, a *account) {
	s.tr.CloseIdleConnections()
	for h := range s.hosts {
		p.ledger.release(a, h)
	}
}

// plainFor answers rc's plain state with host among its hosts; nil once rc
// is closed.
func (p *Proxy) plainFor(rc *runConn, host string) *plainState {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.closed {
		return nil
	}
	if rc.plain == nil {
		rc.plain = &plainState{tr: p.plainTransport(rc.acct), hosts: map[string]bool{}}
	}
	if !rc.plain.hosts[host] {
		rc.plain.hosts[host] = true
		p.ledger.acquire(rc.acct, host)
	}
	return rc.plain
}

// plainTransport dials each host at the address Resolve pins for it.
func (p *Proxy) plainTransport(a *account) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, hostport string) (net.Conn, error) {
			host, port, ok := splitHostPort(hostport)
			if !ok {
				return nil, fmt.Errorf("egress: dial %q", hostport)
			}
			addr, err := p.cfg.Dial.Resolve(ctx, host)
			if err != nil {
				return nil, err
			}
			return p.dial(ctx, a, host, addr, port)
		},
		DisableCompression:  true, // pass the body on as it came
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     p.cfg.IdleTimeout,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
}

// plain serves a plain HTTP request in absolute form (GET http://host/x).
func (p *Proxy) plain(w http.ResponseWriter, r *http.Request, rc *runConn) {
	host := egress.CanonicalHost(r.URL.Hostname())
	port := 80
	if ps := r.URL.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			refuse(w, http.StatusBadRequest, "the URL's port is not a port")
			return
		}
		port = n
	}
	d := Denial{Host: host, Port: port, Method: r.Method, Path: r.URL.EscapedPath()}
	g, why := p.admission(r.Context(), rc)
	if why == "" {
		why = p.requestRefusal(g, r, host, port)
	}
	if why != "" {
		p.refuseRequest(w, rc, d, why)
		return
	}
	st := p.plainFor(rc, host)
	if st == nil {
		return // the connection was closed under us: a cap was crossed
	}
	p.ledger.request(rc.acct, host)
	p.forward(w, r, rc, d, "http", p.headersFor(g.Headers, host), st.tr)
}

// requestRefusal says why g does not allow r to host:port, or "".
func (p *Proxy) requestRefusal(g Grant, r *http.Request, host string, port int) string {
	rule, ok := egress.Match(g.Rules, host, port)
	if !ok {
		return notListed(host, port)
	}
	if why := egress.Refusal(rule, r.Method, r.URL.RequestURI()); why != "" {
		return why
	}
	// After a protocol switch the proxy sees no more requests: a switch to
	// HTTP/2 (h2c) would carry requests past the rule's methods and paths.
	// A WebSocket carries messages, not requests, and is the one allowed.
	if httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") {
		if up := r.Header.Get("Upgrade"); !strings.EqualFold(up, "websocket") {
			return fmt.Sprintf("switching to %q is not allowed through the egress proxy (only websocket is)", bound(up))
		}
	}
	return ""
}

// refuseRequest answers a request that may not go on, and tells why.
func (p *Proxy) refuseRequest(w http.ResponseWriter, rc *runConn, d Denial, reason string) {
	d.Reason = reason
	p.deny(rc.run, d)
	refuse(w, http.StatusForbidden, reason)
}

// headersFor are the secrets of g to set on requests to host. One whose
// name or value HTTP cannot carry is left out (and logged by name only).
func (p *Proxy) headersFor(hs []Header, host string) []Header {
	var out []Header
	for _, h := range hs {
		if !egress.MatchHost(h.Host, host) {
			continue
		}
		if !httpguts.ValidHeaderFieldName(h.Name) || !httpguts.ValidHeaderFieldValue(h.Value) {
			p.log.Warn("egress: a secret header HTTP cannot carry is left out", "host", host, "header", bound(h.Name))
			continue
		}
		out = append(out, h)
	}
	return out
}

// forward sends r on to d's host over tr with the secret headers set, and
// copies the answer back. Hop-by-hop and Proxy-* headers are dropped both
// ways; the client's own values of the secret headers are replaced.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, rc *runConn, d Denial, scheme string, headers []Header, tr http.RoundTripper) {
	authority := d.Host
	if isIP(authority) && strings.Contains(authority, ":") {
		authority = "[" + authority + "]"
	}
	if !(scheme == "http" && d.Port == 80 || scheme == "https" && d.Port == 443) {
		authority += ":" + strconv.Itoa(d.Port)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = scheme, authority, authority
			for k := range pr.Out.Header {
				if strings.HasPrefix(k, "Proxy-") {
					delete(pr.Out.Header, k)
				}
			}
			for _, h := range headers {
				pr.Out.Header.Set(h.Name, h.Value)
			}
		},
		Transport: tr,
		ModifyResponse: func(resp *http.Response) error {
			for k := range resp.Header {
				if strings.HasPrefix(k, "Proxy-") {
					delete(resp.Header, k)
				}
			}
			return nil
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var ce *corral.Error
			if errors.As(err, &ce) { // Resolve's refusals, and the caps
				status, reason := resolveRefusal(d.Host, err)
				d.Reason = reason
				p.deny(rc.run, d)
				refuse(w, status, reason)
				return
			}
			p.log.Debug("egress: upstream", "run", rc.run, "host", d.Host, "port", d.Port, "err", err)
			refuse(w, http.StatusBadGateway, fmt.Sprintf("%s could not be reached", authority))
		},
	}
	rp.ServeHTTP(w, r)
}

// terminated is a CONNECT tunnel whose TLS the proxy ends: each request
// inside is checked and forwarded on a TLS connection of the proxy's own
// to the host's pinned address.
type terminated struct {
	p    *Proxy
	rc   *runConn
	host string
	port int
	tr   *http.Transport
}

// terminate ends the client's TLS with a certificate for host from the CA
// and serves the requests inside until the client is done.
func (p *Proxy) terminate(rc *runConn, client *readerConn, host string, port int, addr netip.Addr) {
	var asked string // a server name other than host, if the client asked one
	tc := tls.Server(client, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"}, // one request at a time, each one seen
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			// No name is allowed here: the certificate and the upstream
			// connection are host's whatever the client asks.
			if h.ServerName != "" && !strings.EqualFold(strings.TrimSuffix(h.ServerName, "."), host) {
				asked = h.ServerName
				return nil, errFronting
			}
			return p.cfg.CA.leaf(host)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), helloWait)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		if asked != "" {
			p.deny(rc.run, Denial{Host: host, Port: port,
				Reason: fmt.Sprintf("server name %q is not the host the tunnel was opened for (%s)", bound(asked), host)})
		} else {
			p.log.Debug("egress: TLS handshake with the client", "run", rc.run, "host", host, "err", err)
		}
		return
	}
	t := &terminated{p: p, rc: rc, host: host, port: port, tr: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return p.dial(ctx, rc.acct, host, addr, port)
		},
		TLSClientConfig:     upstreamTLS(p.cfg.Upstream, host),
		DisableCompression:  true,
		MaxIdleConnsPerHost: 1, // the client's requests come one at a time
		IdleConnTimeout:     p.cfg.IdleTimeout,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
	}}
	defer t.tr.CloseIdleConnections()
	srv := &http.Server{
		Handler:           t,
		ReadHeaderTimeout: headerWait,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	srv.Serve(newOneConnListener(tc))
}

// upstreamTLS is the client side of a terminated host's upstream TLS:
// verified for host against base's roots (the system's when base is nil).
func upstreamTLS(base *tls.Config, host string) *tls.Config {
	c := &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	if base != nil {
		c.RootCAs = base.RootCAs
	}
	return c
}

func (t *terminated) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, rc := t.p, t.rc
	d := Denial{Host: t.host, Port: t.port, Method: r.Method, Path: r.URL.EscapedPath()}
	if r.Method == http.MethodConnect {
		p.refuseRequest(w, rc, d, "a CONNECT inside a tunnel is not allowed")
		return
	}
	// The Host a request names must be the tunnel's: the upstream
	// connection is, and a server that routes by Host must not be asked
	// for another site on it.
	if hostOf(r.Host) != t.host {
		p.refuseRequest(w, rc, d, fmt.Sprintf("the request's Host %q is not the host the tunnel was opened for (%s)", bound(r.Host), t.host))
		return
	}
	g, why := p.admission(r.Context(), rc)
	if why == "" {
		why = p.requestRefusal(g, r, t.host, t.port)
	}
	if why != "" {
		p.refuseRequest(w, rc, d, why)
		return
	}
	p.ledger.request(rc.acct, t.host)
	p.forward(w, r, rc, d, "https", p.headersFor(g.Headers, t.host), t.tr)
}

// hostOf is the host of a Host header, without its port, as rules
// compare it.
func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return egress.CanonicalHost(h)
	}
	return egress.CanonicalHost(hostport)
}

// oneConnListener hands http.Server one connection, then waits for it to
// close before saying it is done, so that Serve returns when the tunnel
// ends and not before.
type oneConnListener struct {
	conn   net.Conn
	ch     chan net.Conn
	closed chan struct{}
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{conn: c, ch: make(chan net.Conn, 1), closed: make(chan struct{})}
	l.ch <- &notifyConn{Conn: c, closed: l.closed}
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }

// notifyConn tells its listener when it closes.
type notifyConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}
