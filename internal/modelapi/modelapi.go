// Package modelapi is Corral's gateway as agent CLIs reach it from inside
// their sandboxes (through the session's supervisor, on a unix socket of
// the server): OpenAI Chat Completions, the OpenAI Responses API and
// Anthropic Messages; and, at /mcp, an MCP server of the delegation tools.
// Every call is authorized by its run's token (the CLI's only credential,
// good while the run is running), checked against the agent's budget
// before it is sent, sent upstream as Chat Completions with the provider's
// key (which never leaves this process), relayed back in the CLI's
// protocol as it streams, and metered from the provider's usage, whatever
// way the call ends.
package modelapi

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"corral"
	"corral/internal/protocol"
	"corral/internal/relay"
)

// maxBody bounds a CLI's request: Codex sends the whole conversation with
// every turn.
const maxBody = 32 << 20

// Runs authorizes a call by its run's token (the runner's Authorize).
type Runs interface {
	Authorize(ctx context.Context, token string) (corral.CLIGrant, error)
}

// Upstream sends a Chat Completions call to the provider (gateway.Gateway).
type Upstream interface {
	// MaxOutput is the output cap every call is sent with, and the Chat
	// Completions field that carries it.
	MaxOutput() (field string, n int64)
	Forward(ctx context.Context, model string, body []byte) (*http.Response, error)
	// ModelName is the model an agent set to model calls.
	ModelName(model string) string
	// Native says whether the provider takes calls in protocol ("responses",
	// "messages") as they are; ForwardNative sends one.
	Native(protocol string) bool
	ForwardNative(ctx context.Context, protocol, model string, header http.Header, body []byte) (*http.Response, error)
}

// Handler serves the model API. obs, when not nil, is told of each call
// (its model, duration and the provider's usage) and of each the budget
// refused: the server's metrics.
func Handler(runs Runs, up Upstream, obs corral.ModelObserver, log *slog.Logger) http.Handler {
	if obs == nil {
		obs = unobserved{}
	}
	s := &server{runs: runs, up: up, obs: obs, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.call(protocol.Chat, protocol.ParseChat))
	mux.HandleFunc("POST /v1/responses", s.call(protocol.Responses, protocol.ParseResponses))
	mux.HandleFunc("POST /v1/messages", s.call(protocol.Messages, protocol.ParseMessages))
	mux.HandleFunc("POST /v1/messages/count_tokens", s.countTokens)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.Handle("/mcp", s.mcp())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		protocol.WriteError(w, protocolOf(r), http.StatusNotFound, "Corral's gateway serves /v1/chat/completions, /v1/responses, /v1/messages, /v1/models and /mcp")
	})
	return mux
}

// nativeOutputField is the field of a passed-through call's request that
// caps its output.
var nativeOutputField = map[protocol.Protocol]string{
	protocol.Responses: "max_output_tokens",
	protocol.Messages:  "max_tokens",
}

type server struct {
	runs Runs
	up   Upstream
	obs  corral.ModelObserver
	log  *slog.Logger
}

// unobserved is the observer of a Handler given none.
type unobserved struct{}

func (unobserved) ModelCall(corral.ModelCallStats) {}
func (unobserved) BudgetRefused()                  {}

// token is the run's token as a CLI sends it: a bearer token (OpenAI) or
// x-api-key (Anthropic).
func token(r *http.Request) string {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return strings.TrimSpace(r.Header.Get("x-api-key"))
}

// protocolOf guesses the protocol of a request for its error's shape.
func protocolOf(r *http.Request) protocol.Protocol {
	if strings.HasPrefix(r.URL.Path, "/v1/messages") || r.Header.Get("anthropic-version") != "" {
		return protocol.Messages
	}
	return protocol.Chat
}

// authorize answers the grant of the request's token, or writes the
// refusal. The same answer for a token that never was and one whose run
// ended.
func (s *server) authorize(w http.ResponseWriter, r *http.Request, p protocol.Protocol) corral.CLIGrant {
	g, err := s.runs.Authorize(r.Context(), token(r))
	if err == nil && g.Run() != sessionOf(r.Context()) {
		// Another run's token, carried into this session: refused like
		// one that never was.
		err = corral.Errorf(corral.EUNAUTH, "the token is not this session's run's")
	}
	if err != nil {
		status := http.StatusUnauthorized
		msg := "the key is not a running run's token: the run has ended, or the key is not Corral's"
		if corral.ErrorCode(err) != corral.EUNAUTH {
			s.log.Error("authorizing a model call", "err", err)
			status, msg = http.StatusServiceUnavailable, "Corral could not check the key; try again"
		}
		protocol.WriteError(w, p, status, msg)
		return nil
	}
	return g
}

