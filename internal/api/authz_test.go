package api

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// actors of the authorization matrix, from nobody to the owner.
var actors = []string{"anonymous", "stranger", "viewer", "runner", "editor", "owner", "revoked grantee", "revoked link holder"}

var levelRank = map[string]int{"viewer": 1, "runner": 2, "editor": 3, "owner": 4}

// fixture is one freshly shared agent: each matrix cell gets its own, so a
// destructive request cannot change what the next cell sees.
type fixture struct {
	agent     string
	link      linkView // a live viewer link, joined by nobody
	otherUser string   // an account with no access, for PUT grant
	viewerID  string   // an account holding a grant, for DELETE grant
}

// people are the accounts of the matrix, created once.
type people struct {
	admin   *client
	clients map[string]*client
}

func newPeople(e *env) *people {
	p := &people{admin: e.signup("admin@example.com", "Admin"), clients: map[string]*client{}}
	p.clients["anonymous"] = e.anon()
	for _, a := range actors[1:] {
		p.clients[a] = e.signup(strings.ReplaceAll(a, " ", "-")+"@example.com", a)
	}
	p.clients["other"] = e.signup("other@example.com", "Other")
	return p
}

func (p *people) fixture() fixture {
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
	return fixture{agent: id, link: owner.link(id, "viewer"), otherUser: p.clients["other"].user.ID, viewerID: p.clients["viewer"].user.ID}
}

// agentRoute is a request on one agent and the lowest level that may make
// it.
type agentRoute struct {
	method, path string // {id}, {user_id}, {link_id} are filled from the fixture
	body         any
	need         string
	ok           int
}

var agentRoutes = []agentRoute{
	{"GET", "/api/agents/{id}", nil, "viewer", 200},
	{"PATCH", "/api/agents/{id}", map[string]any{"instructions": "be brief"}, "editor", 200},
	{"PATCH", "/api/agents/{id}", map[string]any{"budget": map[string]int{"tokens": 1000}}, "owner", 200},
	{"DELETE", "/api/agents/{id}", nil, "owner", 204},
	{"POST", "/api/agents/{id}/release", nil, "owner", 200},
	{"GET", "/api/agents/{id}/grants", nil, "owner", 200},
	{"PUT", "/api/agents/{id}/grants/{user_id}", map[string]string{"level": "viewer"}, "owner", 200},
	{"DELETE", "/api/agents/{id}/grants/{grantee_id}", nil, "owner", 204},
	{"GET", "/api/agents/{id}/links", nil, "owner", 200},
	{"POST", "/api/agents/{id}/links", map[string]string{"level": "viewer"}, "owner", 201},
	{"DELETE", "/api/agents/{id}/links/{link_id}", nil, "owner", 204},
	{"GET", "/api/agents/{id}/messages", nil, "viewer", 200},
	{"POST", "/api/agents/{id}/messages", map[string]string{"content": "hello"}, "runner", 202},
	{"GET", "/api/agents/{id}/changes", nil, "viewer", 200},
	{"GET", "/api/agents/{id}/files?path=", nil, "viewer", 200},
	{"PUT", "/api/agents/{id}/files?path=notes.txt", "uploaded", "editor", 200},
}

func (rt agentRoute) url(f fixture, agentID string) string {
	return strings.NewReplacer("{id}", agentID, "{user_id}", f.otherUser, "{grantee_id}", f.viewerID, "{link_id}", f.link.ID).Replace(rt.path)
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

// TestAuthorizationMatrix runs every agent route as every kind of caller
// over a real server and database. No unauthorized caller gets a 2xx, and a
// hidden agent answers byte for byte like one that does not exist.
func TestAuthorizationMatrix(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := newPeople(e)
	for _, rt := range agentRoutes {
		for _, actor := range actors {
			name := fmt.Sprintf("%s %s as %s needs %s", rt.method, rt.path, actor, rt.need)
			t.Run(name, func(t *testing.T) {
				f := p.fixture()
				c := p.clients[actor]
				res := c.do(rt.method, rt.url(f, f.agent), rt.body)
				want := rt.expect(actor)
				if res.status != want {
					t.Fatalf("%s %s as %s = %d %s, want %d", rt.method, rt.path, actor, res.status, res.body, want)
				}
				if want == http.StatusNotFound {
					missing := c.do(rt.method, rt.url(f, "agt_doesnotexist0000000000"), rt.body)
					if missing.status != res.status || !bytes.Equal(missing.body, res.body) {
						t.Errorf("hidden agent answered %d %q, missing agent %d %q: must be identical", res.status, res.body, missing.status, missing.body)
					}
				}
			})
		}
	}
	e.assertNoSecrets(t)
}

// TestAccountRoutesMatrix covers the routes that are not about one agent.
func TestAccountRoutesMatrix(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := newPeople(e)
	tests := []struct {
		method, path string
		body         any
		anon, user   int // status for anonymous and for any signed-in user
		admin        int // status for the admin
	}{
		{"GET", "/api/me", nil, 401, 200, 200},
		{"GET", "/api/agents", nil, 401, 200, 200},
		{"POST", "/api/agents", map[string]string{"name": "mine"}, 401, 201, 201},
		{"GET", "/api/tokens", nil, 401, 200, 200},
		{"POST", "/api/tokens", map[string]string{"name": "ci"}, 401, 201, 201},
		{"DELETE", "/api/tokens/tok_doesnotexist", nil, 401, 404, 404},
		{"GET", "/api/users", nil, 401, 403, 200},
		{"POST", "/api/invites", nil, 401, 403, 201},
		{"POST", "/api/users/{other}/disable", nil, 401, 403, 200},
		{"POST", "/api/users/{other}/enable", nil, 401, 403, 200},
		{"POST", "/api/links/csl_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/accept", nil, 401, 404, 404},
		{"POST", "/api/auth/logout", nil, 204, 204, 204},
	}
	other := p.clients["other"].user.ID
	for _, tt := range tests {
		path := strings.ReplaceAll(tt.path, "{other}", other)
		for _, actor := range append(actors, "admin") {
			t.Run(tt.method+" "+tt.path+" as "+actor, func(t *testing.T) {
				c := p.clients[actor]
				want := tt.user
				switch actor {
				case "anonymous":
					want = tt.anon
				case "admin":
					want = tt.admin
					c = p.admin
				}
				if tt.path == "/api/auth/logout" && c.cookie != "" {
					// Log out a second session, not the shared one.
					c = &client{e: e, cookie: loginCookie(t, e, c.user.Email)}
				}
				c.do(tt.method, path, tt.body).want(want)
			})
		}
	}
	e.assertNoSecrets(t)
}

func loginCookie(t *testing.T, e *env, email string) string {
	t.Helper()
	res := e.anon().do("POST", "/api/auth/login", map[string]string{"email": email, "password": "correct horse battery"}).want(http.StatusOK)
	return res.cookie(CookieName)
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
	var a agentView
	carol.do("POST", "/api/links/"+l.Token+"/accept", nil).want(http.StatusOK).decode(&a)
	if a.Access != "runner" || a.ID != id {
		t.Fatalf("accepted link gives %q on %q, want runner on %q", a.Access, a.ID, id)
	}
	var listed list[agentView]
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
