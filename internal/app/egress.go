package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"corral"
	"corral/internal/egress"
	"corral/internal/proxy"
	"corral/internal/relay"
	"corral/internal/runner"
)

// serveEgress starts the egress proxy the runs' sessions reach at
// corral.EgressAddr: on this machine's socket (role all), or on the
// connections the nodes carry (role control). It runs where the store and
// the key are, so a sandbox node never holds an agent's secret, not even
// for one connection; what that costs is measured in docs/benchmarks.md.
func (a *App) serveEgress(ca *proxy.CA, log *slog.Logger) error {
	c := a.cfg
	upstream, err := upstreamTLS(c.EgressCAFile)
	if err != nil {
		return err
	}
	var ln net.Listener
	if a.Fleet != nil {
		ln = a.Fleet.Egress()
	} else if ln, err = relay.ListenSocket(filepath.Join(c.Data, egressSocket)); err != nil {
		return err
	}
	a.Proxy = proxy.New(proxy.Config{
		Grant:    a.egressGrant,
		Dial:     egress.Policy{AllowPrivate: c.EgressAllowPrivate, Resolver: a.opt.resolver},
		CA:       ca,
		Upstream: upstream,
		MaxBytes: c.EgressMaxBytes,
		MaxConns: c.EgressMaxConns,
		Events:   egressEvents{a.Runner},
		Log:      log,
	})
	go a.Proxy.Serve(ln)
	a.defer_(func() { ln.Close() })
	return nil
}

// egressGrant is what a run reaches now, as the proxy takes it.
func (a *App) egressGrant(ctx context.Context, run string) (proxy.Grant, error) {
	g, err := a.Egress.Grant(ctx, run)
	if err != nil {
		return proxy.Grant{}, err
	}
	out := proxy.Grant{Rules: g.Rules, Headers: make([]proxy.Header, len(g.Headers))}
	for i, h := range g.Headers {
		out.Headers[i] = proxy.Header(h)
	}
	return out, nil
}

// egressEnded closes an ended run's connections through the proxy.
func (a *App) egressEnded(run string) {
	if a.Proxy != nil {
		a.Proxy.End(run)
	}
}

// upstreamTLS is what the proxy verifies upstream HTTPS against: the
// system's roots, and file's when set.
func upstreamTLS(file string) (*tls.Config, error) {
	if file == "" {
		return nil, nil
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, corral.Errorf(corral.EINVALID, "--egress-ca-file: %v", err)
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, corral.Errorf(corral.EINVALID, "--egress-ca-file: %s holds no PEM certificate", file)
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// egressEvents records what the proxy saw in the runs' traces.
type egressEvents struct{ r *runner.Runner }

func (e egressEvents) Denied(run string, d proxy.Denial) {
	e.r.EgressDenied(run, d.Host, d.Port, d.Method, d.Path, d.Reason)
}

func (e egressEvents) Traffic(run string, t proxy.Traffic) {
	e.r.EgressTraffic(run, t.Host, t.Requests, t.BytesIn, t.BytesOut)
}

func (e egressEvents) Exceeded(run, what string) { e.r.EgressExceeded(run, what) }
