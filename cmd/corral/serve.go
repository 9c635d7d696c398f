package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
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
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&c.Data, "data", "./data", "data directory")
	fs.DurationVar(&c.FailoverAfter, "failover-after", 15*time.Second, "with --db: how long after the serving control's last lease renewal a standby takes over (at least 3s)")
	fs.StringVar(&c.Advertise, "advertise", "", "with --db: the URL the other controls forward requests to while this one serves, such as http://10.0.0.5:8080 (default: the listen address; env CORRAL_ADVERTISE)")
	fs.StringVar(&c.Database, "db", "", "a postgres:// URL: the store in PostgreSQL, shared by control replicas (default: SQLite in the data directory; env CORRAL_DATABASE_URL)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "serve /metrics, /healthz and /readyz here without credentials, such as 127.0.0.1:9090 (every role; off: /metrics on the main address for an admin)")
	fs.StringVar(&c.Role, "role", string(role.All), "all, control or sandbox")
	fs.StringVar(&c.Signup, "signup", service.SignupOpen, "open, invite or closed")
	fs.BoolVar(&c.SecureCookies, "secure-cookies", false, "mark cookies Secure (behind a TLS proxy)")
	fs.DurationVar(&c.ChangeTTL, "change-ttl", 168*time.Hour, "how long a change set waits for a decision before it expires")
	fs.IntVar(&c.QuarantineAfter, "quarantine-after", 3, "limit violations within the window that quarantine an agent")
	fs.DurationVar(&c.QuarantineWindow, "quarantine-window", time.Hour, "the window in which violations count towards quarantine")
	fs.DurationVar(&c.SessionGrace, "session-grace", 10*time.Minute, "how long runs' sandboxes outlive a server that does not come back")
	fs.StringVar(&c.ToolsDir, "tools-dir", "build/tools", "the agent CLIs' directory (make tools fills it)")
	fs.IntVar(&c.MaxSessions, "max-sessions", 0, "most runs' sandboxes this machine runs at once (roles all and sandbox); 0: no bound")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "most connections open at once; 0: "+strconv.Itoa(netguard.DefaultMaxConns)+" or what the descriptor limit allows")
	fs.IntVar(&c.MaxConnsPerAddr, "max-conns-per-addr", netguard.DefaultMaxConnsPerAddr, "most connections open at once from one client address (IPv6: one /64); 0: no such cap")
	proxies := &prefixList{}
	fs.Var(proxies, "trusted-proxy", "a reverse proxy's address or CIDR whose X-Forwarded-For is believed (repeatable, or comma-separated)")
	fs.Float64Var(&c.RetrievalThreshold, "retrieval-threshold", 0, "the confidence below which a document search tells an agent nothing relevant was found (0: the calibrated default, 0.5; 0.9 calls at most 5% of unanswerable questions answerable, and answers about 29% of the rest)")
	fs.StringVar(&c.Control, "control", "", "role sandbox: control's URL, such as https://corral.example.org; control replicas' separated by commas, tried in turn")
	fs.StringVar(&c.Join, "join", "", "role sandbox: the one-time join token of the node's first start (from corral node token on control)")
	fs.StringVar(&c.NodeName, "node-name", "", "role sandbox: the node's name as admins see it (default: the host name)")
	fs.StringVar(&c.EmbedModel, "embed-model", "", "the provider's embedding model for document retrieval (empty: BM25 alone)")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "an OpenTelemetry collector's OTLP/HTTP URL, such as http://127.0.0.1:4318: the runs' spans go there (empty: no tracing)")
	fs.StringVar(&c.GitCAFile, "git-ca-file", "", "PEM file of the CA git trusts for https, in place of the system's (a git server with a private CA)")
	allowPrivate := fs.String("egress-allow-private", "",
		"comma-separated CIDR ranges of private, loopback or link-local addresses a clone, a push or the egress proxy may reach (an internal git server or registry); by default only public addresses")
	fs.StringVar(&c.EgressCAFile, "egress-ca-file", "", "PEM file of CAs the egress proxy trusts for upstream HTTPS besides the system's (an internal registry with a private CA)")
	sizes := []struct {
		dst   *int64
		flag  string
		def   int64
		usage string
	}{
		{&c.CloneMaxBytes, "clone-max-bytes", gitrepo.DefaultMaxBytes, "largest clone on disk, in bytes"},
		{&c.Imports.MaxArchive, "import-max-archive", archive.DefaultMaxArchive, "largest archive an import takes, in bytes as uploaded"},
		{&c.Imports.MaxBytes, "import-max-bytes", archive.DefaultMaxBytes, "most bytes an import writes, uncompressed"},
		{&c.Imports.MaxFiles, "import-max-files", archive.DefaultMaxFiles, "most files one import writes"},
		{&c.Imports.MaxDirs, "import-max-dirs", archive.DefaultMaxDirs, "most directories one import holds"},
		{&c.Imports.MaxFileSize, "import-max-file-size", archive.DefaultMaxFileSize, "largest file an import writes, in bytes"},
		{&c.DocumentMaxBytes, "document-max-bytes", 4 << 20, "largest document retrieval indexes, in bytes"},
		{&c.PendingDisk.PerUser, "pending-disk-per-user", service.DefaultPendingDiskPerUser, "most bytes the change sets waiting for review of all one person's agents may hold on disk before their messages are refused"},
		{&c.EgressMaxBytes, "egress-max-bytes", app.DefaultEgressMaxBytes, "most bytes one run may exchange through the egress proxy, both ways together; past it the run ends as an egress violation"},
		{&c.PendingDisk.Total, "pending-disk-total", service.DefaultPendingDiskTotal, "most bytes the change sets waiting for review of every agent may hold on disk before messages are refused"},
	}
	for _, sz := range sizes {
		fs.Int64Var(sz.dst, sz.flag, sz.def, sz.usage)
	}
	caps := []struct {
		dst   *int
		flag  string
		def   int
		usage string
	}{
		{&c.Delegation.Depth, "delegation-depth", 3, "how deep a tree of delegated runs may go"},
		{&c.Delegation.Fanout, "delegation-fanout", 4, "how many runs one run may delegate to"},
		{&c.Delegation.Concurrency, "delegation-concurrency", 4, "how many delegated runs of one tree may be active at once"},
		{&c.Delegation.Create, "delegation-create", 3, "how many agents one tree's runs may create"},
	}
	for _, cp := range caps {
		fs.IntVar(cp.dst, cp.flag, cp.def, cp.usage+" (0: none)")
	}
	fs.Int64Var(&c.EgressMaxConns, "egress-max-connections", app.DefaultEgressMaxConns, "most connections one run may open through the egress proxy; past it the run ends as an egress violation")
	fs.Int64Var(&c.Delegation.Tokens, "delegation-tokens", 0, "tokens one tree of delegated runs may use in all (0: only the agents' own budgets)")
	// The model provider, from the environment only, so that the key
	// never shows in a process listing.
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
	fs.Int64Var(&c.Model.MaxOutput, "model-max-output", gateway.DefaultMaxOutput,
		"the output cap every model call is sent with: with its request's size, what it reserves of its agent's budget before it goes")
	// OpenAI's reasoning models refuse max_tokens; other OpenAI-compatible
	// servers know only it.
	field := "max_tokens"
	if u, err := url.Parse(c.Model.BaseURL); err == nil && u.Hostname() == "api.openai.com" {
		field = "max_completion_tokens"
	}
	fs.StringVar(&c.Model.OutputField, "model-output-field", field,
		"the Chat Completions field that carries the output cap: max_tokens, or max_completion_tokens (the default for api.openai.com)")
	c.SecretKey = getenv("CORRAL_SECRET_KEY")
	from, err := parseWithEnv(fs, args, getenv)
	if err != nil {
		return c, err
	}
	c.TrustedProxies = proxies.list
	// On the command line a size of 0 means nothing (in a Config, the
	// default), and a count or a cap is never negative: refuse them.
	for _, sz := range sizes {
		if *sz.dst <= 0 {
			return c, fmt.Errorf("%w: %s must be positive", errUsage, from(sz.flag))
		}
	}
	for _, n := range []struct {
		flag string
		v    int64
	}{
		{"delegation-depth", int64(c.Delegation.Depth)}, {"delegation-fanout", int64(c.Delegation.Fanout)},
		{"delegation-concurrency", int64(c.Delegation.Concurrency)}, {"delegation-create", int64(c.Delegation.Create)},
		{"delegation-tokens", c.Delegation.Tokens},
	} {
		if n.v < 0 {
			return c, fmt.Errorf("%w: %s must be 0 or more", errUsage, from(n.flag))
		}
	}
	if c.Model.MaxOutput <= 0 {
		return c, fmt.Errorf("%w: %s must be positive", errUsage, from("model-max-output"))
	}
	if c.EgressAllowPrivate, err = egress.ParsePrefixes(*allowPrivate); err != nil {
		return c, fmt.Errorf("%w: %s: %s", errUsage, from("egress-allow-private"), corral.ErrorMessage(err))
	}
	c.Delegation = delegationCaps(c.Delegation)
	// The same of durations, and a quarantine needs a violation.
	switch {
	case c.SessionGrace <= 0:
		return c, fmt.Errorf("%w: %s must be positive", errUsage, from("session-grace"))
	case c.ChangeTTL <= 0:
		return c, fmt.Errorf("%w: %s must be positive", errUsage, from("change-ttl"))
	case c.QuarantineAfter < 1 || c.QuarantineWindow <= 0:
		return c, fmt.Errorf("%w: --quarantine-after must be at least 1 and --quarantine-window positive", errUsage)
	}
	return c, c.Check()
}

