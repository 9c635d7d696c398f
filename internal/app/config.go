package app

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"corral"
	"corral/internal/archive"
	"corral/internal/gateway"
	"corral/internal/role"
	"corral/internal/sanitize"
	"corral/internal/service"
	"corral/internal/store"
	"corral/internal/telemetry"
)

// Config is everything a server is built from: plain data, filled by
// cmd/corral from flags and the environment, or by a test. Check says
// whether it holds together.
type Config struct {
	Addr, Data, Role, Signup string
	// Database is --db (CORRAL_DATABASE_URL): a postgres:// URL puts the
	// store in PostgreSQL, which several control replicas may share;
	// empty keeps it in SQLite at DATA/corral.db. Never logged: it may
	// hold a password (PGPASSWORD or a ~/.pgpass keep it out of the URL).
	Database string
	// FailoverAfter is how long the control lease outlives its holder's
	// last renewal (--failover-after): how soon a standby takes over from
	// a control that died. 0: 15 s; at least 3 s.
	FailoverAfter time.Duration
	// Advertise is the URL the other controls on the store forward
	// requests to while this one serves (--advertise); empty: the listen
	// address, with this machine's name for an unspecified host.
	Advertise string
	// MetricsAddr, when set, serves /metrics, /healthz and /readyz there
	// without credentials (every role; a sandbox node listens on nothing
	// else).
	MetricsAddr   string
	SecureCookies bool
	ChangeTTL     time.Duration
	// The model provider: CORRAL_MODEL_BASE_URL, CORRAL_MODEL_API_KEY and
	// CORRAL_MODEL, from the environment only, so the key never shows in
	// a process listing.
	Model gateway.Config
	// SecretKey is CORRAL_SECRET_KEY (environment only, never logged):
	// the base64 of the key that seals credentials; empty uses
	// DATA/secret.key.
	SecretKey string
	// QuarantineAfter violations within QuarantineWindow quarantine an
	// agent.
	QuarantineAfter  int
	QuarantineWindow time.Duration
	// SessionGrace is how long a run's session outlives a server that
	// went away without coming back.
	SessionGrace time.Duration
	// ToolsDir holds the agent CLIs (make tools), mounted read-only into
	// the sessions of runs that use one.
	ToolsDir string
	// MaxSessions is the most runs' sessions this machine runs at once
	// (roles all and sandbox); 0: no bound.
	MaxSessions int
	// MaxConns caps open connections in all: 0 takes
	// netguard.DefaultMaxConns, or what the descriptor limit allows after
	// its reserve when that is less; more than the limit allows is lowered.
	// MaxConnsPerAddr caps those of one client address; 0 is no such cap.
	MaxConns, MaxConnsPerAddr int
	// TrustedProxies are reverse proxies: their X-Forwarded-For names the
	// client, and they are exempt from the per-address cap.
	TrustedProxies []netip.Prefix
	// GitCAFile, when set, is the only CA git trusts for https (a
	// self-hosted git server with a private CA); CloneMaxBytes bounds a
	// clone on disk (0: gitrepo's default).
	GitCAFile     string
	CloneMaxBytes int64
	// EgressAllowPrivate are the private, loopback or link-local ranges a
	// clone or push may reach all the same (--egress-allow-private): by
	// default only public addresses are.
	EgressAllowPrivate []netip.Prefix
	// EgressCAFile: CAs the egress proxy trusts for upstream HTTPS besides
	// the system's. EgressMaxBytes and EgressMaxConns bound what one run
	// exchanges through it (0: the defaults below).
	EgressCAFile   string
	EgressMaxBytes int64
	EgressMaxConns int64
	// Imports bounds an archive import (zero fields: archive's defaults).
	Imports archive.Limits
	// Delegation caps trees of delegated runs (zero fields: defaults; a
	// negative one: none allowed).
	Delegation corral.TreeCaps
	// PendingDisk bounds what pending change sets hold on disk, of all
	// one person's agents and of every agent.
	PendingDisk service.PendingDiskBounds
	// DocumentMaxBytes bounds one document; EmbedModel is the provider's
	// embedding model ("" ranks documents by BM25 alone).
	DocumentMaxBytes   int64
	EmbedModel         string
	RetrievalThreshold float64
	// OTLPEndpoint is the collector the runs' spans go to over OTLP/HTTP
	// (--otlp-endpoint): its base URL, or the whole URL of its traces. ""
	// traces nothing. Roles all and control; a sandbox node sends none.
	OTLPEndpoint string
	// A sandbox node's: control's URL, the one-time join token of its
	// first start (CORRAL_JOIN: environment only, like every secret), and
	// its name as admins see it.
	Control, Join, NodeName string
}

// ErrConfig marks a Config that does not hold together: the command line
// answers it as a usage error.
var ErrConfig = errors.New("usage")

