package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"corral"
)

const testKey = "sk-secret-CANARY"

// reply is one scripted answer of the fake provider.
type reply struct {
	status int
	body   string
}

// fakeProvider is an OpenAI-compatible endpoint that answers scripted
// replies in order and keeps every request body it received.
type fakeProvider struct {
	t       *testing.T
	key     string
	mu      sync.Mutex
	replies []reply
	bodies  [][]byte
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.t.Errorf("fake provider got %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	if got, want := r.Header.Get("Authorization"), "Bearer "+f.key; got != want {
		f.t.Errorf("Authorization = %q, want %q", got, want)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("read request: %v", err)
	}
	var decoded map[string]any
	if err := json.Unmarshal(body, &decoded); err != nil {
		f.t.Errorf("request is not JSON: %v", err)
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	var rep reply
	if len(f.replies) == 0 {
		f.t.Errorf("fake provider: unscripted request %d", len(f.bodies))
		rep = reply{status: 500, body: `{"error":{"message":"unscripted"}}`}
	} else {
		rep, f.replies = f.replies[0], f.replies[1:]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

func (f *fakeProvider) requests() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...)
}

// request returns the i-th request body, decoded.
func (f *fakeProvider) request(i int) map[string]any {
	f.t.Helper()
	bodies := f.requests()
	if i >= len(bodies) {
		f.t.Fatalf("fake provider got %d requests, want at least %d", len(bodies), i+1)
	}
	var m map[string]any
	if err := json.Unmarshal(bodies[i], &m); err != nil {
		f.t.Fatal(err)
	}
	return m
}

// newFake starts a fake provider and a Gateway pointed at it.
func newFake(t *testing.T, replies ...reply) (*fakeProvider, *Gateway) {
	t.Helper()
	f := &fakeProvider{t: t, key: testKey, replies: replies}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	g, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: testKey, Model: "default-model", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return f, g
}

func completion(model, message, usage string) reply {
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"` + model + `",` +
		`"choices":[{"index":0,"finish_reason":"stop","message":` + message + `}]`
	if usage != "" {
		body += `,"usage":` + usage
	}
	return reply{status: 200, body: body + "}"}
}

func textReply(model, text string, in, out int) reply {
	return completion(model, `{"role":"assistant","content":`+quote(text)+`}`,
		fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, in, out, in+out))
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// meter is an in-memory Meter that records what it was told.
type meter struct {
	checkErr  error
	recordErr error
	checks    int
	recorded  []Usage
}

func (m *meter) Check(context.Context) error { m.checks++; return m.checkErr }
func (m *meter) Record(_ context.Context, u Usage) error {
	m.recorded = append(m.recorded, u)
	return m.recordErr
}

func errorCode(t *testing.T, err error) string {
	t.Helper()
	var e *corral.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *corral.Error", err, err)
	}
	return e.Code
}

func TestNewValidatesBaseURL(t *testing.T) {
	tests := []struct {
		name    string
		baseURL string
		ok      bool
	}{
		{"unset", "", true},
		{"ollama", "http://127.0.0.1:11434/v1", true},
		{"openai", "https://api.openai.com/v1", true},
		{"relative", "/v1", false},
		{"no scheme", "127.0.0.1:11434/v1", false},
		{"ftp", "ftp://example.com/v1", false},
		{"no host", "http:///v1", false},
		{"credentials in URL", "https://user:" + testKey + "@example.com/v1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{BaseURL: tt.baseURL, APIKey: testKey})
			if tt.ok && err != nil {
				t.Fatalf("New(BaseURL %q) = %v, want nil", tt.baseURL, err)
			}
			if !tt.ok {
				if err == nil {
					t.Fatalf("New(BaseURL %q) = nil, want an error", tt.baseURL)
				}
				if code := errorCode(t, err); code != corral.EINVALID {
					t.Errorf("New(BaseURL %q) code = %q, want %q", tt.baseURL, code, corral.EINVALID)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Errorf("New error %q carries the key", err)
				}
			}
		})
	}
}

func TestNotConfigured(t *testing.T) {
	g, err := New(Config{APIKey: testKey, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	cerr := g.Configured()
	if cerr == nil {
		t.Fatal("Configured() = nil without a BaseURL")
	}
	if code := errorCode(t, cerr); code != corral.EUNAVAIL {
		t.Errorf("Configured() code = %q, want %q", code, corral.EUNAVAIL)
	}
	for _, want := range []string{"CORRAL_MODEL_BASE_URL", "CORRAL_MODEL_API_KEY", "CORRAL_MODEL", "11434", "api.openai.com"} {
		if !strings.Contains(corral.ErrorMessage(cerr), want) {
			t.Errorf("Configured() message %q does not mention %q", corral.ErrorMessage(cerr), want)
		}
	}

	m := &meter{}
	_, err = g.Complete(context.Background(), Request{Messages: []Message{{Role: "user", Content: "hi"}}}, m)
	if !reflect.DeepEqual(err, cerr) {
		t.Errorf("Complete error = %v, want Configured()'s %v", err, cerr)
	}
	if m.checks != 0 || len(m.recorded) != 0 {
		t.Errorf("meter saw %d checks and %v, want nothing", m.checks, m.recorded)
	}

	// A configured gateway answers nil, and sends nothing by being asked.
	f, g2 := newFake(t)
	if err := g2.Configured(); err != nil {
		t.Errorf("Configured() = %v with a BaseURL", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("fake provider got %d requests, want 0", n)
	}
}

func TestCheckRefusalSendsNothing(t *testing.T) {
	f, g := newFake(t)
	refusal := &corral.Error{Code: corral.EADMISSION, Reason: "budget_exhausted", Message: "token budget reached"}
	m := &meter{checkErr: refusal}
	_, err := g.Complete(context.Background(), Request{Messages: []Message{{Role: "user", Content: "hi"}}}, m)
	if err != refusal {
		t.Errorf("Complete error = %v, want the meter's own error unchanged", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("fake provider got %d requests, want 0", n)
	}
	if len(m.recorded) != 0 {
		t.Errorf("recorded %v, want nothing", m.recorded)
	}
}

func TestContentAndUsage(t *testing.T) {
	f, g := newFake(t, textReply("default-model-2024", "Hello there.", 17, 5))
	m := &meter{}
	resp, err := g.Complete(context.Background(), Request{Messages: []Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "hi"},
	}}, m)
	if err != nil {
		t.Fatal(err)
	}
	want := Response{
		Message: Message{Role: "assistant", Content: "Hello there."},
		Usage:   Usage{Input: 17, Output: 5},
		Model:   "default-model-2024",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("Complete = %+v, want %+v", resp, want)
	}
	if !reflect.DeepEqual(m.recorded, []Usage{{Input: 17, Output: 5}}) {
		t.Errorf("recorded %v, want exactly the provider's [{17 5}]", m.recorded)
	}
	if m.checks != 1 {
		t.Errorf("Check called %d times, want 1", m.checks)
	}
	if s := fmt.Sprintf("%+v %#v", resp, g); strings.Contains(s, testKey) {
		t.Errorf("printing the response or gateway shows the key: %s", s)
	}

	req := f.request(0)
	msgs, _ := json.Marshal(req["messages"])
	if got, want := string(msgs), `[{"content":"be brief","role":"system"},{"content":"hi","role":"user"}]`; got != want {
		t.Errorf("messages sent = %s, want %s", got, want)
	}
	if _, ok := req["tools"]; ok {
		t.Errorf("request without tools sent tools: %v", req["tools"])
	}
	if _, ok := req["stream"]; ok {
		t.Errorf("request asked for streaming: %v", req["stream"])
	}
}

func TestRecordErrorComesWithResponse(t *testing.T) {
	_, g := newFake(t, textReply("m", "done", 3, 4))
	over := &corral.Error{Code: corral.EADMISSION, Reason: "budget_exhausted", Message: "budget reached"}
	m := &meter{recordErr: over}
	resp, err := g.Complete(context.Background(), Request{Messages: []Message{{Role: "user", Content: "go"}}}, m)
	if err != over {
		t.Errorf("Complete error = %v, want the meter's Record error unchanged", err)
	}
	if resp.Message.Content != "done" || resp.Usage != (Usage{3, 4}) {
		t.Errorf("Complete response = %+v, want the reply despite the Record error", resp)
	}
}

var shellTool = Tool{
	Name:        "shell",
	Description: "Run a command in the sandbox.",
	Parameters: map[string]any{
		"type":       "object",
		"properties": map[string]any{"command": map[string]any{"type": "string"}},
		"required":   []any{"command"},
	},
}

func TestToolCallRoundTrip(t *testing.T) {
	toolCallMsg := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",` +
		`"function":{"name":"shell","arguments":"{\"command\":\"ls -la\"}"}}]}`
	f, g := newFake(t,
		completion("m", toolCallMsg, `{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}`),
		textReply("m", "There are two files.", 60, 7),
	)
	m := &meter{}
	thread := []Message{{Role: "user", Content: "what is here?"}}
	resp, err := g.Complete(context.Background(), Request{Messages: thread, Tools: []Tool{shellTool}}, m)
	if err != nil {
		t.Fatal(err)
	}
	wantCall := []ToolCall{{ID: "call_1", Name: "shell", Arguments: `{"command":"ls -la"}`}}
	if resp.Message.Role != "assistant" || resp.Message.Content != "" || !reflect.DeepEqual(resp.Message.ToolCalls, wantCall) {
		t.Errorf("Complete message = %+v, want an assistant tool call %+v", resp.Message, wantCall)
	}

	// The tools went out as OpenAI function tools with their schema.
	tools, _ := json.Marshal(f.request(0)["tools"])
	wantTools := `[{"function":{"description":"Run a command in the sandbox.","name":"shell",` +
		`"parameters":{"properties":{"command":{"type":"string"}},"required":["command"],"type":"object"}},"type":"function"}]`
	if string(tools) != wantTools {
		t.Errorf("tools sent = %s, want %s", tools, wantTools)
	}

	// The follow-up carries the assistant's call and the tool's result.
	thread = append(thread, resp.Message, Message{Role: "tool", ToolCallID: "call_1", Content: "a.txt\nb.txt"})
	resp, err = g.Complete(context.Background(), Request{Messages: thread, Tools: []Tool{shellTool}}, m)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "There are two files." || len(resp.Message.ToolCalls) != 0 {
		t.Errorf("second reply = %+v", resp.Message)
	}
	msgs, _ := json.Marshal(f.request(1)["messages"])
	wantMsgs := `[{"content":"what is here?","role":"user"},` +
		`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"command\":\"ls -la\"}","name":"shell"},"id":"call_1","type":"function"}]},` +
		`{"content":"a.txt\nb.txt","role":"tool","tool_call_id":"call_1"}]`
	if string(msgs) != wantMsgs {
		t.Errorf("follow-up messages sent =\n%s\nwant\n%s", msgs, wantMsgs)
	}
	if want := []Usage{{40, 12}, {60, 7}}; !reflect.DeepEqual(m.recorded, want) {
		t.Errorf("recorded %v, want %v", m.recorded, want)
	}
}

func TestMissingUsage(t *testing.T) {
	msg := `{"role":"assistant","content":"unmetered"}`
	tests := []struct {
		name  string
		usage string
	}{
		{"absent", ""},
		{"null", "null"},
		{"empty", "{}"},
		{"no completion tokens", `{"prompt_tokens":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, g := newFake(t, completion("m", msg, tt.usage))
			m := &meter{}
			_, err := g.Complete(context.Background(), Request{Messages: []Message{{Role: "user", Content: "hi"}}}, m)
			if err == nil {
				t.Fatal("Complete = nil error for a reply without usage")
			}
			if code := errorCode(t, err); code != corral.EUNAVAIL {
				t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
			}
			if want := "the provider reported no token usage: Corral cannot meter it"; corral.ErrorMessage(err) != want {
				t.Errorf("message = %q, want %q", corral.ErrorMessage(err), want)
			}
			if len(m.recorded) != 0 {
				t.Errorf("recorded %v, want nothing", m.recorded)
			}
		})
	}
}

func TestProviderErrorsHideTheKey(t *testing.T) {
	// Real providers echo (parts of) a bad key back; the fake echoes all of it.
	echo := `{"error":{"message":"Incorrect API key provided: ` + testKey + `","type":"invalid_request_error","code":"invalid_api_key"}}`
	tests := []struct {
		name   string
		reply  reply
		status string
	}{
		{"500", reply{500, `{"error":{"message":"boom ` + testKey + `","type":"server_error"}}`}, "500"},
		{"401", reply{401, echo}, "401"},
		{"429", reply{429, echo}, "429"},
		{"not JSON", reply{502, "<html>bad gateway " + testKey + "</html>"}, "502"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, g := newFake(t, tt.reply)
			m := &meter{}
			resp, err := g.Complete(context.Background(), Request{
				Messages: []Message{{Role: "user", Content: "request body text"}},
				Tools:    []Tool{shellTool},
			}, m)
			if err == nil {
				t.Fatal("Complete = nil error for a failed provider")
			}
			if code := errorCode(t, err); code != corral.EUNAVAIL {
				t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
			}
			var e *corral.Error
			errors.As(err, &e)
			if e.Err == nil {
				t.Error("Err is nil: the log gets no cause")
			}
			all := err.Error() + fmt.Sprintf(" %+v %v", err, e.Err)
			for _, secret := range []string{testKey, "request body text", "Run a command"} {
				if strings.Contains(all, secret) {
					t.Errorf("error text carries %q: %s", secret, all)
				}
			}
			if !strings.Contains(corral.ErrorMessage(err), tt.status) {
				t.Errorf("message %q does not give the status %s", corral.ErrorMessage(err), tt.status)
			}
			if !reflect.DeepEqual(resp, Response{}) || len(m.recorded) != 0 {
				t.Errorf("got %+v and recorded %v, want neither", resp, m.recorded)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("fake provider got %d requests, want 1 (no retries)", n)
			}
		})
	}
}

func TestUnreachableProviderHidesTheKey(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	g, err := New(Config{BaseURL: url + "/v1", APIKey: testKey, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Complete(context.Background(), Request{Messages: []Message{{Role: "user", Content: "hi"}}}, &meter{})
	if code := errorCode(t, err); code != corral.EUNAVAIL {
		t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error %q carries the key", err)
	}
}

func TestModelChoice(t *testing.T) {
	tests := []struct {
		name     string
		reqModel string
		want     string
	}{
		{"default", "", "default-model"},
		{"per-request override", "agent-model", "agent-model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, g := newFake(t, textReply(tt.want, "ok", 1, 1))
			resp, err := g.Complete(context.Background(), Request{Model: tt.reqModel, Messages: []Message{{Role: "user", Content: "hi"}}}, &meter{})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.request(0)["model"]; got != tt.want {
				t.Errorf("model sent = %v, want %q", got, tt.want)
			}
			if resp.Model != tt.want {
				t.Errorf("Response.Model = %q, want %q", resp.Model, tt.want)
			}
		})
	}
}

func TestInvalidRequestsSendNothing(t *testing.T) {
	tests := []struct {
		name string
		req  Request
	}{
		{"unknown role", Request{Messages: []Message{{Role: "wizard", Content: "hi"}}}},
		{"tool result without id", Request{Messages: []Message{{Role: "tool", Content: "out"}}}},
		{"tool without name", Request{Messages: []Message{{Role: "user", Content: "hi"}}, Tools: []Tool{{Description: "x"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, g := newFake(t)
			m := &meter{}
			_, err := g.Complete(context.Background(), tt.req, m)
			if code := errorCode(t, err); code != corral.EINVALID {
				t.Errorf("code = %q, want %q", code, corral.EINVALID)
			}
			if n := len(f.requests()); n != 0 || m.checks != 0 {
				t.Errorf("sent %d requests and %d checks, want none", n, m.checks)
			}
		})
	}
}
