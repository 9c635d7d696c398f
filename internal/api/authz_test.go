package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"corral"
	"corral/internal/api"
)

// actors of the authorization matrix, from nobody to the owner.
var actors = []string{"anonymous", "stranger", "viewer", "runner", "editor", "owner", "revoked grantee", "revoked link holder"}

var levelRank = map[string]int{"viewer": 1, "runner": 2, "editor": 3, "owner": 4}

// fixture is one freshly shared agent: each matrix cell gets its own, so a
// destructive request cannot change what the next cell sees.
type fixture struct {
	agent     string
	link      api.LinkView // a live viewer link, joined by nobody
	otherUser string       // an account with no access, for PUT grant
	viewerID  string       // an account holding a grant, for DELETE grant
	run       string       // the agent's run, when the row asks for one
	change    string       // the agent's pending change set, when the row asks for one
	document  string       // the agent's private document, when the row acts on one
	secret    string       // the agent's secret, when the row acts on one
}

// people are the accounts of the matrix, created once.
type people struct {
	e       *env
	admin   *client
	clients map[string]*client
	library string // a library document of an account no cell uses, made on first use
}

// libraryDoc is a document of the library that only its author, an
// account of its own no cell acts as, and an admin may delete.
func (p *people) libraryDoc() string {
	if p.library == "" {
		var d api.DocumentView
		p.e.signup("publisher@example.com", "Publisher").do("POST", "/api/library/documents?name=shared.md", "# Shared\n\nFor everyone.").want(http.StatusCreated).decode(&d)
		p.library = d.ID
	}
	return p.library
}

func newPeople(e *env) *people {
	p := &people{e: e, admin: e.signup("admin@example.com", "Admin"), clients: map[string]*client{}}
	p.clients["anonymous"] = e.anon()
	for _, a := range actors[1:] {
		p.clients[a] = e.signup(strings.ReplaceAll(a, " ", "-")+"@example.com", a)
	}
	p.clients["other"] = e.signup("other@example.com", "Other")
	return p
}

// fixture shares a new agent as the matrix needs and gives it what rt acts
// on: a run, or a change set. actor is the caller of the cell, who starts
// the run when the row is about the caller's own run.
func (p *people) fixture(t *testing.T, rt agentRoute, actor string) fixture {
	t.Helper()
	owner := p.clients["owner"]
	id := owner.createAgent("matrix")
	for _, l := range []string{"viewer", "runner", "editor"} {
		owner.grant(id, p.clients[l].user.ID, l)
	}
	// A grantee whose grant was revoked.
	owner.grant(id, p.clients["revoked grantee"].user.ID, "editor")
	p.clients["revoked grantee"].do("GET", "/api/agents/"+id, nil).want(http.StatusOK)
	owner.do("DELETE", "/api/agents/"+id+"/grants/"+p.clients["revoked grantee"].user.ID, nil).want(http.StatusNoContent)
	// A link holder whose link was deleted.
	gone := owner.link(id, "runner")
	p.clients["revoked link holder"].do("POST", "/api/links/"+gone.Token+"/accept", nil).want(http.StatusOK)
	owner.do("DELETE", "/api/agents/"+id+"/links/"+gone.ID, nil).want(http.StatusNoContent)
	f := fixture{agent: id, link: owner.link(id, "viewer"), otherUser: p.clients["other"].user.ID, viewerID: p.clients["viewer"].user.ID}
	if rt.method == "DELETE" && rt.path == "/api/agents/{id}/files" {
		owner.do("PUT", "/api/agents/"+id+"/files"+rt.query, "to delete").want(http.StatusOK)
	}
	if strings.Contains(rt.path, "{doc_id}") {
		var d api.DocumentView
		owner.do("POST", "/api/agents/"+id+"/documents?name=notes.md", "# Notes\n\nTo delete.").want(http.StatusCreated).decode(&d)
		f.document = d.ID
	}
	if strings.Contains(rt.path, "{secret_id}") {
		var sv api.SecretView
		owner.do("POST", "/api/agents/"+id+"/secrets", map[string]string{"name": "registry", "host": "registry.example.com",
			"header": "Authorization", "value": "Bearer matrix-secret"}).want(http.StatusCreated).decode(&sv)
		f.secret = sv.ID
	}
	if strings.HasPrefix(rt.path, "/api/agents/{id}/repository") && rt.method != "PUT" {
		owner.do("PUT", "/api/agents/"+id+"/repository", map[string]string{"url": matrixRepoURL}).want(http.StatusAccepted)
	}
	switch {
	case strings.HasPrefix(rt.path, "/api/runs/"):
		by := owner.user
		if rt.run == ownPausedRun && actor != "anonymous" {
			by = p.clients[actor].user
		}
		f.run = p.storeRun(t, id, by, rt.run)
	case strings.HasPrefix(rt.path, "/api/changes/"):
		f.change = p.e.propose(t, id, func(tree string) { write(t, filepath.Join(tree, "proposed.txt"), "from the matrix\n") }).ID
	}
	return f
}

