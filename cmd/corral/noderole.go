package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"corral"
	"corral/internal/driver"
	"corral/internal/egress"
	"corral/internal/gitrepo"
	"corral/internal/node"
	"corral/internal/nodeagent"
	"corral/internal/role"
	"corral/internal/sandbox"
)

// sandboxUser owns workspaces: the sandbox's host user when Corral runs as
// root (see sandbox.Config), else Corral itself, and then no chown is
// needed (0).
func sandboxUser() int {
	if os.Geteuid() == 0 {
		return 65534
	}
	return 0
}

// newLocalNode is this machine as the node of its runs (roles all and
// sandbox): workspaces, stages and sessions under the data directory.
func newLocalNode(c serveConfig, log *slog.Logger) (*node.Local, error) {
	return node.New(node.Config{
		Data: c.Data, UID: sandboxUser(), GID: sandboxUser(), Imports: c.Imports,
		Git:   gitrepo.Config{CAFile: c.GitCAFile, MaxBytes: c.CloneMaxBytes, Egress: egress.Policy{AllowPrivate: c.EgressAllowPrivate}},
		Grace: c.SessionGrace, Log: log,
		ToolsDir: c.ToolsDir, GatewaySocket: filepath.Join(c.Data, gatewaySocket), MaxSessions: c.MaxSessions,
	})
}

// runNode is role sandbox: the workspaces and sessions of this machine,
// reached by control over the relay this node dials. It opens no
// database, reads no key and listens on no port.
func runNode(ctx context.Context, c serveConfig, log *slog.Logger) error {
	if err := prepareDataDir(c.Data, log); err != nil {
		return err
	}
	if err := sandbox.Available(); err != nil {
		log.Warn("agent runs will fail on this node: "+describe(err), "role", role.Sandbox)
	}
	local, err := newLocalNode(c, log)
	if err != nil {
		return err
	}
	defer local.Close() // the sessions go on, for the node's next start
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
	agent, err := nodeagent.New(nodeagent.Config{Control: c.Control, Join: c.Join, Name: c.NodeName, Data: c.Data,
		Node: local, Gateway: filepath.Join(c.Data, gatewaySocket), Log: log})
	if err != nil {
		return err
	}
	log.Info("corral sandbox node", "version", buildVersion(), "control", c.Control, "data", c.Data)
	return agent.Run(ctx)
}
