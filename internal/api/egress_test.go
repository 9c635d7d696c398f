package api_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"corral/internal/api"
)

// apiEgressSecret is distinctive so that any copy of it is found.
const apiEgressSecret = "npm_SECRET-5ea1-never-answered-b0b0"

func TestAgentEgressPolicy(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice := e.signup("alice@example.com", "Alice")
	id := alice.createAgent("builder")

	var a api.AgentView
	alice.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&a)
	if a.Policy.Network != "none" || a.Policy.Egress.Allow == nil || len(a.Policy.Egress.Allow) != 0 || a.Policy.Egress.Presets == nil {
		t.Fatalf("a new agent's policy = %+v, want network none and an empty (not null) allow-list", a.Policy)
	}
	set := map[string]any{"policy": map[string]any{"network": "allowlist", "egress": map[string]any{
		"presets": []string{"npm", "go"},
		"allow":   []map[string]any{{"host": "Registry.Internal.Example", "ports": []int{8443}, "methods": []string{"GET"}, "paths": []string{"/v1/"}}},
	}}}
	alice.do("PATCH", "/api/agents/"+id, set).want(http.StatusOK).decode(&a)
	if a.Policy.Network != "allowlist" || !reflect.DeepEqual(a.Policy.Egress.Presets, []string{"npm", "go"}) ||
		len(a.Policy.Egress.Allow) != 1 || a.Policy.Egress.Allow[0].Host != "registry.internal.example" ||
		!reflect.DeepEqual(a.Policy.Egress.Allow[0].Ports, []int{8443}) {
		t.Fatalf("after PATCH: %+v, want allowlist, npm and go, and the host lower-cased", a.Policy)
	}
	// What was set is what a later read answers.
	var again api.AgentView
	alice.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&again)
	if !reflect.DeepEqual(again.Policy, a.Policy) {
		t.Fatalf("GET after PATCH = %+v, want %+v", again.Policy, a.Policy)
	}

	refused := []struct {
		name   string
		policy map[string]any
	}{
		{"an unknown network", map[string]any{"network": "open"}},
		{"an unknown preset", map[string]any{"egress": map[string]any{"presets": []string{"everything"}}}},
		{"a bare wildcard", map[string]any{"egress": map[string]any{"allow": []map[string]any{{"host": "*"}}}}},
		{"a port out of range", map[string]any{"egress": map[string]any{"allow": []map[string]any{{"host": "a.example", "ports": []int{70000}}}}}},
		{"a path without a slash", map[string]any{"egress": map[string]any{"allow": []map[string]any{{"host": "a.example", "paths": []string{"v1"}}}}}},
		{"a host with a scheme", map[string]any{"egress": map[string]any{"allow": []map[string]any{{"host": "https://a.example"}}}}},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			if got := alice.do("PATCH", "/api/agents/"+id, map[string]any{"policy": c.policy}); got.status != http.StatusBadRequest {
				t.Fatalf("PATCH policy %v = %d %s, want 400", c.policy, got.status, got.body)
			}
		})
	}

	var presets api.List[api.PresetView]
	alice.do("GET", "/api/egress/presets", nil).want(http.StatusOK).decode(&presets)
	names := map[string][]string{}
	for _, p := range presets.Items {
		names[p.Name] = p.Hosts
	}
	for _, want := range []string{"npm", "pypi", "go", "crates", "debian", "github"} {
		if len(names[want]) == 0 {
			t.Errorf("GET /api/egress/presets has no hosts for %s: %+v", want, presets.Items)
		}
	}
}

