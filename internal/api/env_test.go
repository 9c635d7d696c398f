package api_test

import (
	"bytes"
	"context"
	"corral/internal/api"
	"corral/internal/app"
	"corral/internal/pgtest"
	"corral/internal/toolstest"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"

	"corral/internal/archive"
	"corral/internal/auth"
	"corral/internal/egress"
	"corral/internal/gateway"
	"corral/internal/modeltest"
	"corral/internal/node"
	"corral/internal/protocol"
	"corral/internal/retrieval"
	"corral/internal/runner"
	"corral/internal/service"
	"corral/internal/store"
)

// env is a real Corral API over a real SQLite database in a temp dir.
type env struct {
	t         testing.TB
	db        *store.DB
	dbPath    string
	api       *api.Server
	srv       *httptest.Server
	clock     *fakeClock
	stages    *service.Stages
	decisions *service.Decisions
	repos     *service.Repositories
	sessions  *node.Local
	dataDir   string
	model     *modeltest.Provider
	runner    *runner.Runner
	creds     *service.Credentials
	provider  *gateway.Gateway
	native    *native // with envOptions.native
	runs      *service.Runs
	deleg     *service.Delegation
	docs      *service.Documents
	stores    *retrieval.Stores
	// app is the server the fields above are parts of (restart builds a
	// new one); config and options are what it is built from.
	app     *app.App
	config  app.Config
	options []app.Option
	handler http.Handler // when set, served in place of the app's (serve)

	script modeltest.Script // what the fake model answers; set with e.answer

	mu     sync.Mutex
	bodies [][]byte // every answer, for the no-secrets walk
}

type envOptions struct {
	signup string
	// postgres keeps the store in a new PostgreSQL database (pgtest)
	// instead of SQLite in the data directory.
	postgres bool
	params   auth.Params
	// noModel leaves the model provider unconfigured.
	noModel bool
	// api is the API's own configuration (stream caps, trusted proxies).
	api api.Config
	// imports bounds archive imports (serve's --import-max-* flags).
	imports archive.Limits
	// gitCA is the only CA the node's git trusts: the test git server's
	// (production code has no switch that allows plain http).
	gitCA string
	// native puts a provider that speaks the Responses API and Messages
	// itself in front of the scripted one (see nativeProvider), and tells
	// the gateway to pass those calls through.
	native bool
	// caps are the delegation caps (zero fields: the defaults).
	caps corral.TreeCaps
	// embedModel turns on document embeddings (the fake provider's);
	// threshold sets retrieval's (0: the calibrated default).
	embedModel string
	threshold  float64
	// wrapNode, when set, stands between the runs service and the node
	// (a recorder of what crosses to it).
	wrapNode func(corral.Sessions) corral.Sessions
	// maxOutput is the gateway's output cap (0: its default), what each
	// call reserves beyond its request's bytes.
	maxOutput int64
	// egress is where the node's clones and pushes may connect (nil:
	// loopbackEgress, for the tests' git servers).
	egress *egress.Policy
	// pendingDisk bounds what pending change sets hold per person and in
	// all (serve's --pending-disk-*; zero fields: the defaults).
	pendingDisk service.PendingDiskBounds
	// egressResolver resolves names for the egress proxy (nil: the
	// system's); egressCA is a CA it trusts upstream (--egress-ca-file);
	// egressMaxBytes caps one run's traffic through it (0: the default).
	egressResolver *net.Resolver
	egressCA       string
	egressMaxBytes int64
	// metricsAddr serves the metrics and health checks there without
	// credentials (serve's --metrics-addr).
	metricsAddr string
	// otlp is the collector the runs' spans go to (--otlp-endpoint; "":
	// none).
	otlp string
}

// testModelKey is the fake provider's key: it must never show in an
// answer, a trace or the log.
const testModelKey = "sk-test-0123456789abcdef-SECRET"