// storeRun records a run of agent by the given user straight in the store,
// as admission and the runner would leave it, without running anything: the
// matrix is about who may touch a run, not about running one.
func (p *people) storeRun(t *testing.T, agentID string, by api.UserView, kind runKind) string {
	t.Helper()
	ctx := context.Background()
	now := p.e.clock.Now()
	ref := &corral.UserRef{ID: by.ID, Name: by.Name}
	run := corral.Run{ID: corral.NewID("run"), AgentID: agentID, Status: corral.RunAdmitted, TriggeredBy: ref, CreatedAt: now, StageID: corral.NewID("chg")}
	msg := corral.Message{ID: corral.NewID("msg"), AgentID: agentID, Role: corral.RoleUser, Content: "matrix", Author: ref, RunID: run.ID, CreatedAt: now}
	run.MessageID = msg.ID
	ev := corral.Admission{ID: corral.NewID("adm"), AgentID: agentID, UserID: by.ID, PromptBytes: int64(len(msg.Content)), At: now}
	if _, err := p.e.db.Admit(ctx, msg, run, ev, func(corral.AdmissionFacts) string { return "" }); err != nil {
		t.Fatalf("admit the matrix's run: %v", err)
	}
	run.StartedAt = now
	switch kind {
	case endedRun:
		run.Status, run.EndedAt = corral.RunCompleted, now
	default:
		// A paused run has no loop: stop and kill end it at once.
		run.Status = corral.RunPaused
	}
	if err := p.e.db.UpdateRun(ctx, run, corral.RunAdmitted); err != nil {
		t.Fatalf("set the matrix's run %s: %v", run.Status, err)
	}
	return run.ID
}

// runKind is the run a row on /api/runs/{id} acts on.
type runKind int

const (
	endedRun     runKind = iota // completed, started by the owner
	pausedRun                   // paused, started by the owner
	ownPausedRun                // paused, started by the caller of the cell
)

// agentRoute is a request on one agent (or on its run or change set) and
// the lowest level that may make it.
type agentRoute struct {
	// method and path are a route of the table. {id} is the fixture's agent,
	// run or change set (by the path's prefix), {user_id} the account named
	// by user, {link_id} the fixture's live link.
	method, path string
	query        string // appended to the path
	body         any
	need         string
	ok           int
	user         string  // whose id {user_id} is: "other" (no access) or "viewer" (a grantee)
	run          runKind // the run of a route under /api/runs/
	note         string  // tells apart the rows of one route in test names
}

