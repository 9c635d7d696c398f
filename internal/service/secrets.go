package service

import (
	"context"
	"net"
	"net/textproto"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"corral"
	"corral/internal/access"
	"corral/internal/egress"
	"corral/internal/sanitize"
	"corral/internal/secrets"
)

// maxSecretValue bounds an agent secret's value: a header, not a file.
const maxSecretValue = 4096

// Egress keeps agents' secrets and answers, for the egress proxy, what a
// run may reach at this moment. Secrets are sealed at rest with the
// server's secret key, bound to their row; a value is opened only in
// Grant, for the proxy, which adds it to the requests a run makes to the
// secret's host: it never enters a sandbox, a trace, a log line or an
// answer.
type Egress struct {
	store egressStore
	key   *secrets.Key
	cfg   Config
}

type egressStore interface {
	agentReader
	corral.SecretStore
	Run(ctx context.Context, id string) (corral.Run, error)
}

// NewEgress returns the egress use cases sealing with key.
func NewEgress(store egressStore, key *secrets.Key, cfg Config) *Egress {
	cfg.defaults()
	return &Egress{store: store, key: key, cfg: cfg}
}

// secretAD binds a sealed value to its row: its id, its agent and the host
// it is sent to. A value copied to another agent, or a row rewritten to
// send it to another host, no longer opens.
func secretAD(s corral.Secret) []byte {
	return secrets.AD("corral agent secret v1", s.ID, s.AgentID, s.Host)
}

// CreateSecret stores a secret of the agent: editors and the owner.
func (e *Egress) CreateSecret(ctx context.Context, actor corral.User, agentID, name, host, header, value string) (corral.Secret, error) {
	if _, err := loadAgent(ctx, e.store, actor, agentID, access.EditAgent); err != nil {
		return corral.Secret{}, err
	}
	name, err := sanitize.Name(name)
	if err != nil {
		return corral.Secret{}, err
	}
	if host, err = secretHost(host); err != nil {
		return corral.Secret{}, err
	}
	if header, err = secretHeader(header); err != nil {
		return corral.Secret{}, err
	}
	if err := checkSecretValue(value); err != nil {
		return corral.Secret{}, err
	}
	s := corral.Secret{ID: corral.NewID("sec"), AgentID: agentID, Name: name, Host: host, Header: header,
		CreatedAt: e.cfg.Now().UTC()}
	plain := []byte(value)
	sealed := e.key.Seal(plain, secretAD(s))
	clear(plain)
	if err := e.store.CreateSecret(ctx, s, sealed, actor.ID); err != nil {
		return corral.Secret{}, err
	}
	return s, nil
}

// Secrets lists the agent's secrets, names and hosts only: anyone who
// may see the agent.
func (e *Egress) Secrets(ctx context.Context, actor corral.User, agentID string) ([]corral.Secret, error) {
	if _, err := loadAgent(ctx, e.store, actor, agentID, access.ViewAgent); err != nil {
		return nil, err
	}
	return e.store.Secrets(ctx, agentID)
}

// DeleteSecret deletes a secret of the agent: editors and the owner. The
// next connection of a run no longer carries it.
func (e *Egress) DeleteSecret(ctx context.Context, actor corral.User, agentID, id string) error {
	if _, err := loadAgent(ctx, e.store, actor, agentID, access.EditAgent); err != nil {
		return err
	}
	return e.store.DeleteSecret(ctx, agentID, id, actor.ID)
}

