package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"corral/internal/api"
	"corral/internal/modeltest"
)

// assertNoSecrets walks every answer the env gave: no JSON key may name a
// hash or a password, and no stored hash may appear in any encoding.
func (e *env) assertNoSecrets(t *testing.T) {
	t.Helper()
	db := e.rawDB(t)
	var secrets [][]byte
	collect := func(query string, blob bool) {
		rows, err := db.Query(query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		for rows.Next() {
			var v []byte
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			if blob {
				secrets = append(secrets, []byte(hex.EncodeToString(v)), []byte(base64.StdEncoding.EncodeToString(v)),
					[]byte(base64.RawURLEncoding.EncodeToString(v)))
			} else {
				secrets = append(secrets, v)
			}
		}
	}
	collect(`SELECT password_hash FROM users`, false)
	for _, table := range []string{"sessions", "api_tokens", "links", "invites"} {
		collect(`SELECT token_hash FROM `+table, true)
	}
	if len(secrets) == 0 {
		t.Fatal("found no stored secrets to look for: the walk would prove nothing")
	}
	e.mu.Lock()
	bodies := e.bodies
	e.mu.Unlock()
	if len(bodies) == 0 {
		t.Fatal("no answers recorded")
	}
	for _, body := range bodies {
		if bytes.Contains(body, []byte(testModelKey)) {
			t.Fatalf("an answer carries the model provider's key: %s", body)
		}
		if bytes.Contains(body, []byte("$argon2")) {
			t.Fatalf("an answer carries a password hash: %s", body)
		}
		for _, s := range secrets {
			if bytes.Contains(body, s) {
				t.Fatalf("an answer carries a stored hash %q: %s", s, body)
			}
		}
		var v any
		if len(bytes.TrimSpace(body)) == 0 || bytes.Equal(body, api.OpenAPIJSON) {
			continue // the API's description names password fields by design
		}
		if err := json.Unmarshal(body, &v); err != nil {
			continue // non-JSON answers are checked above as bytes
		}
		walkKeys(t, v, body)
	}
}

func walkKeys(t *testing.T, v any, body []byte) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			lk := strings.ToLower(k)
			if lk == "hash" || lk == "prev_hash" {
				continue // a trace event's chain hashes: public by design
			}
			if strings.Contains(lk, "hash") || strings.Contains(lk, "password") || strings.Contains(lk, "secret") {
				t.Fatalf("an answer has the key %q: %s", k, body)
			}
			walkKeys(t, child, body)
		}
	case []any:
		for _, child := range x {
			walkKeys(t, child, body)
		}
	}
}

// TestNoAnswerCarriesSecrets tours every route, then walks every answer.
func TestNoAnswerCarriesSecrets(t *testing.T) {
	e := newEnv(t, envOptions{})
	admin := e.signup("admin@example.com", "Admin")
	bob := e.signup("bob@example.com", "Bob")
	carol := e.signup("carol@example.com", "Carol")
	loginCookie(t, e, "bob@example.com")
	admin.do("GET", "/api/me", nil).want(http.StatusOK)
	admin.do("GET", "/api/users", nil).want(http.StatusOK)
	admin.do("POST", "/api/invites", nil).want(http.StatusCreated)
	admin.do("POST", "/api/users/"+carol.user.ID+"/disable", nil).want(http.StatusOK)
	admin.do("POST", "/api/users/"+carol.user.ID+"/enable", nil).want(http.StatusOK)
	var tok api.TokenView
	bob.do("POST", "/api/tokens", map[string]string{"name": "t"}).want(http.StatusCreated).decode(&tok)
	bob.do("GET", "/api/tokens", nil).want(http.StatusOK)
	script := &client{e: e, bearer: tok.Token}
	id := script.createAgent("tour")
	script.grant(id, admin.user.ID, "editor")
	script.do("GET", "/api/agents/"+id+"/grants", nil).want(http.StatusOK)
	l := script.link(id, "viewer")
	script.do("GET", "/api/agents/"+id+"/links", nil).want(http.StatusOK)
	var signedIn = &client{e: e, cookie: loginCookie(t, e, "carol@example.com")}
	signedIn.do("POST", "/api/links/"+l.Token+"/accept", nil).want(http.StatusOK)
	script.do("PATCH", "/api/agents/"+id, map[string]any{"instructions": "x", "budget": map[string]int{"tokens": 9}}).want(http.StatusOK)
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("c1", "env; echo hi > hi.txt")), modeltest.Text("done")))
	var posted api.PostedMessage
	script.do("POST", "/api/agents/"+id+"/messages", map[string]string{"content": "hi"}).want(http.StatusAccepted).decode(&posted)
	done := script.waitRun(posted.Run.ID, "completed", "paused")
	script.do("GET", "/api/agents/"+id+"/messages", nil).want(http.StatusOK)
	script.do("GET", "/api/agents/"+id+"/runs", nil).want(http.StatusOK)
	script.do("GET", "/api/runs/"+done.ID+"/trace", nil).want(http.StatusOK)
	script.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int{"tokens": 0}}).want(http.StatusOK)
	done = script.waitRun(posted.Run.ID, "completed")
	script.do("GET", "/api/runs/"+done.ID+"/events", nil).want(http.StatusOK) // ended: the stream closes
	script.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK)
	var traced int
	if err := e.rawDB(t).QueryRow(`SELECT count(*) FROM trace_events WHERE data LIKE '%' || ? || '%'`, testModelKey).Scan(&traced); err != nil || traced != 0 {
		t.Fatalf("trace events holding the model key: %d (%v)", traced, err)
	}
	script.do("GET", "/api/agents", nil).want(http.StatusOK)
	script.do("GET", "/api/agents/"+id, nil).want(http.StatusOK)
	script.do("POST", "/api/agents/"+id+"/release", nil).want(http.StatusOK)
	e.anon().do("POST", "/api/auth/login", map[string]string{"email": "bob@example.com", "password": "wrong password"}).want(http.StatusUnauthorized)
	e.anon().do("GET", "/api/openapi.json", nil).want(http.StatusOK)
	script.do("DELETE", "/api/agents/"+id+"/links/"+l.ID, nil).want(http.StatusNoContent)
	script.do("DELETE", "/api/agents/"+id+"/grants/"+admin.user.ID, nil).want(http.StatusNoContent)
	script.do("DELETE", "/api/agents/"+id, nil).want(http.StatusNoContent)
	bob.do("POST", "/api/auth/logout", nil).want(http.StatusNoContent)
	e.assertNoSecrets(t)
}