func TestAgentSecretsAPI(t *testing.T) {
	var logs lockedBuffer
	e := newEnv(t, envOptions{api: api.Config{Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}})
	alice := e.signup("alice@example.com", "Alice")
	viewer := e.signup("viewer@example.com", "Viewer")
	stranger := e.signup("stranger@example.com", "Stranger")
	id := alice.createAgent("builder")
	alice.grant(id, viewer.user.ID, "viewer")
	path := "/api/agents/" + id + "/secrets"

	body := map[string]string{"name": "npm", "host": "Registry.Example.com", "header": "authorization", "value": "Bearer " + apiEgressSecret}
	var created api.SecretView
	alice.do("POST", path, body).want(http.StatusCreated).decode(&created)
	if created.ID == "" || created.Name != "npm" || created.Host != "registry.example.com" || created.Header != "Authorization" || created.CreatedAt == "" {
		t.Fatalf("POST secrets = %+v, want npm for registry.example.com, header Authorization", created)
	}
	if got := alice.do("POST", path, body); got.status != http.StatusConflict {
		t.Fatalf("a second secret named npm = %d %s, want 409", got.status, got.body)
	}
	refused := []struct {
		name   string
		body   map[string]string
		status int
	}{
		{"no value", map[string]string{"name": "x", "host": "a.example", "header": "X-Key", "value": ""}, 400},
		{"a value with a line break", map[string]string{"name": "x", "host": "a.example", "header": "X-Key", "value": apiEgressSecret + "\r\nX-Other: 1"}, 400},
		{"a value over 4096 bytes", map[string]string{"name": "x", "host": "a.example", "header": "X-Key", "value": strings.Repeat("s", 4097)}, 413},
		{"a framing header", map[string]string{"name": "x", "host": "a.example", "header": "Content-Length", "value": "5"}, 400},
		{"a proxy header", map[string]string{"name": "x", "host": "a.example", "header": "Proxy-Authorization", "value": "x"}, 400},
		{"a header name with a space", map[string]string{"name": "x", "host": "a.example", "header": "X Key", "value": "x"}, 400},
		{"a host with a port", map[string]string{"name": "x", "host": "a.example:8443", "header": "X-Key", "value": "x"}, 400},
		{"a host with a path", map[string]string{"name": "x", "host": "a.example/p", "header": "X-Key", "value": "x"}, 400},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			if got := alice.do("POST", path, c.body); got.status != c.status {
				t.Fatalf("POST secrets = %d %s, want %d", got.status, got.body, c.status)
			}
		})
	}

	// A viewer sees names and hosts; only an editor or the owner writes;
	// a stranger is told nothing exists.
	var seen api.List[api.SecretView]
	viewer.do("GET", path, nil).want(http.StatusOK).decode(&seen)
	if len(seen.Items) != 1 || seen.Items[0] != created {
		t.Fatalf("GET secrets as a viewer = %+v, want [%+v]", seen.Items, created)
	}
	viewer.do("POST", path, map[string]string{"name": "mine", "host": "a.example", "header": "X-Key", "value": "v"}).want(http.StatusForbidden)
	viewer.do("DELETE", path+"/"+created.ID, nil).want(http.StatusForbidden)
	hidden := stranger.do("GET", path, nil)
	missing := stranger.do("GET", "/api/agents/agt_doesnotexist0000/secrets", nil)
	if hidden.status != http.StatusNotFound || missing.status != http.StatusNotFound {
		t.Fatalf("a stranger's GET = %d %s (missing agent: %d), want 404 both", hidden.status, hidden.body, missing.status)
	}
	stranger.do("POST", path, body).want(http.StatusNotFound)

	// The database holds ciphertext only.
	var sealed []byte
	if err := e.rawDB(t).QueryRow(`SELECT sealed FROM agent_secrets WHERE id = ?`, created.ID).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte(apiEgressSecret)) {
		t.Fatal("the database holds the secret value in the clear")
	}
	alice.do("DELETE", path+"/"+created.ID, nil).want(http.StatusNoContent)
	alice.do("DELETE", path+"/"+created.ID, nil).want(http.StatusNotFound)
	assertAbsent(t, e, logs.String(), apiEgressSecret, sealed)
}