// Grant is what a run reaches now, for the egress proxy, which asks on
// every connection (so an edited allow-list or a deleted secret applies
// to the next one): the agent's allow-list with its presets expanded, and
// its secrets opened. EFORBIDDEN when the run is over or its agent's
// network is none; ENOTFOUND when there is no such run.
//
// The headers hold secret values: the caller keeps them no longer than
// the connection they are for, and never logs them.
func (e *Egress) Grant(ctx context.Context, runID string) (corral.EgressGrant, error) {
	run, err := e.store.Run(ctx, runID)
	if err != nil {
		return corral.EgressGrant{}, err
	}
	if !corral.RunActive(run.Status) {
		return corral.EgressGrant{}, corral.Errorf(corral.EFORBIDDEN, "the run is over")
	}
	a, err := e.store.Agent(ctx, run.AgentID, "")
	if err != nil {
		return corral.EgressGrant{}, err
	}
	if a.Policy.Network != corral.NetworkAllowlist {
		return corral.EgressGrant{}, corral.Errorf(corral.EFORBIDDEN, "the agent's policy.network is %q: its runs reach no host", a.Policy.Network)
	}
	g := corral.EgressGrant{Rules: egress.Expand(a.Policy.Egress)}
	sealed, err := e.store.SealedSecrets(ctx, a.ID)
	if err != nil {
		return corral.EgressGrant{}, err
	}
	for _, s := range sealed {
		value, err := e.key.Open(s.Sealed, secretAD(s.Secret))
		if err != nil {
			// A changed key or an altered row: the request goes without
			// it (the upstream refuses it as it would any), and the log
			// names the row, never a byte of it.
			e.cfg.Log.WarnContext(ctx, "an agent secret does not open with the server's secret key",
				"secret", s.ID, "agent", a.ID)
			continue
		}
		g.Headers = append(g.Headers, corral.EgressHeader{Host: s.Host, Name: s.Header, Value: string(value)})
		clear(value)
	}
	return g, nil
}

// Preset is a well-known registry an allow-list names, with its hosts.
type Preset struct {
	Name  string
	Hosts []string
}

// Presets lists the presets by name, each with the hosts it allows.
func (e *Egress) Presets() []Preset {
	var out []Preset
	for _, name := range egress.PresetNames() {
		p := Preset{Name: name, Hosts: []string{}}
		for _, r := range egress.Presets[name] {
			if !slices.Contains(p.Hosts, r.Host) {
				p.Hosts = append(p.Hosts, r.Host)
			}
		}
		out = append(out, p)
	}
	return out
}

// secretHost is the host a secret is sent to: a name or an address, no
// port (it goes to that host on whichever port the allow-list allows).
func secretHost(h string) (string, error) {
	h, err := sanitize.Host(h)
	if err != nil {
		return "", err
	}
	if _, _, err := net.SplitHostPort(h); err == nil {
		return "", corral.Errorf(corral.EINVALID, "host: give the host without a port")
	}
	return h, nil
}

// secretHeader checks a header name and returns its canonical form. The
// headers that frame the request or talk to the proxy are refused: a
// secret set as one could smuggle a second request.
func secretHeader(h string) (string, error) {
	if !httpguts.ValidHeaderFieldName(h) {
		return "", corral.Errorf(corral.EINVALID, "header must be an HTTP header name, like Authorization")
	}
	h = textproto.CanonicalMIMEHeaderKey(h)
	if strings.HasPrefix(h, "Proxy-") || framingHeaders[h] {
		return "", corral.Errorf(corral.EINVALID, "header %s frames the request: it cannot carry a secret", h)
	}
	return h, nil
}

// framingHeaders are the headers that say where a request ends or what
// the connection does next.
var framingHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true, "Transfer-Encoding": true,
	"Upgrade": true, "Host": true, "Content-Length": true, "Content-Type": true, "Expect": true,
}

// checkSecretValue checks a value without ever repeating it.
func checkSecretValue(v string) error {
	switch {
	case v == "":
		return corral.Errorf(corral.EINVALID, "value must not be empty")
	case len(v) > maxSecretValue:
		return corral.Errorf(corral.ETOOLARGE, "value is longer than %d bytes", maxSecretValue)
	case !httpguts.ValidHeaderFieldValue(v) || strings.ContainsAny(v, "\x00\r\n"):
		return corral.Errorf(corral.EINVALID, "value must be a valid header value: no line breaks or control characters")
	}
	return nil
}