// The egress proxy's bounds on one run, when the flags leave them 0: a
// dependency install is tens to hundreds of MB over a few hundred
// connections.
const (
	DefaultEgressMaxBytes = 4 << 30
	DefaultEgressMaxConns = 10000
)

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// checks are Config's validators, in the order their errors are told:
// first what the server is, then where it keeps things, then its bounds.
// Each may also settle a value: a path made absolute.
var checks = []func(*Config) error{
	checkRole,
	checkPaths,
	checkDurations,
	checkBounds,
	checkTracing,
}

// Check validates c, in order, and settles what needs it: every path
// handed to a child process (a session's supervisor starts in "/") is
// made absolute. A zero duration, size or count takes its default. An
// error wraps ErrConfig, but for an unknown role (EINVALID): a typo in a
// deploy variable is not a usage error.
func (c *Config) Check() error {
	for _, check := range checks {
		if err := check(c); err != nil {
			return err
		}
	}
	return nil
}

func checkRole(c *Config) error {
	r, err := role.Parse(c.Role)
	if err != nil {
		return err
	}
	if role.DialsControl(r) {
		if c.Control == "" {
			return configError("--role sandbox needs --control, control's URL (and --join TOKEN on its first start)")
		}
		for _, u := range strings.Split(c.Control, ",") {
			if _, err := sanitize.ServerURL(u); err != nil {
				return configError("--control must be control's http or https URL, such as https://corral.example.org, or several control replicas' separated by commas")
			}
		}
	}
	return nil
}

func checkPaths(c *Config) error {
	var err error
	if c.Data == "" {
		return configError("--data must name a directory")
	}
	if c.Data, err = filepath.Abs(c.Data); err != nil {
		return configError("--data: %v", err)
	}
	if c.Database != "" && !store.IsPostgresURL(c.Database) {
		return configError("--db must be a postgres:// URL (or empty, for SQLite in the data directory)")
	}
	if c.Advertise != "" {
		if _, err := sanitize.ServerURL(c.Advertise); err != nil {
			return configError("--advertise must be this control's http or https URL as the other controls reach it, such as http://10.0.0.5:8080")
		}
	}
	if c.ToolsDir != "" {
		if c.ToolsDir, err = filepath.Abs(c.ToolsDir); err != nil {
			return configError("--tools-dir: %v", err)
		}
	}
	if c.GitCAFile != "" {
		if _, err := os.Stat(c.GitCAFile); err != nil {
			return configError("--git-ca-file: %v", err)
		}
		// git runs in a workspace, where a relative path names nothing.
		if c.GitCAFile, err = filepath.Abs(c.GitCAFile); err != nil {
			return configError("--git-ca-file: %v", err)
		}
	}
	return nil
}

// checkDurations: a zero takes the default; nothing is negative.
func checkDurations(c *Config) error {
	switch {
	case c.SessionGrace < 0:
		return configError("--session-grace must be positive")
	case c.FailoverAfter != 0 && c.FailoverAfter < minFailoverAfter:
		return configError("--failover-after must be at least %v: a lease shorter than that lapses under load, and two controls would drive the same runs", minFailoverAfter)
	case c.ChangeTTL < 0:
		return configError("--change-ttl must be positive")
	case c.QuarantineAfter < 0 || c.QuarantineWindow < 0:
		return configError("--quarantine-after must be at least 1 and --quarantine-window positive")
	}
	return nil
}

func checkTracing(c *Config) error {
	if c.OTLPEndpoint == "" {
		return nil
	}
	if _, err := telemetry.EndpointURL(c.OTLPEndpoint); err != nil {
		return configError("--otlp-endpoint: %s", corral.ErrorMessage(err))
	}
	return nil
}

func checkBounds(c *Config) error {
	switch {
	case c.RetrievalThreshold < 0 || c.RetrievalThreshold > 1:
		return configError("--retrieval-threshold must be from 0 to 1")
	case c.MaxConns < 0 || c.MaxConnsPerAddr < 0:
		return configError("--max-conns and --max-conns-per-addr must not be negative")
	case c.MaxSessions < 0:
		return configError("--max-sessions must not be negative (0: no bound)")
	}
	for _, sz := range []struct {
		flag string
		v    int64
	}{
		{"clone-max-bytes", c.CloneMaxBytes},
		{"import-max-archive", c.Imports.MaxArchive},
		{"import-max-bytes", c.Imports.MaxBytes},
		{"import-max-files", c.Imports.MaxFiles},
		{"import-max-dirs", c.Imports.MaxDirs},
		{"import-max-file-size", c.Imports.MaxFileSize},
		{"document-max-bytes", c.DocumentMaxBytes},
		{"pending-disk-per-user", c.PendingDisk.PerUser},
		{"pending-disk-total", c.PendingDisk.Total},
		{"egress-max-bytes", c.EgressMaxBytes},
		{"egress-max-connections", c.EgressMaxConns},
	} {
		if sz.v < 0 { // 0 takes the default
			return configError("--%s must be positive", sz.flag)
		}
	}
	if c.Delegation.Tokens < 0 {
		return configError("--delegation-tokens must be 0 or more")
	}
	return nil
}
