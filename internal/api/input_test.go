package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"corral"
	"corral/internal/api"
	"corral/internal/sanitize"
)

// hostileNames come from path traversal payloads and every Windows device
// form; each must be refused wherever a name enters.
func hostileNames() []string {
	names := []string{
		"../etc/passwd", "..", ".", "a/b", `a\b`, `..\..\windows\system32`, "/abs", "foo/../bar",
		"x\x00y", "line\nbreak", "tab\there", "bell\a", "del\x7f", "nbsp\u0085", "rtl\u202eexe.txt",
		".git", ".GIT", "GIT~1", "git~12", ".hidden", "trailing.", " lead", "trail ", "",
		strings.Repeat("a", 256), "a:b", "what?", "pipe|x", "star*", `quote"`, "lt<", "gt>",
	}
	for _, base := range []string{"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"} {
		names = append(names, devForms(base)...)
	}
	for _, p := range []string{"COM", "LPT"} {
		for _, d := range []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³"} {
			names = append(names, devForms(p+d)...)
		}
	}
	return names
}

func devForms(dev string) []string {
	return []string{dev, strings.ToLower(dev), strings.ToUpper(dev[:1]) + strings.ToLower(dev[1:]), dev + ".txt", strings.ToLower(dev) + ".tar.gz", dev + " .log"}
}

func TestHostileNamesRefusedEverywhere(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.signup("u@example.com", "U")
	id := u.createAgent("ok-name")
	for _, name := range hostileNames() {
		for _, path := range []struct{ method, path string }{{"POST", "/api/agents"}, {"PATCH", "/api/agents/" + id}} {
			body, _ := json.Marshal(map[string]string{"name": name})
			if !json.Valid(body) {
				t.Fatalf("cannot encode %q", name)
			}
			res := u.do(path.method, path.path, body)
			if res.status != http.StatusBadRequest || res.code() != "invalid_name" {
				t.Errorf("%s %s name=%q = %d %s, want 400 invalid_name", path.method, path.path, name, res.status, res.body)
			}
		}
		if res := u.do("POST", "/api/tokens", map[string]string{"name": name}); res.code() != "invalid_name" {
			t.Errorf("POST /api/tokens name=%q = %d %s, want 400 invalid_name", name, res.status, res.body)
		}
	}
	var listed api.List[api.AgentView]
	u.do("GET", "/api/agents", nil).want(http.StatusOK).decode(&listed)
	if len(listed.Items) != 1 || listed.Items[0].Name != "ok-name" {
		t.Fatalf("agents after hostile names = %+v, want only ok-name", listed.Items)
	}
}

func TestMessageContent(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.signup("u@example.com", "U")
	id := u.createAgent("a")
	path := "/api/agents/" + id + "/messages"
	tests := []struct {
		name    string
		body    string
		status  int
		code    string
		content string
	}{
		{"plain", `{"content":"fix the tests"}`, 202, "", "fix the tests"},
		{"unicode", `{"content":"héllo — 世界 🎉"}`, 202, "", "héllo — 世界 🎉"},
		{"NUL escaped in JSON", `{"content":"a\u0000b"}`, 400, "invalid_content", ""},
		{"empty", `{"content":""}`, 400, "invalid_content", ""},
		{"whitespace only", `{"content":"  \n\t"}`, 400, "invalid_content", ""},
		{"surrogate pair", `{"content":"\ud83d\ude00"}`, 202, "", "😀"},
		{"lone surrogate", `{"content":"\ud800"}`, 400, "invalid_content", ""}, // encoding/json would make it U+FFFD
		{"invalid UTF-8", "{\"content\":\"a\xffb\"}", 400, "invalid_content", ""},
		{"over the limit", fmt.Sprintf(`{"content":%q}`, strings.Repeat("x", sanitize.MaxContent+1)), 413, "too_large", ""},
		{"at the limit", fmt.Sprintf(`{"content":%q}`, strings.Repeat("x", sanitize.MaxContent)), 202, "", strings.Repeat("x", sanitize.MaxContent)},
		{"unknown field", `{"content":"x","role":"assistant"}`, 400, "invalid_input", ""},
		{"not JSON", `content=x`, 400, "invalid_input", ""},
		{"two objects", `{"content":"x"}{"content":"y"}`, 400, "invalid_input", ""},
		{"wrong type", `{"content":42}`, 400, "invalid_input", ""},
		{"no body", ``, 400, "invalid_input", ""},
		{"body too large", `{"content":"` + strings.Repeat("y", api.MaxBody) + `"}`, 413, "too_large", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := u.do("POST", path, []byte(tt.body))
			if res.status != tt.status || res.code() != tt.code {
				t.Fatalf("POST %s = %d %s, want %d %q", tt.name, res.status, truncate(res.body), tt.status, tt.code)
			}
			if tt.status != 202 {
				return
			}
			var got api.PostedMessage
			res.decode(&got)
			if got.Message.Content != tt.content || got.Message.Author == nil || got.Message.Author.ID != u.user.ID || got.Message.Role != "user" {
				t.Fatalf("stored %+v, want content %q authored by %s", got.Message, truncate([]byte(tt.content)), u.user.ID)
			}
			// Each message starts a run; the next waits for it to end.
			u.waitRun(got.Run.ID, "completed")
		})
	}
	var all api.List[api.MessageView]
	u.do("GET", path, nil).want(http.StatusOK).decode(&all)
	var thread api.List[api.MessageView] // the people's messages, between the model's answers
	for _, m := range all.Items {
		if m.Role == "user" {
			thread.Items = append(thread.Items, m)
		}
	}
	if len(thread.Items) != 4 || thread.Items[0].Content != "fix the tests" || len(all.Items) != 8 {
		t.Fatalf("thread has %d messages of people (%d in all), first %q; want the 4 accepted ones in order, each answered", len(thread.Items), len(all.Items), thread.Items[0].Content)
	}
	var page api.List[api.MessageView]
	u.do("GET", path+"?limit=2&before="+all.Items[6].ID, nil).want(http.StatusOK).decode(&page)
	if len(page.Items) != 2 || page.Items[0].ID != all.Items[4].ID || page.Items[1].ID != all.Items[5].ID {
		t.Fatalf("page before the 7th = %+v, want the 5th and 6th", page.Items)
	}
	u.do("GET", path+"?limit=0", nil).want(http.StatusBadRequest)
}

