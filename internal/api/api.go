// Package api is Corral's HTTP interface: one route table, thin handlers
// (decode, call the service, encode), one map from error code to status,
// and the JSON views that decide field by field what leaves the server.
package api

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"corral"
	"corral/internal/service"
)

// CookieName is the session cookie.
const CookieName = "corral_session"

// MaxBody bounds every request body: the largest legitimate one is a
// message at sanitize.MaxContent, which JSON escaping can grow up to six
// times.
const MaxBody = 2 << 20

// Config holds the HTTP settings.
type Config struct {
	// SecureCookies marks the session cookie Secure even when the request
	// did not arrive over TLS (set it behind a TLS-terminating proxy).
	SecureCookies bool
	Log           *slog.Logger
	// Done, when closed, ends every long-lived stream (run events), so a
	// graceful shutdown need not wait for runs to end.
	Done <-chan struct{}
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed: a request whose TCP peer is in one of them is counted
	// (login and signup throttling) by the client the header names. Empty,
	// the header is ignored, since anyone can send it.
	TrustedProxies []netip.Prefix
	// MaxStreams caps the live event streams in all, and
	// MaxStreamsPerSession those of one session cookie or API token; zero
	// means DefaultMaxStreams and DefaultMaxStreamsPerSession. Each stream
	// holds a connection and a watcher for as long as its run lasts.
	MaxStreams, MaxStreamsPerSession int
	// StreamWriteTimeout bounds each write to an event stream: a client
	// that stops reading for that long is dropped. Zero means
	// DefaultStreamWriteTimeout.
	StreamWriteTimeout time.Duration
}

// Server answers the API.
type Server struct {
	accounts  *service.Accounts
	agents    *service.Agents
	decisions *service.Decisions
	files     *service.Files
	repos     *service.Repositories
	runs      *service.Runs
	cfg       Config
	handler   http.Handler
	streams   *streamSlots

	// Each nil answers unavailable.
	credentials *service.Credentials
	documents   *service.Documents
	egress      *service.Egress
	nodes       *service.Nodes
	models      *service.Models
	ops         *service.Operations
}

// Services are the use cases the API serves. Accounts, Agents,
// Decisions, Files, Repositories and Runs are required; without one of
// the others its routes answer unavailable (Nodes: role control only).
type Services struct {
	Accounts     *service.Accounts
	Agents       *service.Agents
	Decisions    *service.Decisions
	Files        *service.Files
	Repositories *service.Repositories
	Runs         *service.Runs
	Credentials  *service.Credentials
	Documents    *service.Documents
	Egress       *service.Egress
	Models       *service.Models
	Nodes        *service.Nodes
	Operations   *service.Operations
}

// handlerFunc is an API handler: it writes its answer or returns an error
// for the server to write. actor is the signed-in user, zero for routes that
// need none.
type handlerFunc func(w http.ResponseWriter, r *http.Request, actor corral.User) error

type route struct {
	method, path string
	auth         bool // the caller must be signed in
	handle       handlerFunc
}