// parseWithEnv parses args into fs, then gives every flag the command line
// left unset the value of its environment variable, when that is set:
// CORRAL_ and the flag's name in capitals, dashes as underscores
// (--max-conns is CORRAL_MAX_CONNS). A flag on the command line wins over
// its variable (a repeatable one replaces it rather than adding to it).
// The one binding of flags to the environment for every command; the
// environment is getenv, so tests hand their own. With only, just those
// flags have a variable. It returns from, which names where a flag's
// value came from, for error messages.
func parseWithEnv(fs *flag.FlagSet, args []string, getenv func(string) string, only ...string) (from func(name string) string, err error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fromEnv := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		key := envName(f.Name)
		v := getenv(key)
		if set[f.Name] || v == "" || err != nil || (len(only) > 0 && !slices.Contains(only, f.Name)) {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("%w: %s=%q: %v", errUsage, key, v, serr)
		}
		fromEnv[f.Name] = key
	})
	return func(name string) string {
		if key, ok := fromEnv[name]; ok {
			return key
		}
		return "--" + name
	}, err
}

// envName is the environment variable of the flag name.
func envName(flag string) string {
	if flag == "db" {
		return "CORRAL_DATABASE_URL"
	}
	return "CORRAL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
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
// comma-separated list of CIDRs or single addresses. Its variable,
// CORRAL_TRUSTED_PROXY, counts only when no flag is given.
type prefixList struct {
	list []netip.Prefix
}

func (p *prefixList) String() string {
	s := make([]string, len(p.list))
	for i, x := range p.list {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixList) Set(v string) error {
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