func truncate(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}

func TestAgentSettingsValidated(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.signup("u@example.com", "U")
	var a api.AgentView
	u.do("POST", "/api/agents", map[string]any{"name": "cfg"}).want(http.StatusCreated).decode(&a)
	if p := a.Policy; p.FS != "read-write" || p.Changes != "review" || p.Network != "none" || len(p.Secrets)+len(p.Protected)+len(p.Risky) != 0 || p.Library || a.State != "active" || a.Access != "owner" {
		t.Fatalf("new agent = %+v, want the default policy, active, owned", a)
	}
	tests := []struct {
		name   string
		body   string
		status int
	}{
		{"policy", `{"policy":{"fs":"read-only","changes":"auto"}}`, 200},
		{"limits", `{"limits":{"memory_bytes":268435456,"pids":64,"run_timeout_s":600}}`, 200},
		{"budget", `{"budget":{"tokens":5000}}`, 200},
		{"bad fs", `{"policy":{"fs":"everything"}}`, 400},
		{"network", `{"policy":{"network":"internet"}}`, 400},
		{"negative limit", `{"limits":{"pids":-1}}`, 400},
		{"huge limit", `{"limits":{"pids":100000000}}`, 400},
		{"budget used is not settable", `{"budget":{"used":0}}`, 400},
		{"unknown field", `{"owner":"someone-else"}`, 400},
		{"bad model", `{"model":"gpt 4; rm -rf"}`, 400},
		{"globs", `{"policy":{"exclude":["*.pem"],"protected":["deploy/**"],"risky":["docs/**"]}}`, 200},
		{"bad glob", `{"policy":{"exclude":["../x"]}}`, 400},
		{"malformed glob", `{"policy":{"risky":["[a-"]}}`, 400},
		{"library", `{"policy":{"library":true}}`, 200},
		{"library not a boolean", `{"policy":{"library":"yes"}}`, 400},
	}
	for _, tt := range tests {
		res := u.do("PATCH", "/api/agents/"+a.ID, []byte(tt.body))
		if res.status != tt.status {
			t.Errorf("%s: PATCH %s = %d %s, want %d", tt.name, tt.body, res.status, res.body, tt.status)
		}
	}
	u.do("GET", "/api/agents/"+a.ID, nil).want(http.StatusOK).decode(&a)
	want := api.LimitsView{MemoryBytes: 268435456, Pids: 64, RunTimeoutS: 600}
	if a.Policy.FS != "read-only" || a.Policy.Changes != "auto" || !a.Policy.Library || a.Limits != want || a.Budget.Tokens != 5000 {
		t.Fatalf("agent after updates = %+v", a)
	}
}

func TestUnknownRoutesAnswerInTheErrorShape(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.signup("u@example.com", "U")
	tests := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/api/nothing-here", 404, "not_found"},
		{"PUT", "/api/agents", 405, "method_not_allowed"},
	}
	for _, tt := range tests {
		res := u.do(tt.method, tt.path, nil)
		if res.status != tt.status || res.code() != tt.code {
			t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, res.status, res.body, tt.status, tt.code)
		}
	}
}

