package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"corral"
	"corral/internal/egress"
)

// maxHello bounds the bytes read while looking for a ClientHello; real
// ones are a few kilobytes, even with post-quantum key shares.
const maxHello = 32 << 10

var (
	errCap      = corral.Errorf(corral.EFORBIDDEN, "this run has crossed its egress cap")
	errNotTLS   = errors.New("not a TLS ClientHello")
	errHelloEnd = errors.New("ClientHello read")
	errFronting = errors.New("server name is not the tunnel's host")
)

// connect serves CONNECT host:port: it checks the host against the run's
// grant, resolves it, answers 200 and then tunnels the client's TLS or
// terminates it.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, rc *runConn) {
	host, port, ok := splitHostPort(r.Host)
	if !ok {
		refuse(w, http.StatusBadRequest, "CONNECT takes host:port")
		return
	}
	d := Denial{Host: host, Port: port}
	g, why := p.admission(r.Context(), rc)
	if why != "" {
		p.refuseConnect(w, rc, d, http.StatusForbidden, why)
		return
	}
	rule, ok := egress.Match(g.Rules, host, port)
	if !ok {
		p.refuseConnect(w, rc, d, http.StatusForbidden, notListed(host, port))
		return
	}
	addr, err := p.cfg.Dial.Resolve(r.Context(), host)
	if err != nil {
		status, reason := resolveRefusal(host, err)
		p.refuseConnect(w, rc, d, status, reason)
		return
	}
	headers := p.headersFor(g.Headers, host)
	terminate := len(rule.Methods) > 0 || len(rule.Paths) > 0 || len(headers) > 0
	if terminate && p.cfg.CA == nil {
		p.refuseConnect(w, rc, d, http.StatusBadGateway, "the proxy has no CA to check this host's requests with")
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.log.Warn("egress: hijack", "run", rc.run, "err", err)
		return
	}
	defer conn.Close()
	// What the client sent after its CONNECT (a ClientHello, sent early)
	// is in the server's buffer; after it, the connection is read as is.
	buffered, _ := brw.Reader.Peek(brw.Reader.Buffered())
	client := &readerConn{Conn: rc, r: io.MultiReader(bytes.NewReader(buffered), rc)}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	p.ledger.acquire(rc.acct, host)
	defer p.ledger.release(rc.acct, host)
	if terminate {
		p.terminate(rc, client, host, port, addr)
	} else {
		p.tunnel(rc, client, host, port, addr)
	}
}

// refuseConnect answers a CONNECT that may not go on, and tells why.
func (p *Proxy) refuseConnect(w http.ResponseWriter, rc *runConn, d Denial, status int, reason string) {
	d.Reason = reason
	p.deny(rc.run, d)
	// What the client sent after its CONNECT may be TLS already: the
	// connection cannot carry another request.
	w.Header().Set("Connection", "close")
	refuse(w, status, reason)
}

func notListed(host string, port int) string {
	return fmt.Sprintf("%s is not on this agent's allow-list", net.JoinHostPort(host, strconv.Itoa(port)))
}

// resolveRefusal is the answer to a host Resolve refused: 403 with its
// words for a private address (they name --egress-allow-private), 502
// for one that does not resolve.
func resolveRefusal(host string, err error) (int, string) {
	if corral.ErrorCode(err) == corral.EFORBIDDEN {
		return http.StatusForbidden, corral.ErrorMessage(err)
	}
	return http.StatusBadGateway, fmt.Sprintf("%s could not be resolved", host)
}

// splitHostPort reads an authority (host:port) as rules compare it.
func splitHostPort(authority string) (string, int, bool) {
	h, ps, err := net.SplitHostPort(authority)
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, false
	}
	host := egress.CanonicalHost(h)
	if host == "" || len(host) > 253 || strings.ContainsAny(host, "%/ \t") {
		return "", 0, false
	}
	return host, port, true
}

