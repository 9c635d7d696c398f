package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"corral"
	"corral/internal/trace"
)

// The egress proxy inside a session: every command of a run is given it
// (the agent CLI and its MCP servers inherit it), with the deployment's CA
// to trust for the hosts the proxy terminates. The proxy decides; a run
// whose agent's network is none is refused there, by name, so a person
// sees what it tried and can allow it.
const (
	// egressDir holds, inside the session, the CA the proxy terminates
	// with (ca.pem) and the system's roots with it (bundle.pem).
	egressDir = "/tmp/corral-egress"
	proxyURL  = "http://" + corral.EgressAddr
)

// egressEnv is what a command needs to use the proxy: the proxy for every
// scheme (curl, git, pip, Go, npm, cargo), never for the gateway on the
// session's loopback, and the CA for OpenSSL, Go, Node, Python and git.
func egressEnv() []string {
	return []string{
		"HTTP_PROXY=" + proxyURL, "HTTPS_PROXY=" + proxyURL, "ALL_PROXY=" + proxyURL,
		"http_proxy=" + proxyURL, "https_proxy=" + proxyURL, "all_proxy=" + proxyURL,
		"NO_PROXY=127.0.0.1,localhost,::1", "no_proxy=127.0.0.1,localhost,::1",
		"npm_config_proxy=" + proxyURL, "npm_config_https_proxy=" + proxyURL,
		// Debian's /etc/npmrc names the system's bundle as npm's cafile,
		// and npm then ignores NODE_EXTRA_CA_CERTS.
		"npm_config_cafile=" + egressDir + "/bundle.pem",
		"SSL_CERT_FILE=" + egressDir + "/bundle.pem",
		"NODE_EXTRA_CA_CERTS=" + egressDir + "/ca.pem",
		"REQUESTS_CA_BUNDLE=" + egressDir + "/bundle.pem",
		"PIP_CERT=" + egressDir + "/bundle.pem",
		"CARGO_HTTP_CAINFO=" + egressDir + "/bundle.pem",
		"GIT_SSL_CAINFO=" + egressDir + "/bundle.pem",
	}
}

// sessionEnv is the environment of a command of a run: the session's,
// with the egress proxy when this server has one.
func (r *Runner) sessionEnv(home string) []string {
	env := corral.SessionEnv(home)
	if r.cfg.EgressCA != nil {
		env = append(env, egressEnv()...)
	}
	return env
}

// installCA writes the deployment's CA into a new session, and a bundle
// of it with the session's own system roots (what SSL_CERT_FILE must hold,
// since it replaces them), by one command reading the CA from stdin.
func (r *Runner) installCA(a *active) error {
	if r.cfg.EgressCA == nil {
		return nil
	}
	id := fmt.Sprintf("egress-ca-%d", time.Now().UnixNano())
	script := `umask 022 && mkdir -p ` + egressDir + ` && cat > ` + egressDir + `/ca.pem && ` +
		`{ cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null; cat ` + egressDir + `/ca.pem; } > ` + egressDir + `/bundle.pem`
	err := r.node.Exec(r.as(a.ctx, a.run), a.run.ID, corral.Command{
		ID: id, Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"},
		Stdin: r.cfg.EgressCA, Timeout: 30 * time.Second, OutputMax: 64 << 10,
	})
	if err != nil {
		return err
	}
	return r.waitQuiet(a, id)
}

// EgressDenied records a refusal of the egress proxy in the run's trace.
func (r *Runner) EgressDenied(runID, host string, port int, method, path, rule string) {
	r.record(context.Background(), runID, trace.EgressDenied, map[string]any{
		"host": host, "port": port, "method": method, "path": boundPath(path), "rule": rule,
	})
}

// EgressTraffic records what a run exchanged with one host.
func (r *Runner) EgressTraffic(runID, host string, requests, bytesIn, bytesOut int64) {
	r.record(context.Background(), runID, trace.Egress, map[string]any{
		"host": host, "requests": requests, "bytes_in": bytesIn, "bytes_out": bytesOut,
	})
}

// EgressExceeded ends a run that crossed the egress proxy's cap (what:
// "bytes" or "connections") as a violation, which counts toward
// quarantine like any other.
func (r *Runner) EgressExceeded(runID, what string) {
	a := r.lookup(runID)
	if a == nil {
		return
	}
	a.mu.Lock()
	if a.violation == "" {
		a.violation = corral.ViolationEgress
		a.violationReason = "the run crossed the egress proxy's " + what + " cap"
	}
	a.mu.Unlock()
	r.killActive(a)
}

// boundPath keeps a refused path to a length a trace event can hold: the
// query is dropped (it may carry a token the run was given) and the rest
// cut at 256 bytes.
func boundPath(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if len(p) > 256 {
		p = p[:256] + "…"
	}
	return p
}