func (s *server) call(p protocol.Protocol, parse func([]byte) (protocol.Call, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g := s.authorize(w, r, p)
		if g == nil {
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			protocol.WriteError(w, p, http.StatusRequestEntityTooLarge, "the request is larger than Corral's gateway takes (32 MiB)")
			return
		}
		native := p != protocol.Chat && s.up.Native(p.String())
		var call protocol.Call
		if !native {
			if call, err = parse(body); err != nil {
				protocol.WriteError(w, p, http.StatusBadRequest, corral.ErrorMessage(err))
				return
			}
		}
		// The call goes with an output cap, so that its ceiling bounds
		// what it can spend.
		field, limit := s.up.MaxOutput()
		fields := []string{field, "max_tokens", "max_completion_tokens"}
		sent := &call.Chat
		if native {
			fields, sent = []string{nativeOutputField[p]}, &body
		}
		out, err := protocol.CapOutput(*sent, limit, fields...)
		if err != nil {
			protocol.WriteError(w, p, http.StatusBadRequest, corral.ErrorMessage(err))
			return
		}
		*sent = out
		rec := corral.CLICall{Protocol: p.String(), Dropped: call.Dropped, Native: native}
		if err := g.Reserve(r.Context(), corral.Ceiling(len(*sent), limit)); err != nil {
			if corral.ErrorCode(err) == corral.EADMISSION {
				s.obs.BudgetRefused()
				protocol.WriteBudget(w, p, corral.ErrorMessage(err))
				return
			}
			s.log.Error("checking a model call's budget", "run", g.Run(), "err", err)
			protocol.WriteError(w, p, http.StatusServiceUnavailable, "Corral could not check the budget; try again")
			return
		}
		// Not the client's context: a client that goes away mid-answer must not
		// cut the provider off before its usage comes (Relay drains it,
		// bounded).
		upCtx := context.WithoutCancel(r.Context())
		stats := corral.ModelCallStats{Operation: corral.ModelChat, Model: s.up.ModelName(g.Model())}
		start := time.Now()
		var resp *http.Response
		if native {
			resp, err = s.up.ForwardNative(upCtx, p.String(), g.Model(), r.Header, body)
		} else {
			resp, err = s.up.Forward(upCtx, g.Model(), call.Chat)
		}
		if err != nil {
			stats.Took, stats.Failure = time.Since(start), corral.ModelFailure(0, err)
			s.obs.ModelCall(stats)
			rec.Error = corral.ErrorMessage(err)
			g.Record(r.Context(), corral.Tokens{}, true, rec)
			protocol.WriteError(w, p, http.StatusBadGateway, corral.ErrorMessage(err))
			return
		}
		defer resp.Body.Close()
		var res protocol.Result
		if native {
			res = protocol.RelayNative(r.Context(), w, resp, p, len(body))
		} else {
			res = protocol.Relay(r.Context(), w, resp, call)
		}
		rec.Model, rec.Status, rec.Estimated, rec.Aborted, rec.Finish = res.Model, res.Status, res.Usage.Estimated, res.ClientGone, res.Finish
		if res.Err != nil {
			rec.Error = res.Err.Error()
		}
		// The provider's own figures only: an estimate is not its usage.
		stats.Took, stats.Failure = time.Since(start), corral.ModelFailure(res.Status, res.Err)
		if stats.Reported = res.Status/100 == 2 && !res.Usage.Estimated; stats.Reported {
			stats.Usage = corral.Tokens{Input: res.Usage.Input, Output: res.Usage.Output}
		}
		s.obs.ModelCall(stats)
		if err := g.Record(r.Context(), corral.Tokens{Input: res.Usage.Input, Output: res.Usage.Output}, true, rec); err != nil {
			s.log.Error("metering a model call", "run", g.Run(), "err", err)
		}
	}
}

func (s *server) countTokens(w http.ResponseWriter, r *http.Request) {
	if g := s.authorize(w, r, protocol.Messages); g == nil {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		protocol.WriteError(w, protocol.Messages, http.StatusRequestEntityTooLarge, "the request is larger than Corral's gateway takes (32 MiB)")
		return
	}
	out, err := protocol.CountTokens(body)
	if err != nil {
		protocol.WriteError(w, protocol.Messages, http.StatusBadRequest, corral.ErrorMessage(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

func (s *server) models(w http.ResponseWriter, r *http.Request) {
	p := protocolOf(r)
	g := s.authorize(w, r, p)
	if g == nil {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(protocol.Models(p, []string{s.up.ModelName(g.Model())}))
}

// Listen makes the gateway's unix socket at path, mode 0600: only this
// user (the server, and the supervisors it starts) may connect. A stale
// socket of an earlier process is replaced. The path may be longer than a
// socket address holds: it is bound through its directory's descriptor.
// Each connection it accepts starts with corral.GatewayPreamble, the
// session it comes from (Serve reads it).
func Listen(path string) (net.Listener, error) { return relay.ListenSocket(path) }

// Serve serves h on ln until it is closed: each connection's first line
// names its session (corral.GatewayPreamble), read before any request
// and kept in the requests' context; a connection without one is closed.
func Serve(ln net.Listener, h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, sessionKey{}, c.(*sessionConn).session)
		},
	}
	go srv.Serve(&preambleListener{ln})
	return srv
}

type sessionKey struct{}

// sessionOf is the session a request came from; "" for none.
func sessionOf(ctx context.Context) string {
	s, _ := ctx.Value(sessionKey{}).(string)
	return s
}

// preambleListener reads each connection's preamble before handing it on.
type preambleListener struct{ net.Listener }

// sessionConn is a connection whose preamble has been read; reads go
// through the buffer that read it.
type sessionConn struct {
	net.Conn
	r       *bufio.Reader
	session string
}

func (c *sessionConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (l *preambleListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReaderSize(c, 4096)
		line, err := r.ReadSlice('\n')
		prefix := strings.TrimSuffix(corral.GatewayPreamble(""), "\n")
		session, ok := strings.CutPrefix(strings.TrimSuffix(string(line), "\n"), prefix)
		if err != nil || !ok || session == "" {
			c.Close() // not a supervisor's connection
			continue
		}
		c.SetReadDeadline(time.Time{})
		return &sessionConn{Conn: c, r: r, session: session}, nil
	}
}
