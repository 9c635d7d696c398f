package runner

import (
	"fmt"
	"strings"
	"time"

	"corral"
	"corral/internal/telemetry"
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

// sessionEnv is the environment of a command of a's run: the session's,
// with the egress proxy when this server has one, and the run's trace
// context when it traces (TRACEPARENT).
func (r *Runner) sessionEnv(a *active, home string) []string {
	env := corral.SessionEnv(home)
	if r.cfg.EgressCA != nil {
		env = append(env, egressEnv()...)
	}
	return append(env, telemetry.Env(a.ctx)...)
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

// maxEgressEvents bounds the egress events one run's trace gets of each
// kind: a run that retries a refused host in a loop, or opens a
// connection per request, would otherwise grow its trace without end.
const maxEgressEvents = 200

// egressEvent records one egress event of an active run, the first
// maxEgressEvents of its kind, then one saying the rest are left out.
func (r *Runner) egressEvent(runID, typ string, data map[string]any) {
	a := r.lookup(runID)
	if a == nil {
		return // the run has ended (its summary was written before its end)
	}
	a.mu.Lock()
	if a.egressEvents == nil {
		a.egressEvents = map[string]int{}
	}
	a.egressEvents[typ]++
	n := a.egressEvents[typ]
	a.mu.Unlock()
	switch {
	case n <= maxEgressEvents:
		r.record(a.ctx, runID, typ, data)
	case n == maxEgressEvents+1:
		r.record(a.ctx, runID, typ, map[string]any{"truncated": true,
			"note": fmt.Sprintf("more than %d; the rest are left out of the trace", maxEgressEvents)})
	}
}

// EgressDenied records a refusal of the egress proxy in the run's trace.
func (r *Runner) EgressDenied(runID, host string, port int, method, path, rule string) {
	r.egressEvent(runID, trace.EgressDenied, map[string]any{
		"host": host, "port": port, "method": method, "path": boundPath(path), "rule": rule,
	})
}

// EgressTraffic records what a run exchanged with one host.
func (r *Runner) EgressTraffic(runID, host string, requests, bytesIn, bytesOut int64) {
	r.egressEvent(runID, trace.Egress, map[string]any{
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