var agentRoutes = []agentRoute{
	{method: "GET", path: "/api/agents/{id}", need: "viewer", ok: 200},
	{method: "PATCH", path: "/api/agents/{id}", body: map[string]any{"instructions": "be brief"}, note: "instructions", need: "editor", ok: 200},
	{method: "PATCH", path: "/api/agents/{id}", body: map[string]any{"budget": map[string]int{"tokens": 1000}}, note: "budget", need: "owner", ok: 200},
	{method: "DELETE", path: "/api/agents/{id}", need: "owner", ok: 204},
	{method: "POST", path: "/api/agents/{id}/release", need: "owner", ok: 200},
	// Anyone it is shared with accepts it as a delegation target; its
	// owner has nothing to accept, and is answered the same.
	{method: "POST", path: "/api/agents/{id}/accept", need: "viewer", ok: 204},
	{method: "GET", path: "/api/agents/{id}/grants", need: "owner", ok: 200},
	{method: "POST", path: "/api/agents/{id}/grants", body: map[string]string{"email": "other@example.com", "level": "viewer"}, need: "owner", ok: 200},
	{method: "PUT", path: "/api/agents/{id}/grants/{user_id}", user: "other", note: "a new grantee", body: map[string]string{"level": "viewer"}, need: "owner", ok: 200},
	{method: "DELETE", path: "/api/agents/{id}/grants/{user_id}", user: "viewer", note: "a grantee", need: "owner", ok: 204},
	{method: "GET", path: "/api/agents/{id}/links", need: "owner", ok: 200},
	{method: "POST", path: "/api/agents/{id}/links", body: map[string]string{"level": "viewer"}, need: "owner", ok: 201},
	{method: "DELETE", path: "/api/agents/{id}/links/{link_id}", need: "owner", ok: 204},
	{method: "GET", path: "/api/agents/{id}/messages", need: "viewer", ok: 200},
	{method: "POST", path: "/api/agents/{id}/messages", body: map[string]string{"content": "hello"}, need: "runner", ok: 202},
	{method: "GET", path: "/api/agents/{id}/runs", need: "viewer", ok: 200},
	{method: "GET", path: "/api/runs/{id}", need: "viewer", ok: 200},
	{method: "GET", path: "/api/runs/{id}/trace", need: "viewer", ok: 200},
	{method: "GET", path: "/api/runs/{id}/tree", need: "viewer", ok: 200},
	{method: "GET", path: "/api/runs/{id}/events", need: "viewer", ok: 200},   // an ended run: the stream closes at once
	{method: "GET", path: "/api/runs/{id}/terminal", need: "editor", ok: 409}, // an ended run has no terminal
	{method: "POST", path: "/api/agents/{id}/terminal", need: "editor", ok: 201},
	{method: "POST", path: "/api/runs/{id}/stop", run: pausedRun, note: "a paused run", need: "editor", ok: 202},
	{method: "POST", path: "/api/runs/{id}/stop", run: ownPausedRun, note: "the caller's paused run", need: "runner", ok: 202},
	{method: "POST", path: "/api/runs/{id}/kill", run: pausedRun, note: "a paused run", need: "editor", ok: 202},
	{method: "POST", path: "/api/runs/{id}/kill", run: ownPausedRun, note: "the caller's paused run", need: "editor", ok: 202},
	{method: "GET", path: "/api/agents/{id}/changes", need: "viewer", ok: 200},
	{method: "GET", path: "/api/changes/{id}", need: "viewer", ok: 200},
	{method: "POST", path: "/api/changes/{id}/approve", note: "all", need: "editor", ok: 200},
	{method: "POST", path: "/api/changes/{id}/approve", body: map[string][]string{"paths": {"proposed.txt"}}, note: "some paths", need: "editor", ok: 200},
	{method: "POST", path: "/api/changes/{id}/reject", note: "all", need: "editor", ok: 200},
	{method: "POST", path: "/api/changes/{id}/reject", body: map[string][]string{"paths": {"proposed.txt"}}, note: "some paths", need: "editor", ok: 200},
	{method: "GET", path: "/api/agents/{id}/files", query: "?path=", need: "viewer", ok: 200},
	{method: "PUT", path: "/api/agents/{id}/files", query: "?path=notes.txt", body: "uploaded", need: "editor", ok: 200},
	{method: "DELETE", path: "/api/agents/{id}/files", query: "?path=notes.txt", need: "editor", ok: 204}, // the fixture uploads notes.txt
	{method: "POST", path: "/api/agents/{id}/workspace/import", body: matrixTar(), need: "editor", ok: 200},
	{method: "GET", path: "/api/agents/{id}/workspace/archive", need: "viewer", ok: 200},
	{method: "PUT", path: "/api/agents/{id}/repository", body: map[string]string{"url": matrixRepoURL}, need: "editor", ok: 202},
	{method: "GET", path: "/api/agents/{id}/repository", need: "viewer", ok: 200},                                                  // the fixture starts a clone
	{method: "GET", path: "/api/agents/{id}/repository/commits", need: "viewer", ok: 200},                                          // the fixture starts a clone
	{method: "POST", path: "/api/agents/{id}/repository/push", body: map[string]string{"branch": "main"}, need: "editor", ok: 409}, // not ready: the clone cannot succeed
	{method: "POST", path: "/api/agents/{id}/repository/sync", need: "editor", ok: 409},                                            // not ready: the clone cannot succeed
	{method: "GET", path: "/api/agents/{id}/trace", need: "viewer", ok: 200},
	{method: "POST", path: "/api/agents/{id}/documents", query: "?name=guide.md", body: "# Guide\n\nHow we deploy.", need: "editor", ok: 201},
	{method: "GET", path: "/api/agents/{id}/documents", need: "viewer", ok: 200},
	{method: "DELETE", path: "/api/agents/{id}/documents/{doc_id}", need: "editor", ok: 204}, // the fixture uploads one
	{method: "POST", path: "/api/agents/{id}/search", body: map[string]string{"query": "how we deploy"}, need: "viewer", ok: 200},
	{method: "GET", path: "/api/agents/{id}/secrets", need: "viewer", ok: 200},
	{method: "POST", path: "/api/agents/{id}/secrets", body: map[string]string{"name": "npm", "host": "registry.npmjs.org",
		"header": "Authorization", "value": "Bearer matrix"}, need: "editor", ok: 201},
	{method: "DELETE", path: "/api/agents/{id}/secrets/{secret_id}", need: "editor", ok: 204}, // the fixture adds one
}