// TestDecode runs every rule of decode on a small request type.
func TestDecode(t *testing.T) {
	type req struct {
		Content string `json:"content"`
	}
	tests := []struct {
		name string
		body string
		code string // "" when accepted
		want string
	}{
		{"plain", `{"content":"hi"}`, "", "hi"},
		{"escapes", `{"content":"a\n\"\\\/\u00e9"}`, "", "a\n\"\\/é"},
		{"surrogate pair", `{"content":"\ud83d\ude00"}`, "", "😀"},
		{"upper-case hex pair", `{"content":"\uD83D\uDE00"}`, "", "😀"},
		{"escaped backslash, then u", `{"content":"\\ud800"}`, "", `\ud800`},
		{"escaped backslash, then a pair", `{"content":"\\\ud83d\ude00"}`, "", `\😀`},
		{"non-surrogate escape before a pair", `{"content":"\u0041\ud83d\ude00"}`, "", "A😀"},
		{"raw UTF-8", `{"content":"héllo 世界"}`, "", "héllo 世界"},
		{"lone high surrogate", `{"content":"\ud800"}`, "invalid_content", ""},
		{"lone high surrogate at the end", `{"content":"x\udbff"}`, "invalid_content", ""},
		{"lone low surrogate", `{"content":"\udc00"}`, "invalid_content", ""},
		{"reversed pair", `{"content":"\ude00\ud83d"}`, "invalid_content", ""},
		{"high surrogate, then a non-surrogate escape", `{"content":"\ud800\u0041"}`, "invalid_content", ""},
		{"two high surrogates", `{"content":"\ud800\ud800"}`, "invalid_content", ""},
		{"lone surrogate in a field name", `{"\ud800":"x"}`, "invalid_content", ""},
		{"high surrogate cut short", `{"content":"\ud800\u"}`, "invalid_content", ""},
		{"invalid UTF-8 in a string", "{\"content\":\"a\xffb\"}", "invalid_content", ""},
		{"invalid UTF-8 outside strings", "{\"content\":\"a\"}\xc3", "invalid_content", ""},
		{"UTF-8 encoded surrogate", "{\"content\":\"\xed\xa0\x80\"}", "invalid_content", ""},
		{"overlong encoding", "{\"content\":\"\xc0\xaf\"}", "invalid_content", ""},
		{"empty", ``, "invalid_input", ""},
		{"not JSON", `content=hi`, "invalid_input", ""},
		{"malformed escape", `{"content":"\uzzzz"}`, "invalid_input", ""},
		{"unknown field", `{"content":"x","role":"admin"}`, "invalid_input", ""},
		{"trailing object", `{"content":"x"}{}`, "invalid_input", ""},
		{"trailing garbage", `{"content":"x"} x`, "invalid_input", ""},
		{"wrong type", `{"content":1}`, "invalid_input", ""},
		{"too large", `{"content":"` + strings.Repeat("a", api.MaxBody) + `"}`, "too_large", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
			var got req
			err := api.Decode(httptest.NewRecorder(), r, &got)
			if code := corral.ErrorCode(err); code != tt.code {
				t.Fatalf("decode(%+q) = %v (code %q), want code %q", truncate([]byte(tt.body)), err, code, tt.code)
			}
			if err == nil && got.Content != tt.want {
				t.Fatalf("decode(%+q) content = %+q, want %+q", tt.body, got.Content, tt.want)
			}
		})
	}
}

// TestMessageValidatedBeforeReadiness: with no model provider, a message is
// still checked first: a bad one is a 400 (or 413), one the caller may not
// send is refused as such, and only a good one hears that runs are not
// possible (503).
func TestMessageValidatedBeforeReadiness(t *testing.T) {
	e := newEnv(t, envOptions{noModel: true})
	owner := e.signup("owner@example.com", "Owner")
	viewer := e.signup("viewer@example.com", "Viewer")
	stranger := e.signup("stranger@example.com", "Stranger")
	id := owner.createAgent("idle")
	owner.grant(id, viewer.user.ID, "viewer")
	tests := []struct {
		name   string
		who    *client
		body   string
		status int
		code   string
	}{
		{"empty", owner, `{"content":""}`, 400, "invalid_content"},
		{"whitespace", owner, `{"content":" \n"}`, 400, "invalid_content"},
		{"NUL", owner, `{"content":"a\u0000b"}`, 400, "invalid_content"},
		{"invalid UTF-8", owner, "{\"content\":\"\xff\"}", 400, "invalid_content"},
		{"lone surrogate", owner, `{"content":"\udfff"}`, 400, "invalid_content"},
		{"too large", owner, fmt.Sprintf(`{"content":%q}`, strings.Repeat("x", sanitize.MaxContent+1)), 413, "too_large"},
		{"not JSON", owner, `hi`, 400, "invalid_input"},
		{"a viewer may not send", viewer, `{"content":"hi"}`, 403, "forbidden"},
		{"a stranger cannot see the agent", stranger, `{"content":"hi"}`, 404, "not_found"},
		{"valid", owner, `{"content":"hi"}`, 503, "unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.who.do("POST", "/api/agents/"+id+"/messages", []byte(tt.body))
			if res.status != tt.status || res.code() != tt.code {
				t.Fatalf("POST messages %s = %d %s, want %d %s", tt.name, res.status, truncate(res.body), tt.status, tt.code)
			}
		})
	}
}
