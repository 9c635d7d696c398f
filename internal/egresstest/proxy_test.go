package egresstest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// egressProxy is a stand-in for Corral's egress proxy, as small as one can
// be: it resolves every name with res, forwards plain HTTP requests (the
// go command's GOPROXY fetches) and tunnels CONNECT (npm's HTTPS). It
// returns the proxy's URL, for HTTP_PROXY and HTTPS_PROXY.
//
// The upstreams' names are under .test, reserved never to resolve in
// public DNS: a tool that reached them did so through this proxy.
func egressProxy(t *testing.T, res *net.Resolver) string {
	t.Helper()
	dialer := &net.Dialer{Resolver: res, Timeout: 10 * time.Second}
	forward := &httputil.ReverseProxy{
		// A request to a proxy carries an absolute URL: it names the
		// upstream already, so only the Host header is to keep.
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.Out.Host = pr.In.Host },
		Transport: &http.Transport{DialContext: dialer.DialContext},
	}

	// Hijacked connections outlive the server's Close: they are closed
	// here when the test ends, so no copy is left running.
	var mu sync.Mutex
	var open []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		open = append(open, c)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			c.Close()
		}
	})

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			forward.ServeHTTP(w, r)
			return
		}
		up, err := dialer.DialContext(r.Context(), "tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		track(up)
		down, buffered, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		track(down)
		if _, err := io.WriteString(down, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
			return
		}
		// The buffered reader holds what the client sent after CONNECT
		// before it saw the 200. Either side ending ends the tunnel.
		go func() { io.Copy(up, buffered); up.Close(); down.Close() }()
		go func() { io.Copy(down, up); up.Close(); down.Close() }()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// client is an http.Client that resolves names with res, as the egress
// proxy does, and trusts the authority in caFile (when not empty).
func client(t *testing.T, res *net.Resolver, caFile string) *http.Client {
	t.Helper()
	tlsConfig := &tls.Config{}
	if caFile != "" {
		pemBytes, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(pemBytes) {
			t.Fatalf("%s holds no certificate", caFile)
		}
	}
	dialer := &net.Dialer{Resolver: res, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: dialer.DialContext, TLSClientConfig: tlsConfig}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// lookPath finds a tool a test runs for real, or skips the test.
func lookPath(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: not running %s for real", name)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed: %v", name, err)
	}
	return p
}

// run runs a tool with exactly env (nothing of the test's environment, so
// a proxy or registry set there cannot change what is tested) and
// returns its standard output.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
