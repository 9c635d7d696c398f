// Package api is Corral's HTTP interface: one route table, thin handlers
// (decode, call the service, encode), one map from error code to status,
// and the JSON views that decide field by field what leaves the server.
package api

import (
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
}

// Server answers the API.
type Server struct {
	accounts *service.Accounts
	agents   *service.Agents
	changes  *service.Changes
	runs     *service.Runs
	cfg      Config
	handler  http.Handler
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

// routes is the one route table. The OpenAPI test keeps openapi.json in step
// with it.
func (s *Server) routes() []route {
	return []route{
		{"POST", "/api/auth/signup", false, s.signup},
		{"POST", "/api/auth/login", false, s.login},
		{"POST", "/api/auth/logout", false, s.logout},
		{"GET", "/api/me", true, s.me},
		{"GET", "/api/tokens", true, s.listTokens},
		{"POST", "/api/tokens", true, s.createToken},
		{"DELETE", "/api/tokens/{id}", true, s.deleteToken},
		{"GET", "/api/users", true, s.listUsers},
		{"POST", "/api/users/{id}/disable", true, s.disableUser},
		{"POST", "/api/users/{id}/enable", true, s.enableUser},
		{"POST", "/api/invites", true, s.createInvite},

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
		{"GET", "/api/agents/{id}/messages", true, s.listMessages},
		{"POST", "/api/agents/{id}/messages", true, s.postMessage},
		{"GET", "/api/agents/{id}/runs", true, s.listRuns},
		{"GET", "/api/runs/{id}", true, s.getRun},
		{"GET", "/api/runs/{id}/trace", true, s.getTrace},
		{"GET", "/api/runs/{id}/events", true, s.runEvents},
		{"POST", "/api/runs/{id}/stop", true, s.stopRun},
		{"POST", "/api/runs/{id}/kill", true, s.killRun},
		{"GET", "/api/agents/{id}/changes", true, s.listChanges},
		{"GET", "/api/changes/{id}", true, s.getChange},
		{"POST", "/api/changes/{id}/approve", true, s.approveChange},
		{"POST", "/api/changes/{id}/reject", true, s.rejectChange},
		{"GET", "/api/agents/{id}/files", true, s.readFile},
		{"PUT", "/api/agents/{id}/files", true, s.writeFile},

		{"GET", "/api/openapi.json", false, serveOpenAPI},
	}
}

// New returns the API server.
func New(cfg Config, accounts *service.Accounts, agents *service.Agents, changes *service.Changes, runs *service.Runs) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{accounts: accounts, agents: agents, changes: changes, runs: runs, cfg: cfg}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, corral.Errorf(corral.EFORBIDDEN, "cross-site request refused"))
	}))
	s.handler = cop.Handler(s.logged(unmatched(mux)))
	return s
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
// trailing data refused.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
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

// clientAddr is the address login throttling counts per client.
func clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.IPv6Unspecified()
	}
	return ap.Addr()
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