// matrixRepoURL is a repository nobody serves: its clone fails, quickly.
const matrixRepoURL = "https://127.0.0.1:1/matrix.git"

func (rt agentRoute) String() string {
	s := rt.method + " " + rt.path + rt.query
	if rt.note != "" {
		s += " (" + rt.note + ")"
	}
	return s
}

// url fills the path from the fixture; id replaces what {id} names, so the
// same request can be made on something that does not exist.
func (rt agentRoute) url(f fixture, id string) string {
	user := f.otherUser
	if rt.user == "viewer" {
		user = f.viewerID
	}
	return strings.NewReplacer("{id}", id, "{user_id}", user, "{link_id}", f.link.ID, "{doc_id}", f.document, "{secret_id}", f.secret).Replace(rt.path) + rt.query
}

// subject is the id {id} stands for in the fixture, and one of the same
// kind that does not exist.
func (rt agentRoute) subject(f fixture) (id, missing string) {
	switch {
	case f.run != "":
		return f.run, "run_doesnotexist0000000000"
	case f.change != "":
		return f.change, "chg_doesnotexist0000000000"
	}
	return f.agent, "agt_doesnotexist0000000000"
}

// expect is the answer an actor must get: the decision is derived from the
// actor's standing, independently of the server's policy table.
func (rt agentRoute) expect(actor string) int {
	switch actor {
	case "anonymous":
		return http.StatusUnauthorized
	case "stranger", "revoked grantee", "revoked link holder":
		return http.StatusNotFound
	}
	if levelRank[actor] < levelRank[rt.need] {
		return http.StatusForbidden
	}
	return rt.ok
}

// accountRoute is a request that is not about one agent: the answer depends
// only on whether the caller is signed in, and whether they are an admin.
type accountRoute struct {
	method, path string // a route of the table
	query        string // appended to the path
	arg          string // fills the path's one {parameter}; "{other}" is the id of an account nobody else uses, "{library_doc}" a library document of an account no cell acts as
	body         any    // or a func() any, for a body that must differ per request
	anon, user   int    // status for anonymous and for any signed-in user
	admin        int    // status for the admin
}

// signups numbers the matrix's signups, so each one uses a new email. Every
// signup counts against the per-address throttle (20 free): newPeople makes
// 9, the signup row 9 more and the library's row 1.
var signups atomic.Int64

