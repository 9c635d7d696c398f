// Package nodeagent is a sandbox node's side of the split roles: it
// joins control once with a join token, keeps the short-lived credential
// it is given (renewing it over the relay), dials control's relay and
// keeps it up, answers control's corral.Trees and corral.Sessions calls
// on it with this machine's node, and carries the in-sandbox gateway's
// connections to control, where the gateway and the keys are. It holds no
// database, no provider key and no code-host credential: what a call needs
// it is handed, for that call.
package nodeagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"corral"
	"corral/internal/fleet"
	"corral/internal/relay"
	"corral/internal/relay/noderpc"
	"corral/internal/sanitize"
)

// Config is a node's settings.
type Config struct {
	// Control is control's URL, http(s)://host:port, or the URLs of
	// control replicas separated by commas: the node keeps one relay, to
	// the one that serves, and tries the next when it ends or is refused.
	Control string
	Join    string       // a one-time join token, used when the node has no credential yet
	Name    string       // the node's name, as admins see it
	Data    string       // the node's data directory: its credential is kept here, 0600
	Node    noderpc.Node // this machine's (node.Local)
	// Gateway is the socket sessions reach the gateway by (node.Config's
	// GatewaySocket): served here, each connection carried to control.
	Gateway string
	// Egress is the socket sessions reach the egress proxy by (node.Config's
	// EgressSocket): served here, each connection carried to control,
	// which runs the proxy (the node holds no secret, not even for one
	// connection).
	Egress string
	Relay  relay.Config
	// Renew is how often the credential is renewed. Default 1 hour.
	Renew time.Duration
	Log   *slog.Logger
}

// CredentialFile is where a node keeps its credential in its data
// directory.
const CredentialFile = "node.credential"

// Agent is a running node.
type Agent struct {
	cfg      Config
	controls []string // cfg.Control's URLs
	at       int      // the one tried next

	mu      sync.Mutex
	session *relay.Session // the relay now; nil while it is down
	cred    string
}

// New checks cfg.
func New(cfg Config) (*Agent, error) {
	controls := strings.Split(cfg.Control, ",")
	for _, u := range controls {
		if _, err := sanitize.ServerURL(u); err != nil {
			return nil, corral.Errorf(corral.EINVALID, "--control must be control's http or https URL, such as https://corral.example.org, or several control replicas' separated by commas")
		}
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	if cfg.Renew <= 0 {
		cfg.Renew = time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, controls: controls}, nil
}

// Run keeps the node connected until ctx ends. It fails at once when the
// node has no credential and no join token works, or control refuses
// its credential (expired: the node must join again).
func (a *Agent) Run(ctx context.Context) error {
	cred, err := a.credential(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.cred = cred
	a.mu.Unlock()
	for _, c := range []struct{ path, ask string }{{a.cfg.Gateway, "gateway"}, {a.cfg.Egress, "egress"}} {
		if c.path == "" {
			continue
		}
		ln, err := relay.ListenSocket(c.path)
		if err != nil {
			return err
		}
		defer ln.Close()
		go a.carry(ln, c.ask)
	}
	wait := time.Second
	failed := 0 // replicas tried in a row without a relay
	for ctx.Err() == nil {
		control := a.controls[a.at]
		up, err := a.connect(ctx, control)
		switch {
		case corral.ErrorCode(err) == corral.EUNAUTH:
			return corral.Errorf(corral.EUNAUTH, "control refused this node's credential (expired, or the node was removed): make a join token with `corral node token` on control and start the node with --join")
		case corral.ErrorCode(err) == corral.EFORBIDDEN:
			return err // control's own words: a node of another release, say
		case err != nil:
			a.cfg.Log.Warn("relay to control down; retrying", "control", control, "in", wait, "err", corral.ErrorMessage(err))
		}
		// The next replica: the one that ended or refused (a standby
		// answers 503 at once) is the least likely to serve now.
		a.at = (a.at + 1) % len(a.controls)
		if up {
			wait, failed = time.Second, 0
		}
		if failed++; failed < len(a.controls) && !up {
			continue // every replica once before waiting
		}
		failed = 0
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
	return nil
}

// Connected says whether the relay to control is up now (a node's
// readiness).
func (a *Agent) Connected() bool {
	a.mu.Lock()
	s := a.session
	a.mu.Unlock()
	if s == nil {
		return false
	}
	select {
	case <-s.Done():
		return false
	default:
		return true
	}
}

// connect holds one relay connection until it ends; up says it was up.
func (a *Agent) connect(ctx context.Context, control string) (bool, error) {
	a.mu.Lock()
	cred := a.cred
	a.mu.Unlock()
	s, err := relay.Dial(ctx, wsURL(control)+fleet.RelayPath, http.Header{
		"Authorization":       {"Bearer " + cred},
		noderpc.VersionHeader: {noderpc.Version},
	}, a.cfg.Relay)
	if err != nil {
		return false, err
	}
	a.cfg.Log.Info("connected to control", "control", control)
	a.mu.Lock()
	a.session = s
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.session = nil
		a.mu.Unlock()
		s.Close()
	}()
	go noderpc.Serve(s, a.cfg.Node, a.cfg.Log)
	renew := time.NewTicker(a.cfg.Renew)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case <-s.Done():
			return true, corral.Errorf(corral.EUNAVAIL, "the relay ended")
		case <-renew.C:
			if err := a.renew(ctx, s); err != nil {
				a.cfg.Log.Warn("node credential not renewed; the current one stays good until it expires", "err", corral.ErrorMessage(err))
			}
		}
	}
}