// fakeClock drives the throttle and sessions without sleeping.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// cheapParams keep tests that log in hundreds of times fast; one test
// (TestPasswordsUseOWASPParameters) checks what the server really uses.
var cheapParams = auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func newEnv(t testing.TB, opt envOptions) *env {
	t.Helper()
	if opt.params == (auth.Params{}) {
		opt.params = cheapParams
	}
	clock := &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	e := &env{t: t, clock: clock}
	e.dataDir = t.TempDir()
	e.dbPath = app.DBPath(e.dataDir)
	// The sandbox's user must reach staged trees under it; t.TempDir
	// makes its parent private.
	if err := os.Chmod(filepath.Dir(e.dataDir), 0o711); err != nil {
		t.Fatal(err)
	}
	// Pending change sets keep their staged trees (overlay mounts) for
	// review across restarts; a test's must go before its temp dir does.
	t.Cleanup(func() { unmountStages(e.dataDir) })
	e.model = modeltest.New(func(r modeltest.Request) modeltest.Reply {
		e.mu.Lock()
		script := e.script
		e.mu.Unlock()
		if script == nil {
			return modeltest.Text("nothing was scripted")
		}
		return script(r)
	})
	t.Cleanup(e.model.Close)
	gw := gateway.Config{BaseURL: e.model.URL(), APIKey: testModelKey, Model: "test-model", MaxOutput: opt.maxOutput}
	if opt.native {
		e.native = nativeProvider(t, e.model.URL())
		gw.BaseURL, gw.Native = e.native.srv.URL+"/v1", []string{gateway.NativeResponses, gateway.NativeMessages}
	}
	if opt.noModel {
		gw = gateway.Config{}
	}
	// The server as serve builds it (role all), served by the test.
	e.config = app.Config{
		Data: e.dataDir, Role: "all", Signup: opt.signup, Model: gw, ChangeTTL: time.Hour,
		QuarantineAfter: 2, TrustedProxies: opt.api.TrustedProxies, SecureCookies: opt.api.SecureCookies, Imports: opt.imports, GitCAFile: opt.gitCA,
		EgressAllowPrivate: egressOf(opt).AllowPrivate, EgressCAFile: opt.egressCA, EgressMaxBytes: opt.egressMaxBytes, PendingDisk: opt.pendingDisk, Delegation: opt.caps,
		EmbedModel: opt.embedModel, RetrievalThreshold: opt.threshold, MetricsAddr: opt.metricsAddr, OTLPEndpoint: opt.otlp,
		// The agent CLIs, as make tools installed them (cli_test.go).
		ToolsDir: toolstest.Dir(),
	}
	// CORRAL_STORE_TEST=postgres runs the whole suite so.
	if opt.postgres || os.Getenv("CORRAL_STORE_TEST") == "postgres" {
		e.config.Database = pgtest.NewDatabase(t)
	}
	e.options = []app.Option{app.WithClock(clock.Now), app.WithPasswordParams(opt.params), app.WithAPI(opt.api),
		app.WithEgressResolver(opt.egressResolver)}
	if opt.api.Log != nil {
		e.options = append(e.options, app.WithLog(opt.api.Log))
	}
	if opt.wrapNode != nil {
		e.options = append(e.options, app.WithTerminals(func(n corral.Sessions) service.Terminals { return opt.wrapNode(n) }))
	}
	e.start()
	t.Cleanup(e.stop)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		h := e.app.Handler()
		if e.handler != nil {
			h = e.handler
		}
		e.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// start builds the server through app.New, as serve does.
func (e *env) start() {
	e.t.Helper()
	a, err := app.New(context.Background(), e.config, e.options...)
	if err != nil {
		e.t.Fatalf("app.New: %v", err)
	}
	a.Open()
	e.mu.Lock()
	e.app = a
	e.mu.Unlock()
	e.db, e.api, e.sessions, e.runner = a.Store, a.API, a.Node, a.Runner
	e.stages, e.decisions, e.repos = a.Stages, a.Decisions, a.Repositories
	e.creds, e.provider, e.runs, e.deleg, e.docs, e.stores = a.Credentials, a.Model, a.Runs, a.Delegation, a.Documents, a.Stores
}

// serve makes the test's server serve h in place of the app's handler.
func (e *env) serve(h http.Handler) {
	e.mu.Lock()
	e.handler = h
	e.mu.Unlock()
}

// stop closes the server and ends the sessions it leaves running.
func (e *env) stop() {
	e.app.Close()
	e.sessions.EndAll(context.Background())
	e.sessions.Close()
}

// restart stops the server as a crash would (the runs' sessions go on)
// and builds it again over the same data directory, and returns what the
// new one's start-up did with the runs the old one left: reconciled, and
// re-attached to their sessions.
func (e *env) restart() (reconciled, reattached int) {
	e.t.Helper()
	e.app.Close()
	e.start()
	return e.app.Reconciled, e.app.Reattached
}

// client is one caller: anonymous, or signed in with a cookie or a bearer
// token.
type client struct {
	e      *env
	cookie string
	bearer string
	user   api.UserView
}

func (e *env) anon() *client { return &client{e: e} }

// signup creates an account through the API and returns it signed in.
func (e *env) signup(email, name string) *client {
	e.t.Helper()
	c := e.anon()
	res := c.do("POST", "/api/auth/signup", map[string]string{"email": email, "name": name, "password": "correct horse battery"})
	res.want(http.StatusCreated)
	c.cookie = res.cookie(api.CookieName)
	var got api.UserAnswer
	res.decode(&got)
	c.user = got.User
	return c
}

type response struct {
	t      testing.TB
	status int
	header http.Header
	body   []byte
	req    string
}

func (c *client) do(method, path string, body any) *response {
	c.e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			c.e.t.Fatal(err)
		}
		r = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, c.e.srv.URL+path, r)
	if err != nil {
		c.e.t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.CookieName, Value: c.cookie})
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	res, err := c.e.srv.Client().Do(req)
	if err != nil {
		c.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		c.e.t.Fatal(err)
	}
	c.e.mu.Lock()
	c.e.bodies = append(c.e.bodies, data)
	c.e.mu.Unlock()
	return &response{t: c.e.t, status: res.StatusCode, header: res.Header, body: data, req: method + " " + path}
}