var accountRoutes = []accountRoute{
	{method: "POST", path: "/api/auth/signup", body: func() any {
		n := signups.Add(1)
		return map[string]string{"email": fmt.Sprintf("new%d@example.com", n), "name": "New", "password": "correct horse battery"}
	}, anon: 201, user: 201, admin: 201},
	{method: "POST", path: "/api/auth/login", body: map[string]string{"email": "admin@example.com", "password": "correct horse battery"}, anon: 200, user: 200, admin: 200},
	{method: "POST", path: "/api/auth/logout", anon: 204, user: 204, admin: 204},
	{method: "GET", path: "/api/setup", anon: 200, user: 200, admin: 200},
	{method: "GET", path: "/api/models", anon: 401, user: 200, admin: 200},
	{method: "GET", path: "/api/limits", anon: 401, user: 200, admin: 200},
	{method: "GET", path: "/api/egress/presets", anon: 401, user: 200, admin: 200},
	// The inbox: each caller sees only what they may decide (inbox_test.go).
	{method: "GET", path: "/api/changes", query: "?status=pending", anon: 401, user: 200, admin: 200},
	{method: "GET", path: "/api/me", anon: 401, user: 200, admin: 200},
	{method: "GET", path: "/api/agents", anon: 401, user: 200, admin: 200},
	{method: "POST", path: "/api/agents", body: map[string]string{"name": "mine"}, anon: 401, user: 201, admin: 201},
	{method: "GET", path: "/api/tokens", anon: 401, user: 200, admin: 200},
	{method: "POST", path: "/api/tokens", body: map[string]string{"name": "ci"}, anon: 401, user: 201, admin: 201},
	{method: "DELETE", path: "/api/tokens/{id}", arg: "tok_doesnotexist", anon: 401, user: 404, admin: 404},
	{method: "GET", path: "/api/credentials", anon: 401, user: 200, admin: 200},
	{method: "POST", path: "/api/credentials", body: func() any {
		return map[string]string{"name": fmt.Sprintf("matrix %d", signups.Add(1)), "host": "git.example.org", "username": "matrix", "secret": "matrix-secret"}
	}, anon: 401, user: 201, admin: 201},
	{method: "PATCH", path: "/api/credentials/{id}", arg: "crd_doesnotexist", body: map[string]any{"repositories": []string{"git.example.org/a/b"}}, anon: 401, user: 404, admin: 404},
	{method: "DELETE", path: "/api/credentials/{id}", arg: "crd_doesnotexist", anon: 401, user: 404, admin: 404},
	{method: "GET", path: "/api/users", anon: 401, user: 403, admin: 200},
	{method: "POST", path: "/api/invites", anon: 401, user: 403, admin: 201},
	{method: "POST", path: "/api/users/{id}/disable", arg: "{other}", anon: 401, user: 403, admin: 200},
	{method: "POST", path: "/api/users/{id}/enable", arg: "{other}", anon: 401, user: 403, admin: 200},
	{method: "POST", path: "/api/links/{token}/accept", arg: "csl_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", anon: 401, user: 404, admin: 404},
	{method: "GET", path: "/api/openapi.json", anon: 200, user: 200, admin: 200},
	{method: "POST", path: "/api/library/documents", query: "?name=notes.md", body: "# Notes\n\nShared.", anon: 401, user: 201, admin: 201},
	{method: "GET", path: "/api/library/documents", anon: 401, user: 200, admin: 200},
	// This server runs its sandboxes itself (role all): an admin is told so.
	{method: "GET", path: "/api/nodes", anon: 401, user: 403, admin: 503},
	{method: "POST", path: "/api/nodes/{id}/drain", arg: "nod_doesnotexist", anon: 401, user: 403, admin: 503},
	{method: "DELETE", path: "/api/nodes/{id}/drain", arg: "nod_doesnotexist", anon: 401, user: 403, admin: 503},
	{method: "POST", path: "/api/nodes/{id}/agents", arg: "nod_doesnotexist", body: map[string]string{"agent_id": "agt_doesnotexist"}, anon: 401, user: 403, admin: 503},
	// Operating the server: usage and the runs in flight are everyone's
	// own (operations_test.go checks what each sees); the audit log and
	// every agent's budget are the admins'.
	{method: "GET", path: "/api/usage", query: "?group_by=user", anon: 401, user: 200, admin: 200},
	{method: "GET", path: "/api/runs", query: "?status=active", anon: 401, user: 200, admin: 200},
	{method: "GET", path: "/api/audit", query: "?limit=5", anon: 401, user: 403, admin: 200},
	{method: "GET", path: "/api/admin/budgets", anon: 401, user: 403, admin: 200},
	// Published by an account of its own: nobody else but an admin (the last cell) may delete it.
	{method: "DELETE", path: "/api/library/documents/{doc_id}", arg: "{library_doc}", anon: 401, user: 403, admin: 204},
}