// renew asks control for a fresh credential and keeps it.
func (a *Agent) renew(ctx context.Context, s *relay.Session) error {
	c, err := s.Open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := io.WriteString(c, "renew\n"); err != nil {
		return err
	}
	var ans fleet.JoinAnswer
	if err := json.NewDecoder(io.LimitReader(c, 4<<10)).Decode(&ans); err != nil {
		return fmt.Errorf("renew: %w", err)
	}
	if err := a.save(ans.Credential); err != nil {
		return err
	}
	a.mu.Lock()
	a.cred = ans.Credential
	a.mu.Unlock()
	return nil
}

// credential is the node's credential: the one it keeps, or one it gets
// by joining with its join token.
func (a *Agent) credential(ctx context.Context) (string, error) {
	b, err := os.ReadFile(filepath.Join(a.cfg.Data, CredentialFile))
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", corral.Internal("node credential", err)
	}
	if a.cfg.Join == "" {
		return "", corral.Errorf(corral.EINVALID, "this node has not joined control yet: start it with --join TOKEN (make one with `corral node token` on control)")
	}
	body, _ := json.Marshal(fleet.JoinRequest{Token: a.cfg.Join, Name: a.cfg.Name})
	// Each replica in turn: a standby answers 503, and the one serving
	// takes the join.
	var ans fleet.JoinAnswer
	for i, control := range a.controls {
		ans, err = a.join(ctx, control, body)
		if err == nil || corral.ErrorCode(err) != corral.EUNAVAIL || i == len(a.controls)-1 {
			break
		}
	}
	if err != nil {
		return "", err
	}
	if err := a.save(ans.Credential); err != nil {
		return "", err
	}
	a.cfg.Log.Info("joined control", "node", ans.NodeID)
	return ans.Credential, nil
}

// joinClient bounds a join: a control that takes the connection and
// never answers is given up, and the next one tried.
var joinClient = &http.Client{Timeout: 30 * time.Second}

// join asks control to enroll this node.
func (a *Agent) join(ctx context.Context, control string, body []byte) (fleet.JoinAnswer, error) {
	var ans fleet.JoinAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(control, "/")+fleet.JoinPath, bytes.NewReader(body))
	if err != nil {
		return ans, corral.Internal("join", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := joinClient.Do(req)
	if err != nil {
		return ans, corral.Errorf(corral.EUNAVAIL, "control could not be reached to join: %v", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable:
		return ans, corral.Errorf(corral.EUNAVAIL, "%s could not enroll this node now: %s", control, strings.TrimSpace(string(msg)))
	case resp.StatusCode != http.StatusOK:
		return ans, corral.Errorf(corral.EUNAUTH, "control refused to enroll this node: %s", strings.TrimSpace(string(msg)))
	}
	if err := json.Unmarshal(msg, &ans); err != nil || ans.Credential == "" {
		return ans, corral.Errorf(corral.EUNAVAIL, "control's answer to the join is not understood")
	}
	return ans, nil
}

// save writes the credential, 0600, atomically.
func (a *Agent) save(cred string) error {
	path := filepath.Join(a.cfg.Data, CredentialFile)
	tmp := path + ".tmp"
	if err := os.MkdirAll(a.cfg.Data, 0o700); err != nil {
		return corral.Internal("node credential", err)
	}
	if err := os.WriteFile(tmp, []byte(cred+"\n"), 0o600); err != nil {
		return corral.Internal("node credential", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return corral.Internal("node credential", err)
	}
	return nil
}

// carry carries each session's connection to the gateway (or the egress
// proxy) over the relay to control: a stream that starts with ask
// ("gateway" or "egress"), then the bytes both
// ways (the session's preamble first, written by its supervisor). While
// the relay is down the connection is closed at once.
func (a *Agent) carry(ln net.Listener, ask string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			a.mu.Lock()
			s := a.session
			a.mu.Unlock()
			if s == nil {
				return
			}
			up, err := s.Open(context.Background())
			if err != nil {
				return
			}
			defer up.Close()
			if _, err := io.WriteString(up, ask+"\n"); err != nil {
				return
			}
			done := make(chan struct{})
			go func() {
				io.Copy(up, bufio.NewReaderSize(c, 32<<10))
				up.Close() // the session is done sending: control reads the end
				close(done)
			}()
			io.Copy(c, up)
			c.Close()
			<-done
		}()
	}
}

// wsURL is control's URL with the WebSocket scheme.
func wsURL(control string) string {
	control = strings.TrimSuffix(control, "/")
	if rest, ok := strings.CutPrefix(control, "https://"); ok {
		return "wss://" + rest
	}
	return "ws://" + strings.TrimPrefix(control, "http://")
}