func isIP(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// tunnel passes the client's TLS through to host, once its ClientHello
// names host: a tunnel opened for an allowed front must not carry a
// connection to another site behind it (domain fronting).
func (p *Proxy) tunnel(rc *runConn, client *readerConn, host string, port int, addr netip.Addr) {
	d := Denial{Host: host, Port: port}
	rc.SetReadDeadline(time.Now().Add(helloWait))
	hello, name, err := readHello(client)
	rc.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		d.Reason = fmt.Sprintf("what was sent through the tunnel to %s is not TLS", net.JoinHostPort(host, strconv.Itoa(port)))
	case name == "" && !isIP(host):
		// Without a name the server would pick its default site, which
		// need not be host's.
		d.Reason = fmt.Sprintf("the TLS client named no server; a tunnel to %s must name it", host)
	case name != "" && !strings.EqualFold(strings.TrimSuffix(name, "."), host):
		d.Reason = fmt.Sprintf("server name %q is not the host the tunnel was opened for (%s)", bound(name), host)
	}
	if d.Reason != "" {
		p.deny(rc.run, d)
		return
	}
	up, err := p.dial(context.Background(), rc.acct, host, addr, port)
	if err != nil {
		p.log.Debug("egress: dial", "run", rc.run, "host", host, "err", err)
		return
	}
	defer up.Close()
	p.ledger.request(rc.acct, host)
	if _, err := up.Write(hello); err != nil {
		return
	}
	p.splice(rc, client, up)
}

// readHello reads the client's ClientHello, keeping every byte it read,
// and answers those bytes and the server name (SNI) they ask for. The
// parsing is crypto/tls's own, stopped as soon as the hello is read: a
// recording connection feeds it, and whatever it answers is discarded.
func readHello(client io.Reader) ([]byte, string, error) {
	rec := &helloConn{r: io.LimitReader(client, maxHello)}
	var name string
	var read bool
	tc := tls.Server(rec, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, read = h.ServerName, true
		return nil, errHelloEnd
	}})
	tc.Handshake()
	if !read {
		return nil, "", errNotTLS
	}
	return rec.buf.Bytes(), name, nil
}

// helloConn is the connection readHello's TLS server reads from: reads
// are recorded, writes (an alert) go nowhere.
type helloConn struct {
	r   io.Reader
	buf bytes.Buffer
}

func (c *helloConn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.buf.Write(b[:n])
	return n, err
}
func (c *helloConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *helloConn) Close() error                     { return nil }
func (c *helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *helloConn) SetDeadline(time.Time) error      { return nil }
func (c *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (c *helloConn) SetWriteDeadline(time.Time) error { return nil }

// dial connects to host at its pinned address, counted against the run's
// cap on connections and metered against its cap on bytes.
func (p *Proxy) dial(ctx context.Context, a *account, host string, addr netip.Addr, port int) (*meteredConn, error) {
	if !p.ledger.dial(a) {
		return nil, errCap
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		return nil, err
	}
	m := &meteredConn{Conn: c, l: p.ledger, a: a, host: host}
	if !p.ledger.track(a, m) {
		c.Close()
		return nil, errCap
	}
	return m, nil
}

// splice copies both ways until both ends are done. An end that finishes
// sending is half-closed on the other side, so that the answer can still
// come; a connection that moves nothing either way for IdleTimeout ends.
func (p *Proxy) splice(rc *runConn, client io.Reader, up *meteredConn) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := p.pipe(up, client, rc, &last); err != nil {
			rc.Close()
			up.Close()
			return
		}
		up.CloseWrite()
	}()
	if err := p.pipe(rc, up, up, &last); err != nil {
		rc.Close()
		up.Close()
	} else {
		rc.CloseWrite()
	}
	wg.Wait()
}

// bufPool holds splice's buffers: large enough that a download moves in
// few system calls, reused so that a thousand tunnels cost no garbage.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// pipe copies src to dst until src ends (nil) or either fails. Its read
// deadline is pushed on while the other direction is busy, so that a
// download is not ended because its request side is quiet.
func (p *Proxy) pipe(dst io.Writer, src io.Reader, deadline net.Conn, last *atomic.Int64) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	idle := p.cfg.IdleTimeout
	deadline.SetReadDeadline(time.Now().Add(idle))
	for {
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		switch {
		case err == nil:
		case err == io.EOF:
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			quiet := time.Since(time.Unix(0, last.Load()))
			if quiet >= idle {
				return err
			}
			deadline.SetReadDeadline(time.Now().Add(idle - quiet))
		default:
			return err
		}
	}
}