var param = regexp.MustCompile(`\{[a-z_]+\}`)

func (rt accountRoute) url(p *people) string {
	arg := strings.ReplaceAll(rt.arg, "{other}", p.clients["other"].user.ID)
	if arg == "{library_doc}" {
		arg = p.libraryDoc()
	}
	return param.ReplaceAllLiteralString(rt.path, arg) + rt.query
}

// TestAuthorizationMatrix walks the route table: every route must have a
// row here, and each row runs as every kind of caller over a real server
// and database. No unauthorized caller gets a 2xx, and a hidden agent, run
// or change set answers byte for byte like one that does not exist.
func TestAuthorizationMatrix(t *testing.T) {
	agentRows := map[string][]agentRoute{}
	named := map[string]bool{}
	for _, rt := range agentRoutes {
		agentRows[rt.method+" "+rt.path] = append(agentRows[rt.method+" "+rt.path], rt)
		if named[rt.String()] {
			t.Errorf("two rows are named %s: give them notes that tell them apart", rt)
		}
		named[rt.String()] = true
	}
	accountRows := map[string][]accountRoute{}
	for _, rt := range accountRoutes {
		accountRows[rt.method+" "+rt.path] = append(accountRows[rt.method+" "+rt.path], rt)
	}

	// Coverage first, so a missing row is reported even if a cell fails.
	table := map[string]bool{}
	var uncovered []string
	for _, rt := range api.Routes() {
		key := rt.Method + " " + rt.Path
		table[key] = true
		if len(agentRows[key]) == 0 && len(accountRows[key]) == 0 {
			uncovered = append(uncovered, key)
		}
		for _, row := range accountRows[key] {
			if rt.Auth != (row.anon == http.StatusUnauthorized) {
				t.Errorf("%s: the route table says sign-in needed = %v, but its row expects %d for anonymous", key, rt.Auth, row.anon)
			}
		}
		if len(agentRows[key]) > 0 && !rt.Auth {
			t.Errorf("%s: agentRoutes expects 401 for anonymous, but the route table serves it without sign-in", key)
		}
	}
	for _, key := range uncovered {
		t.Errorf("route %s has no row in the authorization matrix (authz_test.go): add one to agentRoutes if it acts on one agent, run or change set, else to accountRoutes", key)
	}
	var unknown []string
	for key := range agentRows {
		if !table[key] {
			unknown = append(unknown, key)
		}
	}
	for key := range accountRows {
		if !table[key] {
			unknown = append(unknown, key)
		}
	}
	sort.Strings(unknown)
	for _, key := range unknown {
		t.Errorf("the authorization matrix has a row for %s, which is not in the route table (api.go routes())", key)
	}

	e := newEnv(t, envOptions{})
	p := newPeople(e)
	for _, rt := range api.Routes() {
		key := rt.Method + " " + rt.Path
		for _, row := range agentRows[key] {
			for _, actor := range actors {
				t.Run(fmt.Sprintf("%s as %s needs %s", row, actor, row.need), func(t *testing.T) {
					agentCell(t, p, row, actor)
				})
			}
		}
		for _, row := range accountRows[key] {
			for _, actor := range append(actors, "admin") {
				t.Run(key+" as "+actor, func(t *testing.T) {
					accountCell(t, p, row, actor)
				})
			}
		}
	}
	e.assertNoSecrets(t)
}