func (r *response) want(status int) *response {
	r.t.Helper()
	if r.status != status {
		r.t.Fatalf("%s = %d %s, want %d", r.req, r.status, r.body, status)
	}
	return r
}

func (r *response) decode(v any) {
	r.t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		r.t.Fatalf("%s: decode %s: %v", r.req, r.body, err)
	}
}

func (r *response) code() string {
	var b api.ErrorBody
	_ = json.Unmarshal(r.body, &b)
	return b.Error.Code
}

func (r *response) cookie(name string) string {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name {
			return c.Value
		}
	}
	r.t.Fatalf("%s: no %s cookie in %v", r.req, name, r.header)
	return ""
}

// createAgent makes an agent owned by c and returns its id.
func (c *client) createAgent(name string) string {
	c.e.t.Helper()
	var a api.AgentView
	c.do("POST", "/api/agents", map[string]any{"name": name}).want(http.StatusCreated).decode(&a)
	return a.ID
}

func (c *client) grant(agentID, userID, level string) {
	c.e.t.Helper()
	c.do("PUT", "/api/agents/"+agentID+"/grants/"+userID, map[string]string{"level": level}).want(http.StatusOK)
}

func (c *client) link(agentID, level string) api.LinkView {
	c.e.t.Helper()
	var l api.LinkView
	c.do("POST", "/api/agents/"+agentID+"/links", map[string]string{"level": level}).want(http.StatusCreated).decode(&l)
	return l
}

// rawDB opens the test's database directly, the file or the PostgreSQL
// database, to look at what the API must never show.
func (e *env) rawDB(t testing.TB) rawStore {
	t.Helper()
	driver, dsn := "sqlite", "file:"+e.dbPath+"?mode=ro"
	if e.config.Database != "" {
		driver, dsn = "pgx", e.config.Database
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return rawStore{db: db, pg: driver == "pgx"}
}

// rawStore reads the store with SQL written with SQLite's ? placeholders,
// numbered for PostgreSQL when the store is there.
type rawStore struct {
	db *sql.DB
	pg bool
}

func (r rawStore) q(query string) string {
	if !r.pg {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (r rawStore) QueryRow(query string, args ...any) *sql.Row {
	return r.db.QueryRow(r.q(query), args...)
}

func (r rawStore) Query(query string, args ...any) (*sql.Rows, error) {
	return r.db.Query(r.q(query), args...)
}

func newAccountsForMode(mode string) (*service.Accounts, error) {
	return service.NewAccounts(nil, cheapParams, service.Config{Signup: mode})
}

// loopbackEgress lets the tests' git servers on 127.0.0.1 be reached,
// as serve's --egress-allow-private 127.0.0.0/8 would.
var loopbackEgress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func egressOf(opt envOptions) egress.Policy {
	if opt.egress != nil {
		return *opt.egress
	}
	return loopbackEgress
}

// costly makes a reply spend 30,010 tokens. A call reserves its ceiling
// before it goes (its request's bytes plus the gateway's 32,000-token
// output cap: 35,000 to 45,000 for these tests' requests), so a budget
// holds as many calls as it has room for their ceilings, and pauses a
// run before the call that does not fit.
func costly(r modeltest.Reply) modeltest.Reply {
	r.Usage = &modeltest.Usage{Input: 10, Output: 30_000}
	return r
}

// answer sets what the fake model answers from now on.
func (e *env) answer(script modeltest.Script) {
	e.mu.Lock()
	e.script = script
	e.mu.Unlock()
}

// native is a provider that speaks the Responses API and Anthropic Messages
// itself: it answers them by translating to the scripted Chat Completions
// provider behind it (with internal/protocol, as Corral's gateway would),
// and passes Chat Completions through. It counts the calls it took in each.
type native struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
	keys []string // the key each call carried
}

func nativeProvider(t testing.TB, chatURL string) *native {
	n := &native{hits: map[string]int{}}
	serve := func(p protocol.Protocol, parse func([]byte) (protocol.Call, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("x-api-key")
			if key == "" {
				key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			}
			n.mu.Lock()
			n.hits[p.String()]++
			n.keys = append(n.keys, key)
			n.mu.Unlock()
			body, _ := io.ReadAll(r.Body)
			call, err := parse(body)
			if err != nil {
				protocol.WriteError(w, p, http.StatusBadRequest, err.Error())
				return
			}
			req, _ := http.NewRequestWithContext(r.Context(), "POST", chatURL+"/chat/completions", bytes.NewReader(call.Chat))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				protocol.WriteError(w, p, http.StatusBadGateway, err.Error())
				return
			}
			protocol.Relay(r.Context(), w, resp, call)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", serve(protocol.Responses, protocol.ParseResponses))
	mux.HandleFunc("POST /v1/messages", serve(protocol.Messages, protocol.ParseMessages))
	mux.HandleFunc("POST /v1/chat/completions", serve(protocol.Chat, protocol.ParseChat))
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	return n
}
