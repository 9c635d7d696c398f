// Package node is the machine that holds agents' workspaces and runs'
// sandboxes, on this machine: it implements corral.Trees over workspace
// (persistent workspaces, staged trees, the apply journal), gitrepo (a
// workspace that is a repository) and archive (imports and downloads),
// and corral.Sessions over the sandbox and one supervisor process per
// session (internal/supervisor).
// Everything lives under the data directory by id, so a server that comes
// back after a crash finds it again: workspaces/<agent>, stages/<stage>,
// journals/<agent>, sessions/<run>, and the temporary imports/, clones/
// and moves/.
package node

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"corral"
	"corral/internal/archive"
	"corral/internal/gitrepo"
	"corral/internal/keylock"
	"corral/internal/sandbox"
	"corral/internal/supervisor"
	"corral/internal/workspace"
)

// Config is where and how the node keeps trees and runs sessions.
type Config struct {
	// Data is the data directory; the node's directories live under it.
	Data string
	// UID and GID own persistent workspaces and the writable parts of
	// staged trees: the sandbox's host user (0 leaves owners alone).
	UID, GID  int
	NoOverlay bool           // stage by copying even where overlayfs works
	Imports   archive.Limits // bound an import; zero fields take archive's
	// Git runs git. Its Tree limits are set from Imports: a clone obeys
	// the import caps on files, directories and bytes.
	Git gitrepo.Config

	Sandbox sandbox.Config
	// Grace is how long a session outlives a server that went away
	// without coming back. Default 10 minutes.
	Grace time.Duration
	// Exe is the binary started as the supervisor; "" for this one.
	Exe string
	// GatewaySocket is the server's gateway, for sessions that have it.
	GatewaySocket string
	// EgressSocket is the egress proxy, for sessions that have it.
	EgressSocket string
	// ToolsDir holds the agent CLIs (make tools), bound read-only at
	// corral.ToolsDir into the sessions that run one.
	ToolsDir string
	// MaxSessions is the most sessions the node runs at once; a start past
	// it is refused (EADMISSION). 0: no bound.
	MaxSessions int
	Log         *slog.Logger
}

// Local is corral.Trees and corral.Sessions on this machine. Recover,
// EndAll and Close are its owner's, at start-up and shut-down.
type Local struct {
	cfg Config

	// writers serialises everything that writes one agent's workspace
	// (applies, uploads, imports, deletes, clones, commits) or fixes a
	// stage's view of it (staging, manifests): an apply's journal assumes
	// nobody else changes the tree under it, and an open stage must hear
	// of every change (keepBases).
	writers keylock.Map

	// open are the stages whose manifest is not taken yet, by agent and
	// stage id: the runs working on a workspace now. Guarded by mu; only
	// changed while the agent's writers lock is held.
	mu      sync.Mutex
	open    map[string]map[string]*workspace.Stage
	clients map[string]*supervisor.Client // by session
	// starting holds session starts one at a time while the node is
	// bounded: a count and a start are one step.
	starting sync.Mutex
}

var (
	_ corral.Trees    = (*Local)(nil)
	_ corral.Sessions = (*Local)(nil)
)

// New returns the local node. What an earlier process left half done in
// imports/, clones/ and moves/ is removed: no import, clone or move
// survives a process.
// Nothing is started until a session is.
func New(cfg Config) (*Local, error) {
	// Sessions' supervisors start in "/": a relative data directory would
	// put their files at the root of the host's filesystem.
	if !filepath.IsAbs(cfg.Data) {
		return nil, corral.Errorf(corral.EINVALID, "the data directory %q is not an absolute path", cfg.Data)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	imports := cfg.Imports.WithDefaults()
	cfg.Git.Tree = gitrepo.TreeLimits{MaxFiles: imports.MaxFiles, MaxDirs: imports.MaxDirs, MaxBytes: imports.MaxBytes}
	l := &Local{cfg: cfg, open: map[string]map[string]*workspace.Stage{}, clients: map[string]*supervisor.Client{}}
	for _, d := range []string{l.importsDir(), l.clonesDir(), l.movesDir()} {
		if err := os.RemoveAll(d); err != nil {
			return nil, corral.Internal("node directories", err)
		}
	}
	if err := os.MkdirAll(l.sessionsDir(), 0o700); err != nil {
		return nil, corral.Internal("sessions directory", err)
	}
	return l, nil
}

func (l *Local) workspaceDir(agentID string) string {
	return filepath.Join(l.cfg.Data, "workspaces", agentID)
}
func (l *Local) stagesDir() string              { return filepath.Join(l.cfg.Data, "stages") }
func (l *Local) stageDir(id string) string      { return filepath.Join(l.stagesDir(), id) }
func (l *Local) journalsDir() string            { return filepath.Join(l.cfg.Data, "journals") }
func (l *Local) journalDir(agent string) string { return filepath.Join(l.journalsDir(), agent) }
func (l *Local) importsDir() string             { return filepath.Join(l.cfg.Data, "imports") }
func (l *Local) clonesDir() string              { return filepath.Join(l.cfg.Data, "clones") }
func (l *Local) movesDir() string               { return filepath.Join(l.cfg.Data, "moves") }
func (l *Local) sessionsDir() string            { return filepath.Join(l.cfg.Data, "sessions") }