// routes is the one route table. openapi.json is generated from it (and
// from contract_paths.go, which documents each route): see contract.go.
func (s *Server) routes() []route {
	return []route{
		{"POST", "/api/auth/signup", false, s.signup},
		{"POST", "/api/auth/login", false, s.login},
		{"POST", "/api/auth/logout", false, s.logout},
		{"GET", "/api/setup", false, s.setup},
		{"GET", "/api/me", true, s.me},
		{"GET", "/api/tokens", true, s.listTokens},
		{"POST", "/api/tokens", true, s.createToken},
		{"DELETE", "/api/tokens/{id}", true, s.deleteToken},
		{"GET", "/api/credentials", true, s.listCredentials},
		{"POST", "/api/credentials", true, s.createCredential},
		{"PATCH", "/api/credentials/{id}", true, s.patchCredential},
		{"DELETE", "/api/credentials/{id}", true, s.deleteCredential},
		{"GET", "/api/users", true, s.listUsers},
		{"POST", "/api/users/{id}/disable", true, s.disableUser},
		{"POST", "/api/users/{id}/enable", true, s.enableUser},
		{"POST", "/api/invites", true, s.createInvite},
		{"GET", "/api/models", true, s.listModels},
		{"GET", "/api/limits", true, s.limits},
		{"GET", "/api/egress/presets", true, s.listEgressPresets},

		{"GET", "/api/agents", true, s.listAgents},
		{"POST", "/api/agents", true, s.createAgent},
		{"GET", "/api/agents/{id}", true, s.getAgent},
		{"PATCH", "/api/agents/{id}", true, s.updateAgent},
		{"DELETE", "/api/agents/{id}", true, s.deleteAgent},
		{"POST", "/api/agents/{id}/release", true, s.releaseAgent},
		{"GET", "/api/agents/{id}/grants", true, s.listGrants},
		{"POST", "/api/agents/{id}/grants", true, s.grantByEmail},
		{"PUT", "/api/agents/{id}/grants/{user_id}", true, s.putGrant},
		{"DELETE", "/api/agents/{id}/grants/{user_id}", true, s.deleteGrant},
		{"GET", "/api/agents/{id}/links", true, s.listLinks},
		{"POST", "/api/agents/{id}/links", true, s.createLink},
		{"DELETE", "/api/agents/{id}/links/{link_id}", true, s.deleteLink},
		{"POST", "/api/links/{token}/accept", true, s.acceptLink},
		{"POST", "/api/agents/{id}/accept", true, s.acceptAgent},
		{"GET", "/api/agents/{id}/messages", true, s.listMessages},
		{"POST", "/api/agents/{id}/messages", true, s.postMessage},
		{"GET", "/api/agents/{id}/runs", true, s.listRuns},
		{"GET", "/api/runs/{id}", true, s.getRun},
		{"GET", "/api/runs/{id}/trace", true, s.getTrace},
		{"GET", "/api/runs/{id}/tree", true, s.getTree},
		{"GET", "/api/runs/{id}/events", true, s.runEvents},
		{"POST", "/api/runs/{id}/stop", true, s.stopRun},
		{"POST", "/api/runs/{id}/kill", true, s.killRun},
		{"GET", "/api/runs/{id}/terminal", true, s.runTerminal},
		{"POST", "/api/agents/{id}/terminal", true, s.startTerminal},
		{"GET", "/api/agents/{id}/changes", true, s.listChanges},
		{"GET", "/api/changes", true, s.waitingChanges},
		{"GET", "/api/changes/{id}", true, s.getChange},
		{"POST", "/api/changes/{id}/approve", true, s.approveChange},
		{"POST", "/api/changes/{id}/reject", true, s.rejectChange},
		{"GET", "/api/agents/{id}/files", true, s.readFile},
		{"PUT", "/api/agents/{id}/files", true, s.writeFile},
		{"PUT", "/api/agents/{id}/repository", true, s.putRepository},
		{"GET", "/api/agents/{id}/repository", true, s.getRepository},
		{"GET", "/api/agents/{id}/repository/commits", true, s.listRepositoryCommits},
		{"POST", "/api/agents/{id}/repository/push", true, s.pushRepository},
		{"POST", "/api/agents/{id}/repository/sync", true, s.syncRepository},
		{"GET", "/api/agents/{id}/trace", true, s.getAgentTrace},
		{"DELETE", "/api/agents/{id}/files", true, s.deleteFile},
		{"POST", "/api/agents/{id}/workspace/import", true, s.importWorkspace},
		{"GET", "/api/agents/{id}/workspace/archive", true, s.archiveWorkspace},
		{"POST", "/api/agents/{id}/documents", true, s.uploadDocument},
		{"GET", "/api/agents/{id}/documents", true, s.listDocuments},
		{"DELETE", "/api/agents/{id}/documents/{doc_id}", true, s.deleteDocument},
		{"POST", "/api/agents/{id}/search", true, s.searchDocuments},
		{"GET", "/api/agents/{id}/secrets", true, s.listSecrets},
		{"POST", "/api/agents/{id}/secrets", true, s.createSecret},
		{"DELETE", "/api/agents/{id}/secrets/{secret_id}", true, s.deleteSecret},
		{"POST", "/api/library/documents", true, s.publishDocument},
		{"GET", "/api/library/documents", true, s.listLibrary},
		{"DELETE", "/api/library/documents/{doc_id}", true, s.unpublishDocument},
		{"GET", "/api/nodes", true, s.listNodes},
		{"POST", "/api/nodes/{id}/drain", true, s.drainNode},
		{"DELETE", "/api/nodes/{id}/drain", true, s.undrainNode},
		{"POST", "/api/nodes/{id}/agents", true, s.moveAgent},
		{"GET", "/api/usage", true, s.usage},
		{"GET", "/api/audit", true, s.audit},
		{"GET", "/api/runs", true, s.runsInFlight},
		{"GET", "/api/admin/budgets", true, s.budgets},

		{"GET", "/api/openapi.json", false, serveOpenAPI},
	}
}

