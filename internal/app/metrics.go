package app

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"corral/internal/metrics"
)

// newMetrics makes the metrics of roles all and control: the model label
// takes the configured models, and the gauges are read from the store,
// the fleet and the sessions at each scrape.
func (a *App) newMetrics() *metrics.Metrics {
	c := a.cfg
	return metrics.New(metrics.Config{
		Models:   []string{c.Model.Model, c.EmbedModel},
		Provider: metrics.ProviderName(c.Model.BaseURL),
		Gauges:   metrics.Gauges{Store: a.storeCounts, Nodes: a.nodeCounts, Sessions: a.sessionCount},
	})
}

func (a *App) storeCounts(ctx context.Context) (metrics.StoreCounts, error) {
	active, pending, err := a.Store.Counts(ctx)
	return metrics.StoreCounts{RunsActive: active, ChangeSetsPending: pending}, err
}

// nodeCounts counts control's nodes by status; role all has none.
func (a *App) nodeCounts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	if a.Fleet == nil {
		return out, nil
	}
	nodes, err := a.Store.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		out[a.Fleet.Status(n)]++
	}
	return out, nil
}

// sessionCount counts the runs' sessions: this machine's (roles all and
// sandbox), or those control started on its nodes.
func (a *App) sessionCount(ctx context.Context) (int, error) {
	if a.Node != nil {
		load, err := a.Node.Load(ctx)
		return load.Sessions, err
	}
	nodes, err := a.Store.Nodes(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range nodes {
		n += a.Router.Sessions(rec.ID)
	}
	return n, nil
}

// listenMetrics binds Config.MetricsAddr, when it names one: before
// anything is built, so a taken address stops the start as the main
// one does.
func (a *App) listenMetrics() error {
	if a.cfg.MetricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (--metrics-addr): %w", a.cfg.MetricsAddr, err)
	}
	a.metricsLn = ln
	a.defer_(func() { ln.Close() })
	return nil
}

// serveMetrics serves /metrics, /healthz and /readyz on the metrics
// address, to whoever reaches it (an operator's network: no credential
// is asked), from the moment the server is built.
func (a *App) serveMetrics() {
	if a.metricsLn == nil {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.Metrics.Handler())
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	srv := newHTTPServer(mux, a.opt.log, defaultTimeouts)
	go srv.Serve(a.metricsLn)
	a.defer_(func() { srv.Close() })
}

// MetricsAddr is the address the metrics are served on without
// credentials ("" without Config.MetricsAddr).
func (a *App) MetricsAddr() string {
	if a.metricsLn == nil {
		return ""
	}
	return a.metricsLn.Addr().String()
}
