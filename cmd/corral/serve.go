package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"corral"

	"corral/internal/app"
	"corral/internal/archive"
	"corral/internal/egress"
	"corral/internal/gateway"
	"corral/internal/gitrepo"
	"corral/internal/netguard"
	"corral/internal/role"
	"corral/internal/service"
)

// serveConfig is everything serve reads from flags and the environment:
// the server's Config.
type serveConfig = app.Config

func parseServe(args []string, stderr io.Writer, getenv func(string) string) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", envOr(getenv, "CORRAL_ADDR", "127.0.0.1:8080"), "listen address")
	fs.StringVar(&c.Data, "data", envOr(getenv, "CORRAL_DATA", "./data"), "data directory")
	fs.StringVar(&c.Role, "role", envOr(getenv, "CORRAL_ROLE", string(role.All)), "all, control or sandbox")
	fs.StringVar(&c.Signup, "signup", envOr(getenv, "CORRAL_SIGNUP", service.SignupOpen), "open, invite or closed")
	fs.BoolVar(&c.SecureCookies, "secure-cookies", getenv("CORRAL_SECURE_COOKIES") == "true", "mark cookies Secure (behind a TLS proxy)")
	ttl, err := time.ParseDuration(envOr(getenv, "CORRAL_CHANGE_TTL", "168h"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_CHANGE_TTL: %v", errUsage, err)
	}
	fs.DurationVar(&c.ChangeTTL, "change-ttl", ttl, "how long a change set waits for a decision before it expires")
	after, err := strconv.Atoi(envOr(getenv, "CORRAL_QUARANTINE_AFTER", "3"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_QUARANTINE_AFTER: %v", errUsage, err)
	}
	fs.IntVar(&c.QuarantineAfter, "quarantine-after", after, "limit violations within the window that quarantine an agent")
	window, err := time.ParseDuration(envOr(getenv, "CORRAL_QUARANTINE_WINDOW", "1h"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_QUARANTINE_WINDOW: %v", errUsage, err)
	}
	fs.DurationVar(&c.QuarantineWindow, "quarantine-window", window, "the window in which violations count towards quarantine")
	grace, err := time.ParseDuration(envOr(getenv, "CORRAL_SESSION_GRACE", "10m"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_SESSION_GRACE: %v", errUsage, err)
	}
	fs.DurationVar(&c.SessionGrace, "session-grace", grace, "how long runs' sandboxes outlive a server that does not come back")
	fs.StringVar(&c.ToolsDir, "tools-dir", envOr(getenv, "CORRAL_TOOLS_DIR", "build/tools"), "the agent CLIs' directory (make tools fills it)")
	maxSessions, err := strconv.Atoi(envOr(getenv, "CORRAL_MAX_SESSIONS", "0"))
	if err != nil || maxSessions < 0 {
		return c, fmt.Errorf("%w: CORRAL_MAX_SESSIONS must be a whole number of sessions, 0 for no bound", errUsage)
	}
	fs.IntVar(&c.MaxSessions, "max-sessions", maxSessions, "most runs' sandboxes this machine runs at once (roles all and sandbox); 0: no bound")
	maxConns, err := strconv.Atoi(envOr(getenv, "CORRAL_MAX_CONNS", "0"))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_MAX_CONNS: %v", errUsage, err)
	}
	fs.IntVar(&c.MaxConns, "max-conns", maxConns, "most connections open at once; 0: "+strconv.Itoa(netguard.DefaultMaxConns)+" or what the descriptor limit allows")
	perAddr, err := strconv.Atoi(envOr(getenv, "CORRAL_MAX_CONNS_PER_ADDR", strconv.Itoa(netguard.DefaultMaxConnsPerAddr)))
	if err != nil {
		return c, fmt.Errorf("%w: CORRAL_MAX_CONNS_PER_ADDR: %v", errUsage, err)
	}
	fs.IntVar(&c.MaxConnsPerAddr, "max-conns-per-addr", perAddr, "most connections open at once from one client address (IPv6: one /64); 0: no such cap")
	proxies := &prefixList{}
	if v := getenv("CORRAL_TRUSTED_PROXY"); v != "" {
		if err := proxies.Set(v); err != nil {
			return c, fmt.Errorf("%w: CORRAL_TRUSTED_PROXY: %v", errUsage, err)
		}
		proxies.fromEnv = true
	}
	fs.Var(proxies, "trusted-proxy", "a reverse proxy's address or CIDR whose X-Forwarded-For is believed (repeatable, or comma-separated)")
	threshold, err := strconv.ParseFloat(envOr(getenv, "CORRAL_RETRIEVAL_THRESHOLD", "0"), 64)
	if err != nil || threshold < 0 || threshold > 1 {
		return c, fmt.Errorf("%w: CORRAL_RETRIEVAL_THRESHOLD: want a number from 0 to 1", errUsage)
	}
	fs.Float64Var(&c.RetrievalThreshold, "retrieval-threshold", threshold, "the confidence below which a document search tells an agent nothing relevant was found (0: the calibrated default, 0.5; 0.85 refuses nine in ten near misses)")
	fs.StringVar(&c.Control, "control", getenv("CORRAL_CONTROL"), "role sandbox: control's URL, such as https://corral.example.org")
	fs.StringVar(&c.Join, "join", getenv("CORRAL_JOIN"), "role sandbox: the one-time join token of the node's first start (from corral node token on control)")
	fs.StringVar(&c.NodeName, "node-name", getenv("CORRAL_NODE_NAME"), "role sandbox: the node's name as admins see it (default: the host name)")
	fs.StringVar(&c.EmbedModel, "embed-model", getenv("CORRAL_EMBED_MODEL"), "the provider's embedding model for document retrieval (empty: BM25 alone)")
	fs.StringVar(&c.GitCAFile, "git-ca-file", getenv("CORRAL_GIT_CA_FILE"), "PEM file of the CA git trusts for https, in place of the system's (a git server with a private CA)")
	allowPrivate := fs.String("egress-allow-private", getenv("CORRAL_EGRESS_ALLOW_PRIVATE"),
		"comma-separated CIDR ranges of private, loopback or link-local addresses a clone or push may reach (an internal git server); by default only public addresses")
	sizes := []struct {
		dst       *int64
		flag, env string
		def       int64
		usage     string
	}{
		{&c.CloneMaxBytes, "clone-max-bytes", "CORRAL_CLONE_MAX_BYTES", gitrepo.DefaultMaxBytes, "largest clone on disk, in bytes"},
		{&c.Imports.MaxArchive, "import-max-archive", "CORRAL_IMPORT_MAX_ARCHIVE", archive.DefaultMaxArchive, "largest archive an import takes, in bytes as uploaded"},
		{&c.Imports.MaxBytes, "import-max-bytes", "CORRAL_IMPORT_MAX_BYTES", archive.DefaultMaxBytes, "most bytes an import writes, uncompressed"},
		{&c.Imports.MaxFiles, "import-max-files", "CORRAL_IMPORT_MAX_FILES", archive.DefaultMaxFiles, "most files one import writes"},
		{&c.Imports.MaxDirs, "import-max-dirs", "CORRAL_IMPORT_MAX_DIRS", archive.DefaultMaxDirs, "most directories one import holds"},
		{&c.Imports.MaxFileSize, "import-max-file-size", "CORRAL_IMPORT_MAX_FILE_SIZE", archive.DefaultMaxFileSize, "largest file an import writes, in bytes"},
		{&c.DocumentMaxBytes, "document-max-bytes", "CORRAL_DOCUMENT_MAX_BYTES", 4 << 20, "largest document retrieval indexes, in bytes"},
		{&c.PendingDisk.PerUser, "pending-disk-per-user", "CORRAL_PENDING_DISK_PER_USER", service.DefaultPendingDiskPerUser, "most bytes the change sets waiting for review of all one person's agents may hold on disk before their messages are refused"},
		{&c.PendingDisk.Total, "pending-disk-total", "CORRAL_PENDING_DISK_TOTAL", service.DefaultPendingDiskTotal, "most bytes the change sets waiting for review of every agent may hold on disk before messages are refused"},
	}
	caps := []struct {
		dst       *int
		flag, env string
		def       int
		usage     string
	}{
		{&c.Delegation.Depth, "delegation-depth", "CORRAL_DELEGATION_DEPTH", 3, "how deep a tree of delegated runs may go"},
		{&c.Delegation.Fanout, "delegation-fanout", "CORRAL_DELEGATION_FANOUT", 4, "how many runs one run may delegate to"},
		{&c.Delegation.Concurrency, "delegation-concurrency", "CORRAL_DELEGATION_CONCURRENCY", 4, "how many delegated runs of one tree may be active at once"},
		{&c.Delegation.Create, "delegation-create", "CORRAL_DELEGATION_CREATE", 3, "how many agents one tree's runs may create"},
	}
	for _, cp := range caps {
		def := cp.def
		if v := getenv(cp.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return c, fmt.Errorf("%w: %s=%q: want a number, 0 or more", errUsage, cp.env, v)
			}
			def = n
		}
		fs.IntVar(cp.dst, cp.flag, def, cp.usage+" (0: none)")
	}
	treeTokens := int64(0)
	if v := getenv("CORRAL_DELEGATION_TOKENS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return c, fmt.Errorf("%w: CORRAL_DELEGATION_TOKENS=%q: want a number, 0 or more", errUsage, v)
		}
		treeTokens = n
	}
	fs.Int64Var(&c.Delegation.Tokens, "delegation-tokens", treeTokens, "tokens one tree of delegated runs may use in all (0: only the agents' own budgets)")
	for _, sz := range sizes {
		def := sz.def
		if v := getenv(sz.env); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return c, fmt.Errorf("%w: %s=%q: want a positive number", errUsage, sz.env, v)
			}
			def = n
		}
		fs.Int64Var(sz.dst, sz.flag, def, sz.usage)
	}
	c.Model = gateway.Config{
		BaseURL: getenv("CORRAL_MODEL_BASE_URL"),
		APIKey:  getenv("CORRAL_MODEL_API_KEY"),
		Model:   getenv("CORRAL_MODEL"),
	}
	if v := getenv("CORRAL_MODEL_NATIVE"); v != "" {
		// The protocols the provider also speaks itself, passed through.
		for _, p := range strings.Split(v, ",") {
			c.Model.Native = append(c.Model.Native, strings.TrimSpace(p))
		}
	}
	maxOutput := int64(gateway.DefaultMaxOutput)
	if v := getenv("CORRAL_MODEL_MAX_OUTPUT"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%w: CORRAL_MODEL_MAX_OUTPUT=%q: want a positive number", errUsage, v)
		}
		maxOutput = n
	}
	fs.Int64Var(&c.Model.MaxOutput, "model-max-output", maxOutput,
		"the output cap every model call is sent with: with its request's size, what it reserves of its agent's budget before it goes")
	// OpenAI's reasoning models refuse max_tokens; other OpenAI-compatible
	// servers know only it.
	field := "max_tokens"
	if u, err := url.Parse(c.Model.BaseURL); err == nil && u.Hostname() == "api.openai.com" {
		field = "max_completion_tokens"
	}
	fs.StringVar(&c.Model.OutputField, "model-output-field", envOr(getenv, "CORRAL_MODEL_OUTPUT_FIELD", field),
		"the Chat Completions field that carries the output cap: max_tokens, or max_completion_tokens (the default for api.openai.com)")
	c.SecretKey = getenv("CORRAL_SECRET_KEY")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	c.TrustedProxies = proxies.list
	// On the command line a size of 0 means nothing (in a Config, the
	// default): refuse it.
	for _, sz := range sizes {
		if *sz.dst <= 0 {
			return c, fmt.Errorf("%w: --%s must be positive", errUsage, sz.flag)
		}
	}
	if c.EgressAllowPrivate, err = egress.ParsePrefixes(*allowPrivate); err != nil {
		return c, fmt.Errorf("%w: --egress-allow-private: %s", errUsage, corral.ErrorMessage(err))
	}
	c.Delegation = delegationCaps(c.Delegation)
	// The same of durations, and a quarantine needs a violation.
	switch {
	case c.SessionGrace <= 0:
		return c, fmt.Errorf("%w: --session-grace must be positive", errUsage)
	case c.ChangeTTL <= 0:
		return c, fmt.Errorf("%w: --change-ttl must be positive", errUsage)
	case c.QuarantineAfter < 1 || c.QuarantineWindow <= 0:
		return c, fmt.Errorf("%w: --quarantine-after must be at least 1 and --quarantine-window positive", errUsage)
	}
	return c, c.Check()
}