func agentCell(t *testing.T, p *people, rt agentRoute, actor string) {
	f := p.fixture(t, rt, actor)
	c := p.clients[actor]
	id, missingID := rt.subject(f)
	res := c.do(rt.method, rt.url(f, id), rt.body)
	want := rt.expect(actor)
	if res.status != want {
		t.Fatalf("%s as %s = %d %s, want %d", rt, actor, res.status, res.body, want)
	}
	if want == http.StatusNotFound {
		missing := c.do(rt.method, rt.url(f, missingID), rt.body)
		if missing.status != res.status || !bytes.Equal(missing.body, res.body) {
			t.Errorf("hidden %s answered %d %q, missing one %d %q: must be identical", id, res.status, res.body, missing.status, missing.body)
		}
	}
}

func accountCell(t *testing.T, p *people, rt accountRoute, actor string) {
	c := p.clients[actor]
	want := rt.user
	switch actor {
	case "anonymous":
		want = rt.anon
	case "admin":
		want = rt.admin
		c = p.admin
	}
	if rt.path == "/api/auth/logout" && c.cookie != "" {
		// Log out a second session, not the shared one.
		c = &client{e: p.e, cookie: loginCookie(t, p.e, c.user.Email)}
	}
	body := rt.body
	if f, ok := body.(func() any); ok {
		body = f()
	}
	if res := c.do(rt.method, rt.url(p), body); res.status != want {
		t.Fatalf("%s %s as %s = %d %s, want %d", rt.method, rt.path, actor, res.status, res.body, want)
	}
}

func loginCookie(t *testing.T, e *env, email string) string {
	t.Helper()
	res := e.anon().do("POST", "/api/auth/login", map[string]string{"email": email, "password": "correct horse battery"}).want(http.StatusOK)
	return res.cookie(api.CookieName)
}

// TestRevocationBitesOnNextRequest: no grant is cached anywhere.
func TestRevocationBitesOnNextRequest(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	bob := e.signup("bob@example.com", "Bob")
	carol := e.signup("carol@example.com", "Carol")
	id := owner.createAgent("shared")

	owner.grant(id, bob.user.ID, "runner")
	bob.do("POST", "/api/agents/"+id+"/messages", map[string]string{"content": "hi"}).want(http.StatusAccepted)
	owner.grant(id, bob.user.ID, "viewer") // downgrade bites at once
	bob.do("POST", "/api/agents/"+id+"/messages", map[string]string{"content": "hi"}).want(http.StatusForbidden)
	bob.do("GET", "/api/agents/"+id+"/messages", nil).want(http.StatusOK)
	owner.do("DELETE", "/api/agents/"+id+"/grants/"+bob.user.ID, nil).want(http.StatusNoContent)
	bob.do("GET", "/api/agents/"+id+"/messages", nil).want(http.StatusNotFound)

	l := owner.link(id, "runner")
	var a api.AgentView
	carol.do("POST", "/api/links/"+l.Token+"/accept", nil).want(http.StatusOK).decode(&a)
	if a.Access != "runner" || a.ID != id {
		t.Fatalf("accepted link gives %q on %q, want runner on %q", a.Access, a.ID, id)
	}
	var listed api.List[api.AgentView]
	carol.do("GET", "/api/agents", nil).want(http.StatusOK).decode(&listed)
	if len(listed.Items) != 1 || listed.Items[0].Access != "runner" {
		t.Fatalf("carol lists %+v, want the shared agent with access runner", listed.Items)
	}
	owner.do("DELETE", "/api/agents/"+id+"/links/"+l.ID, nil).want(http.StatusNoContent)
	carol.do("GET", "/api/agents/"+id, nil).want(http.StatusNotFound)
	carol.do("POST", "/api/links/"+l.Token+"/accept", nil).want(http.StatusNotFound)
	carol.do("GET", "/api/agents", nil).want(http.StatusOK).decode(&listed)
	if len(listed.Items) != 0 {
		t.Fatalf("after the link is deleted carol still lists %+v", listed.Items)
	}
}
