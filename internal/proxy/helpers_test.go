package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/egress"
	"corral/internal/poll"
)

// The tests run everything on loopback: upstreams are httptest servers
// reached as "localhost" (or 127.0.0.1), which the proxy may reach only
// because each fixture allows 127.0.0.0/8, as an operator would allow an
// internal mirror.

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// noDNS resolves from /etc/hosts only: a test never waits on a network
// resolver, and a name not in the file fails at once.
var noDNS = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no DNS in tests")
}}

// upstreamCert is the certificate of every test upstream: localhost and
// 127.0.0.1, self-signed, so that it is its own root.
var upstreamCert = sync.OnceValues(func() (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "test upstream"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
})

// upstream is a test server that records what reaches it.
type upstream struct {
	*httptest.Server
	port int

	mu       sync.Mutex
	conns    int
	requests []*http.Request // headers and paths only; bodies are drained
}

// newUpstream starts an upstream, over TLS when tlsOn. GET /big?n=N
// answers N bytes; any other path answers "hello <path>".
func newUpstream(t testing.TB, tlsOn bool) *upstream {
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.requests = append(u.requests, r)
		u.mu.Unlock()
		if r.URL.Path == "/big" {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			w.Header().Set("Content-Length", strconv.Itoa(n))
			writeZeros(w, n)
			return
		}
		io.WriteString(w, "hello "+r.URL.Path)
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.mu.Lock()
			u.conns++
			u.mu.Unlock()
		}
	}
	if tlsOn {
		cert, _ := upstreamCert()
		u.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		u.StartTLS()
	} else {
		u.Start()
	}
	t.Cleanup(u.Close)
	u.port = u.Listener.Addr().(*net.TCPAddr).Port
	return u
}

var zeros = make([]byte, 256<<10)

func writeZeros(w io.Writer, n int) {
	for n > 0 {
		k := min(n, len(zeros))
		if _, err := w.Write(zeros[:k]); err != nil {
			return
		}
		n -= k
	}
}

// seen answers the requests that reached u and the connections made to it.
func (u *upstream) seen() ([]*http.Request, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.requests...), u.conns
}

// url is u's address for path under the name host.
func (u *upstream) url(host, path string) string {
	scheme := "http"
	if u.TLS != nil {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s:%d%s", scheme, host, u.port, path)
}

// recorder hears the proxy's events.
type recorder struct {
	mu       sync.Mutex
	denied   []Denial
	traffic  []Traffic
	exceeded []string
	runs     []string // the run of every event, in order
}

func (r *recorder) Denied(run string, d Denial) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.denied = append(r.denied, d)
	r.runs = append(r.runs, run)
}

func (r *recorder) Traffic(run string, t Traffic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.traffic = append(r.traffic, t)
	r.runs = append(r.runs, run)
}

func (r *recorder) Exceeded(run, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exceeded = append(r.exceeded, what)
	r.runs = append(r.runs, run)
}

func (r *recorder) snapshot() (denied []Denial, traffic []Traffic, exceeded []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Denial(nil), r.denied...), append([]Traffic(nil), r.traffic...), append([]string(nil), r.exceeded...)
}

// syncBuffer is a log's destination, written by many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fixture is a proxy serving on loopback, with a grant the test sets.
type fixture struct {
	t    testing.TB
	p    *Proxy
	ln   net.Listener
	ev   *recorder
	logs *syncBuffer
	ca   *CA
	pool *x509.CertPool // the upstreams' root and the proxy's CA

	mu       sync.Mutex
	grant    Grant
	grantErr error
	dials    int // connections the test's clients made to the proxy
}

func newFixture(t testing.TB, opts ...func(*Config)) *fixture {
	ca, err := LoadCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, upPool := upstreamCert()
	f := &fixture{t: t, ev: &recorder{}, logs: &syncBuffer{}, ca: ca, pool: upPool.Clone()}
	f.pool.AppendCertsFromPEM(ca.CertPEM())
	cfg := Config{
		Grant:    f.currentGrant,
		Dial:     egress.Policy{AllowPrivate: loopback, Resolver: noDNS},
		CA:       ca,
		Upstream: &tls.Config{RootCAs: upPool},
		Events:   f.ev,
		Log:      slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	f.p = New(cfg)
	f.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- f.p.Serve(f.ln) }()
	t.Cleanup(func() {
		f.ln.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(poll.Patience):
			t.Errorf("Serve did not return after its listener closed")
		}
	})
	return f
}

func (f *fixture) currentGrant(ctx context.Context, run string) (Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.grant, f.grantErr
}

func (f *fixture) setGrant(g Grant, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grant, f.grantErr = g, err
}

func (f *fixture) allow(rules ...corral.EgressRule) { f.setGrant(Grant{Rules: rules}, nil) }

// dial connects to the proxy as the node would for run: the preamble
// first.
func (f *fixture) dial(run string) net.Conn {
	f.t.Helper()
	c, err := net.Dial("tcp", f.ln.Addr().String())
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := io.WriteString(c, corral.GatewayPreamble(run)); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.dials++
	f.mu.Unlock()
	f.t.Cleanup(func() { c.Close() })
	return c
}

// rawDial connects to the proxy without a preamble.
func (f *fixture) rawDial() net.Conn {
	f.t.Helper()
	c, err := net.Dial("tcp", f.ln.Addr().String())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

// client is an HTTP client inside run's sandbox: every URL through the
// proxy, trusting the upstreams and the proxy's CA.
func (f *fixture) client(run string, keepAlive bool) *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "127.0.0.1:41301"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return f.dial(run), nil
		},
		TLSClientConfig:   &tls.Config{RootCAs: f.pool},
		DisableKeepAlives: !keepAlive,
	}
	f.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: poll.Patience}
}

// connect opens a tunnel to authority through the proxy for run and
// answers the connection and the proxy's response.
func (f *fixture) connect(run, authority string) (net.Conn, *http.Response) {
	f.t.Helper()
	c := f.dial(run)
	c.SetDeadline(time.Now().Add(poll.Patience))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		f.t.Fatalf("CONNECT %s: %v", authority, err)
	}
	return c, resp
}

// body reads a response's body whole.
func body(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

// closedUnanswered waits for c to be closed by the proxy without a byte
// sent back.
func closedUnanswered(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(poll.Patience))
	b := make([]byte, 1)
	n, err := c.Read(b)
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes (%q), %v; want the connection closed unanswered", n, b[:n], err)
	}
}

func (f *fixture) waitTraffic(n int) []Traffic {
	f.t.Helper()
	var got []Traffic
	poll.Until(f.t, fmt.Sprintf("%d traffic summaries", n), func() bool {
		_, got, _ = f.ev.snapshot()
		return len(got) >= n
	})
	return got
}

// hasDenial fails t unless a denial like want (its Reason a substring)
// was told.
func (f *fixture) hasDenial(want Denial) Denial {
	f.t.Helper()
	denied, _, _ := f.ev.snapshot()
	for _, d := range denied {
		if d.Host == want.Host && d.Port == want.Port && d.Method == want.Method && d.Path == want.Path && strings.Contains(d.Reason, want.Reason) {
			return d
		}
	}
	f.t.Fatalf("denials %+v, want one like %+v", denied, want)
	return Denial{}
}
