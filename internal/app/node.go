package app

import (
	"context"
	"log/slog"
	"path/filepath"

	"corral"
	"corral/internal/driver"
	"corral/internal/egress"
	"corral/internal/gitrepo"
	"corral/internal/metrics"
	"corral/internal/node"
	"corral/internal/nodeagent"
	"corral/internal/role"
	"corral/internal/sandbox"
)

// newLocalNode is this machine as the node of its runs (roles all and
// sandbox): workspaces, stages and sessions under the data directory.
func newLocalNode(c Config, log *slog.Logger) (*node.Local, error) {
	return node.New(node.Config{
		Data: c.Data, UID: sandboxUser(), GID: sandboxUser(), Imports: c.Imports,
		Git:   gitrepo.Config{CAFile: c.GitCAFile, MaxBytes: c.CloneMaxBytes, Egress: egress.Policy{AllowPrivate: c.EgressAllowPrivate}},
		Grace: c.SessionGrace, Log: log,
		ToolsDir: c.ToolsDir, GatewaySocket: filepath.Join(c.Data, gatewaySocket),
		EgressSocket: filepath.Join(c.Data, egressSocket), MaxSessions: c.MaxSessions,
	})
}

// buildNode builds role sandbox: the workspaces and sessions of this
// machine, reached by control over the relay this node dials. It opens no
// database, reads no key and listens on no port but the metrics address,
// when it is given one.
func (a *App) buildNode(ctx context.Context) error {
	c, log := a.cfg, a.opt.log
	if err := prepareDataDir(c.Data, log); err != nil {
		return err
	}
	if err := sandbox.Available(); err != nil {
		log.Warn("agent runs will fail on this node: "+describe(err), "role", role.Sandbox)
	}
	if c.OTLPEndpoint != "" {
		// Its runs' spans are control's to make and send.
		log.Warn("--otlp-endpoint is ignored in role sandbox: control sends the runs' spans", "role", role.Sandbox)
	}
	local, err := newLocalNode(c, log)
	if err != nil {
		return err
	}
	a.Node = local
	a.defer_(local.Close) // the sessions go on, for the node's next start
	// No store, no gateway, no API: the node's metrics are its sessions
	// (and the process's).
	a.Metrics = metrics.New(metrics.Config{Gauges: metrics.Gauges{Sessions: a.sessionCount}})
	// Before control can touch a workspace: finish or roll back every
	// write a crash interrupted.
	if err := local.Recover(ctx); err != nil {
		return err
	}
	for _, d := range corral.AgentDrivers[1:] {
		if err := driver.Installed(c.ToolsDir, d); err != nil {
			log.Warn("agents with this driver will not run on this node: "+describe(err), "driver", d)
		}
	}
	a.agent, err = nodeagent.New(nodeagent.Config{Control: c.Control, Join: c.Join, Name: c.NodeName, Data: c.Data,
		Node: local, Gateway: filepath.Join(c.Data, gatewaySocket), Egress: filepath.Join(c.Data, egressSocket), Log: log})
	return err
}
