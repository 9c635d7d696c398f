package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"corral"
)

// The gauges read at each scrape.
var (
	runsActiveDesc = prometheus.NewDesc("corral_runs_active",
		"Runs not ended: admitted, running or paused.", nil, nil)
	changeSetsPendingDesc = prometheus.NewDesc("corral_change_sets_pending",
		"Change sets waiting for a person's decision.", nil, nil)
	nodesDesc = prometheus.NewDesc("corral_nodes",
		"Sandbox nodes enrolled with this control, by status.", []string{"status"}, nil)
	sessionsDesc = prometheus.NewDesc("corral_sandbox_sessions",
		"Runs' sandbox sessions running now: on this machine, or, on control, on its nodes.", nil, nil)
)

// nodeStatuses are corral_nodes' label values, each exported even at 0.
var nodeStatuses = []string{corral.NodeReady, corral.NodeDraining, corral.NodeLost}

// gauges is a prometheus.Collector that asks Gauges at each scrape.
type gauges struct{ g Gauges }

func newGauges(g Gauges) prometheus.Collector { return gauges{g} }

func (c gauges) Describe(ch chan<- *prometheus.Desc) {
	if c.g.Store != nil {
		ch <- runsActiveDesc
		ch <- changeSetsPendingDesc
	}
	if c.g.Nodes != nil {
		ch <- nodesDesc
	}
	if c.g.Sessions != nil {
		ch <- sessionsDesc
	}
}

// Collect reads each gauge; one that fails is reported as the scrape's
// error (served all the same, with the rest: promhttp.ContinueOnError).
func (c gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if c.g.Store != nil {
		if n, err := c.g.Store(ctx); err != nil {
			ch <- prometheus.NewInvalidMetric(runsActiveDesc, err)
		} else {
			ch <- prometheus.MustNewConstMetric(runsActiveDesc, prometheus.GaugeValue, float64(n.RunsActive))
			ch <- prometheus.MustNewConstMetric(changeSetsPendingDesc, prometheus.GaugeValue, float64(n.ChangeSetsPending))
		}
	}
	if c.g.Nodes != nil {
		if byStatus, err := c.g.Nodes(ctx); err != nil {
			ch <- prometheus.NewInvalidMetric(nodesDesc, err)
		} else {
			for _, s := range nodeStatuses {
				ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(byStatus[s]), s)
			}
		}
	}
	if c.g.Sessions != nil {
		if n, err := c.g.Sessions(ctx); err != nil {
			ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
		} else {
			ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n))
		}
	}
}