// New returns the API server.
func New(cfg Config, svc Services) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.MaxStreamsPerSession <= 0 {
		cfg.MaxStreamsPerSession = DefaultMaxStreamsPerSession
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	s := &Server{accounts: svc.Accounts, agents: svc.Agents, decisions: svc.Decisions, files: svc.Files, repos: svc.Repositories, runs: svc.Runs,
		credentials: svc.Credentials, documents: svc.Documents, egress: svc.Egress, nodes: svc.Nodes, models: svc.Models,
		ops: svc.Operations, cfg: cfg, streams: newStreamSlots(cfg.MaxStreams, cfg.MaxStreamsPerSession)}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	s.handler = s.outer(unmatched(mux))
	return s
}

// outer is what every answer goes through before its route: cross-site
// requests are refused, and each request is logged.
func (s *Server) outer(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, corral.Errorf(corral.EFORBIDDEN, "cross-site request refused"))
	}))
	return cop.Handler(s.logged(h))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// wrap authenticates the caller when the route needs it, runs the handler,
// and writes its error.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var actor corral.User
		if rt.auth {
			u, err := s.authenticate(r)
			if err != nil {
				writeError(w, err)
				return
			}
			actor = u
		}
		if err := rt.handle(w, r, actor); err != nil {
			s.logError(r, err)
			writeError(w, err)
		}
	})
}

// authenticate resolves the caller from a bearer token, or else from the
// session cookie. A request that presents a bearer token is judged on it
// alone.
func (s *Server) authenticate(r *http.Request) (corral.User, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return corral.User{}, corral.Errorf(corral.EUNAUTH, "Authorization must be \"Bearer <token>\"")
		}
		return s.accounts.TokenUser(r.Context(), strings.TrimSpace(token))
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		return corral.User{}, corral.Errorf(corral.EUNAUTH, "sign in first")
	}
	return s.accounts.SessionUser(r.Context(), c.Value)
}

// unmatched turns the mux's plain-text 404 and 405 answers into the API's
// error shape.
func unmatched(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r) // sets r.Pattern and path values
			return
		}
		rec := &discardWriter{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			writeError(w, corral.Errorf(corral.ENOTALLOWED, "method %s not allowed here", r.Method))
			return
		}
		writeError(w, corral.Errorf(corral.ENOTFOUND, "no such endpoint"))
	})
}

// NotFound answers every request, whatever its method, with the API's 404
// for an unknown endpoint. The server mounts it on /v1/, the model
// gateway's paths, which only sandboxes are served: a client calling them
// here gets JSON, never the web app's page.
func NotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, corral.Errorf(corral.ENOTFOUND, "no such endpoint"))
	})
}

// discardWriter keeps the status and headers of the mux's own answer and
// drops its plain-text body.
type discardWriter struct {
	header http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(status int)      { d.status = status }

// statusOf maps each error code to its HTTP status.
var statusOf = map[string]int{
	corral.EINVALID:    http.StatusBadRequest,
	corral.ENAME:       http.StatusBadRequest,
	corral.ECONTENT:    http.StatusBadRequest,
	corral.EUNAUTH:     http.StatusUnauthorized,
	corral.EFORBIDDEN:  http.StatusForbidden,
	corral.ENOTFOUND:   http.StatusNotFound,
	corral.ENOTALLOWED: http.StatusMethodNotAllowed,
	corral.ECONFLICT:   http.StatusConflict,
	corral.ETOOLARGE:   http.StatusRequestEntityTooLarge,
	corral.EADMISSION:  http.StatusUnprocessableEntity,
	corral.ETHROTTLED:  http.StatusTooManyRequests,
	corral.EUNAVAIL:    http.StatusServiceUnavailable,
	corral.EINTERNAL:   http.StatusInternalServerError,
}

type errorBody struct {
	Error errorView `json:"error"`
}

type errorView struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
}

func writeError(w http.ResponseWriter, err error) {
	code := corral.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok {
		code, status = corral.EINTERNAL, http.StatusInternalServerError
	}
	body := errorView{Code: code, Message: corral.ErrorMessage(err)}
	var e *corral.Error
	if errors.As(err, &e) {
		body.Reason = e.Reason
		if e.RetryAfter > 0 {
			secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		}
	}
	writeJSON(w, status, errorBody{body})
}

func (s *Server) logError(r *http.Request, err error) {
	if corral.ErrorCode(err) != corral.EINTERNAL {
		return
	}
	// r.Pattern, never r.URL.Path: paths can carry a share link's token.
	s.cfg.Log.ErrorContext(r.Context(), "request failed", "method", r.Method, "route", r.Pattern, "err", err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v) // the status is sent: a broken connection is the client's to notice
}