func serve(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	c, err := parseServe(args, stderr, getenv)
	if err != nil {
		return err
	}
	return runServer(ctx, c, newLogger(stderr, getenv), nil)
}

// runServer builds the server c describes, serves until ctx is
// cancelled, then shuts down gracefully. ready, when not nil, receives the
// listen address.
func runServer(ctx context.Context, c serveConfig, log *slog.Logger, ready chan<- string) error {
	a, err := app.New(ctx, c, app.WithLog(log))
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Run(ctx, ready)
}

// prefixList is the --trusted-proxy flag: repeatable, each value a
// comma-separated list of CIDRs or single addresses. Values from the
// environment are replaced, not added to, by the first flag.
type prefixList struct {
	list    []netip.Prefix
	fromEnv bool
}

func (p *prefixList) String() string {
	s := make([]string, len(p.list))
	for i, x := range p.list {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixList) Set(v string) error {
	if p.fromEnv {
		p.list, p.fromEnv = nil, false
	}
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return fmt.Errorf("%q is neither a CIDR nor an address", f)
			}
			a = a.Unmap()
			prefix = netip.PrefixFrom(a, a.BitLen())
		}
		p.list = append(p.list, prefix.Masked())
	}
	return nil
}

// delegationCaps turns the flags' caps into the domain's: a flag's 0 is
// "none allowed", which corral.TreeCaps spells as a negative number (its
// zero is "the default").
func delegationCaps(c corral.TreeCaps) corral.TreeCaps {
	for _, v := range []*int{&c.Depth, &c.Fanout, &c.Concurrency, &c.Create} {
		if *v == 0 {
			*v = -1
		}
	}
	return c
}