// decode reads a JSON body into v: bounded in size, unknown fields and
// trailing data refused. The body must be valid UTF-8 with no lone
// surrogate escaped in it (ECONTENT): encoding/json would quietly turn
// either into U+FFFD, and the user's text would not be what they sent.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return decodeError(err)
	}
	if !utf8.Valid(body) {
		return corral.Errorf(corral.ECONTENT, "request body is not valid UTF-8")
	}
	if loneSurrogate(body) {
		return corral.Errorf(corral.ECONTENT, `request body escapes a lone UTF-16 surrogate (a \ud800-\udfff not in a pair)`)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		if err == nil {
			return corral.Errorf(corral.EINVALID, "request body must hold one JSON object")
		}
		return decodeError(err)
	}
	return nil
}

// loneSurrogate reports whether b escapes a UTF-16 surrogate that is not
// half of a pair: a high one (\ud800-\udbff) not followed at once by an
// escaped low one (\udc00-\udfff), or a low one on its own. It reads every
// backslash escape, in strings or not: outside a string a backslash is a
// syntax error the decoder reports anyway.
func loneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return false
		}
		i += j
		if i+1 >= len(b) || b[i+1] != 'u' {
			i++ // \" \\ \n ...: skip the escaped byte
			continue
		}
		c, ok := hex4(b[i+2:])
		switch {
		case !ok:
			return false // malformed: the decoder refuses it
		case 0xdc00 <= c && c <= 0xdfff:
			return true
		case 0xd800 <= c && c <= 0xdbff:
			if i+11 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
				return true
			}
			if lo, ok := hex4(b[i+8:]); !ok || lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 11 // the pair
		default:
			i += 5
		}
	}
	return false
}

// hex4 parses the four hex digits that start b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var c rune
	for _, x := range b[:4] {
		switch {
		case '0' <= x && x <= '9':
			c = c<<4 | rune(x-'0')
		case 'a' <= x && x <= 'f':
			c = c<<4 | rune(x-'a'+10)
		case 'A' <= x && x <= 'F':
			c = c<<4 | rune(x-'A'+10)
		default:
			return 0, false
		}
	}
	return c, true
}

func decodeError(err error) error {
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooLarge):
		return corral.Errorf(corral.ETOOLARGE, "request body is larger than %d bytes", tooLarge.Limit)
	case errors.Is(err, io.EOF):
		return corral.Errorf(corral.EINVALID, "request body is empty: send a JSON object")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return corral.Errorf(corral.EINVALID, "request body is not valid JSON")
	case errors.As(err, &typ):
		return corral.Errorf(corral.EINVALID, "field %q must be %s", typ.Field, typ.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for unknown fields.
		return corral.Errorf(corral.EINVALID, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return corral.Errorf(corral.EINVALID, "request body could not be read")
	}
}

// clientAddr is the address login and signup throttling count per client:
// the TCP peer, or behind a trusted proxy the client it forwarded for.
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	return clientAddrOf(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), s.cfg.TrustedProxies)
}

// clientAddrOf finds the client of a request from peer, its TCP peer
// (host:port), and forwarded, its X-Forwarded-For lines. Only a trusted peer's
// header counts. Each proxy appends the address it saw, so the list is read
// from the right: the rightmost address that is not one of our proxies is the
// first one no proxy of ours vouches for, the client; everything left of it
// came from the client and may be forged. When every entry is a trusted proxy,
// the leftmost is the farthest known. An absent header or a malformed entry
// reached on the way leaves the peer itself: the proxy then counts as the
// client, which throttles more, never less.
func clientAddrOf(peer string, forwarded []string, trusted []netip.Prefix) netip.Addr {
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return netip.IPv6Unspecified()
	}
	addr := ap.Addr().Unmap().WithZone("")
	if !inPrefixes(addr, trusted) || len(forwarded) == 0 {
		return addr
	}
	var hops []string
	for _, line := range forwarded {
		hops = append(hops, strings.Split(line, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			return addr
		}
		if i == 0 || !inPrefixes(hop, trusted) {
			return hop
		}
	}
	return addr
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a port
// ("192.0.2.1:4711", "[2001:db8::1]:4711") or in brackets, as some proxies
// write them.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if inner, ok := strings.CutPrefix(s, "["); ok {
		if s, ok = strings.CutSuffix(inner, "]"); !ok {
			return netip.Addr{}, false
		}
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

func inPrefixes(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// statusRecorder remembers the status for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logged writes one line per request. It logs the route pattern rather than
// the path, and never headers, so no token reaches the log.
func (s *Server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		s.cfg.Log.LogAttrs(context.Background(), slog.LevelDebug, "request",
			slog.String("method", r.Method), slog.String("route", r.Pattern),
			slog.Int("status", rec.status), slog.Duration("took", time.Since(start)))
	})
}

//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, r *http.Request, _ corral.User) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPI)
	return err
}
