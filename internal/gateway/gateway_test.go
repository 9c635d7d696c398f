package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/modeltest"
)

const testKey = "sk-secret-CANARY"

// newProvider starts a fake provider answering script and a Gateway pointed
// at it, and checks at the end that every request carried the key. The
// gateway does not really wait between tries.
func newProvider(t *testing.T, script modeltest.Script) (*modeltest.Provider, *Gateway) {
	t.Helper()
	p, g, _ := newWaiting(t, script)
	return p, g
}

// newWaiting is newProvider that also returns the waits the gateway asked
// for between tries.
func newWaiting(t *testing.T, script modeltest.Script) (*modeltest.Provider, *Gateway, *waits) {
	t.Helper()
	p := modeltest.New(script)
	t.Cleanup(func() {
		p.Close()
		for i, r := range p.Requests() {
			if got, want := r.Authorization, "Bearer "+testKey; got != want {
				t.Errorf("request %d: Authorization = %q, want %q", i, got, want)
			}
		}
	})
	w := &waits{}
	g, err := New(Config{BaseURL: p.URL(), APIKey: testKey, Model: "default-model", Sleep: w.sleep})
	if err != nil {
		t.Fatal(err)
	}
	return p, g, w
}

// waits is a Config.Sleep that records each wait and returns at once (with
// ctx's error when it has ended), so that tests do not wait.
type waits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, d)
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.got...)
}

// sent returns the fields of the i-th request the provider received, each
// as JSON with its keys sorted, so that tests compare content, not order.
func sent(t *testing.T, p *modeltest.Provider, i int) map[string]string {
	t.Helper()
	reqs := p.Requests()
	if i >= len(reqs) {
		t.Fatalf("fake provider got %d requests, want at least %d", len(reqs), i+1)
	}
	var decoded map[string]any
	if err := json.Unmarshal(reqs[i].Body, &decoded); err != nil {
		t.Fatal(err)
	}
	fields := make(map[string]string)
	for k, v := range decoded {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		fields[k] = string(b)
	}
	return fields
}

// modes are the two ways to make a call; most rules must hold for both.
var modes = []struct {
	name   string
	stream bool
}{
	{"whole", false},
	{"streamed", true},
}

// complete calls g.Complete, streamed or not, and returns the deltas a
// streamed call handed over. A streamed call that succeeds must have handed
// over exactly its content.
func complete(t *testing.T, ctx context.Context, g *Gateway, req corral.ModelRequest, m corral.Meter, stream bool) (corral.ModelResponse, []string, error) {
	t.Helper()
	var deltas []string
	if stream {
		req.OnDelta = func(d corral.ModelDelta) { deltas = append(deltas, d.Content) }
	}
	resp, err := g.Complete(ctx, req, m)
	if stream && err == nil && strings.Join(deltas, "") != resp.Message.Content {
		t.Errorf("deltas %q do not add up to the content %q", deltas, resp.Message.Content)
	}
	return resp, deltas, err
}

// completion is a raw non-streamed reply body, for replies modeltest's
// fields cannot describe.
func completion(message, usage string) modeltest.Reply {
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",` +
		`"choices":[{"index":0,"finish_reason":"stop","message":` + message + `}]`
	if usage != "" {
		body += `,"usage":` + usage
	}
	return modeltest.Reply{Status: http.StatusOK, Body: body + "}"}
}

// meter is an in-memory corral.Meter that records what it was told.
type meter struct {
	checkErr  error
	recordErr error
	checks    int             // reservations asked for
	ceilings  []int64         // what each asked for
	models    []string        // the model each was for
	recorded  []corral.Tokens // usage settled as the provider reported it (none: not listed)
	unmetered int             // calls settled without usage: an answer came with none
	settles   int             // settlements, of any kind
}

func (m *meter) Reserve(_ context.Context, model string, ceiling int64) (corral.Settle, error) {
	m.checks++
	if m.checkErr != nil {
		return nil, m.checkErr
	}
	m.ceilings = append(m.ceilings, ceiling)
	m.models = append(m.models, model)
	done := false
	return func(_ context.Context, u corral.Tokens, reported bool) error {
		if done {
			panic("settled twice")
		}
		done = true
		m.settles++
		switch {
		case !reported:
			m.unmetered++
		case u != corral.Tokens{}:
			m.recorded = append(m.recorded, u)
		}
		return m.recordErr
	}, nil
}

func errorCode(t *testing.T, err error) string {
	t.Helper()
	var e *corral.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *corral.Error", err, err)
	}
	return e.Code
}

var hi = []corral.ModelMessage{{Role: "user", Content: "hi"}}

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

	for _, mode := range modes {
		m := &meter{}
		_, _, err = complete(t, context.Background(), g, corral.ModelRequest{Messages: hi}, m, mode.stream)
		if !reflect.DeepEqual(err, cerr) {
			t.Errorf("%s: Complete error = %v, want Configured()'s %v", mode.name, err, cerr)
		}
		if m.checks != 0 || len(m.recorded) != 0 {
			t.Errorf("%s: meter saw %d checks and %v, want nothing", mode.name, m.checks, m.recorded)
		}
	}

	// A configured gateway answers nil, and sends nothing by being asked.
	p, g2 := newProvider(t, nil)
	if err := g2.Configured(); err != nil {
		t.Errorf("Configured() = %v with a BaseURL", err)
	}
	if n := len(p.Requests()); n != 0 {
		t.Errorf("fake provider got %d requests, want 0", n)
	}
}

func TestCheckRefusalSendsNothing(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			p, g := newProvider(t, modeltest.Sequence(modeltest.Text("should not be asked")))
			refusal := &corral.Error{Code: corral.EADMISSION, Reason: "budget_exhausted", Message: "token budget reached"}
			m := &meter{checkErr: refusal}
			_, deltas, err := complete(t, context.Background(), g, corral.ModelRequest{Messages: hi}, m, mode.stream)
			if err != refusal {
				t.Errorf("Complete error = %v, want the meter's own error unchanged", err)
			}
			if n := len(p.Requests()); n != 0 {
				t.Errorf("fake provider got %d requests, want 0", n)
			}
			if len(m.recorded) != 0 || len(deltas) != 0 {
				t.Errorf("recorded %v and got deltas %q, want nothing", m.recorded, deltas)
			}
		})
	}
}

func TestContentAndUsage(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			p, g := newProvider(t, modeltest.Sequence(modeltest.Reply{
				Content: "Hello there, how are you today?",
				Usage:   &modeltest.Usage{Input: 17, Output: 5},
				Model:   "default-model-2024",
			}))
			m := &meter{}
			resp, deltas, err := complete(t, context.Background(), g, corral.ModelRequest{Messages: []corral.ModelMessage{
				{Role: "system", Content: "be brief"},
				{Role: "user", Content: "hi"},
			}}, m, mode.stream)
			if err != nil {
				t.Fatal(err)
			}
			want := corral.ModelResponse{
				Message: corral.ModelMessage{Role: "assistant", Content: "Hello there, how are you today?"},
				Usage:   corral.Tokens{Input: 17, Output: 5},
				Model:   "default-model-2024",
			}
			if !reflect.DeepEqual(resp, want) {
				t.Errorf("Complete = %+v, want %+v", resp, want)
			}
			if !reflect.DeepEqual(m.recorded, []corral.Tokens{{Input: 17, Output: 5}}) {
				t.Errorf("recorded %v, want exactly the provider's [{17 5}]", m.recorded)
			}
			if m.checks != 1 {
				t.Errorf("Check called %d times, want 1", m.checks)
			}
			if s := fmt.Sprintf("%+v %#v", resp, g); strings.Contains(s, testKey) {
				t.Errorf("printing the response or gateway shows the key: %s", s)
			}

			req := sent(t, p, 0)
			if got, want := req["messages"], `[{"content":"be brief","role":"system"},{"content":"hi","role":"user"}]`; got != want {
				t.Errorf("messages sent = %s, want %s", got, want)
			}
			if _, ok := req["tools"]; ok {
				t.Errorf("request without tools sent tools: %s", req["tools"])
			}
			if !mode.stream {
				if _, ok := req["stream"]; ok {
					t.Errorf("request asked for streaming: %s", req["stream"])
				}
				return
			}
			if got := req["stream"]; got != "true" {
				t.Errorf("stream sent = %s, want true", got)
			}
			if got, want := req["stream_options"], `{"include_usage":true}`; got != want {
				t.Errorf("stream_options sent = %s, want %s", got, want)
			}
			if len(deltas) < 2 {
				t.Errorf("got deltas %q, want the content in several pieces", deltas)
			}
		})
	}
}

func TestRecordErrorComesWithResponse(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			_, g := newProvider(t, modeltest.Sequence(modeltest.Reply{Content: "done", Usage: &modeltest.Usage{Input: 3, Output: 4}}))
			over := &corral.Error{Code: corral.EADMISSION, Reason: "budget_exhausted", Message: "budget reached"}
			m := &meter{recordErr: over}
			resp, _, err := complete(t, context.Background(), g, corral.ModelRequest{Messages: []corral.ModelMessage{{Role: "user", Content: "go"}}}, m, mode.stream)
			if err != over {
				t.Errorf("Complete error = %v, want the meter's Record error unchanged", err)
			}
			if resp.Message.Content != "done" || resp.Usage != (corral.Tokens{Input: 3, Output: 4}) {
				t.Errorf("Complete response = %+v, want the reply despite the Record error", resp)
			}
		})
	}
}

var shellTool = corral.ModelTool{
	Name:        "shell",
	Description: "Run a command in the sandbox.",
	Parameters: map[string]any{
		"type":       "object",
		"properties": map[string]any{"command": map[string]any{"type": "string"}},
		"required":   []any{"command"},
	},
}

func TestToolCallRoundTrip(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			p, g := newProvider(t, modeltest.Sequence(
				modeltest.Reply{ToolCalls: []modeltest.ToolCall{modeltest.ShellCall("call_1", "ls -la")},
					Usage: &modeltest.Usage{Input: 40, Output: 12}},
				modeltest.Reply{Content: "There are two files.", Usage: &modeltest.Usage{Input: 60, Output: 7}},
			))
			m := &meter{}
			thread := []corral.ModelMessage{{Role: "user", Content: "what is here?"}}
			resp, deltas, err := complete(t, context.Background(), g, corral.ModelRequest{Messages: thread, Tools: []corral.ModelTool{shellTool}}, m, mode.stream)
			if err != nil {
				t.Fatal(err)
			}
			wantCall := []corral.ToolCall{{ID: "call_1", Name: "shell", Arguments: `{"command":"ls -la"}`}}
			if resp.Message.Role != "assistant" || resp.Message.Content != "" || !reflect.DeepEqual(resp.Message.ToolCalls, wantCall) {
				t.Errorf("Complete message = %+v, want an assistant tool call %+v", resp.Message, wantCall)
			}
			if len(deltas) != 0 {
				t.Errorf("a reply of only tool calls gave deltas %q", deltas)
			}

			// The tools went out as OpenAI function tools with their schema.
			wantTools := `[{"function":{"description":"Run a command in the sandbox.","name":"shell",` +
				`"parameters":{"properties":{"command":{"type":"string"}},"required":["command"],"type":"object"}},"type":"function"}]`
			if tools := sent(t, p, 0)["tools"]; tools != wantTools {
				t.Errorf("tools sent = %s, want %s", tools, wantTools)
			}

			// The follow-up carries the assistant's call and the tool's result.
			thread = append(thread, resp.Message, corral.ModelMessage{Role: "tool", ToolCallID: "call_1", Content: "a.txt\nb.txt"})
			resp, _, err = complete(t, context.Background(), g, corral.ModelRequest{Messages: thread, Tools: []corral.ModelTool{shellTool}}, m, mode.stream)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Content != "There are two files." || len(resp.Message.ToolCalls) != 0 {
				t.Errorf("second reply = %+v", resp.Message)
			}
			wantMsgs := `[{"content":"what is here?","role":"user"},` +
				`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"command\":\"ls -la\"}","name":"shell"},"id":"call_1","type":"function"}]},` +
				`{"content":"a.txt\nb.txt","role":"tool","tool_call_id":"call_1"}]`
			if msgs := sent(t, p, 1)["messages"]; msgs != wantMsgs {
				t.Errorf("follow-up messages sent =\n%s\nwant\n%s", msgs, wantMsgs)
			}
			results := p.Requests()[1].LastToolResults()
			if len(results) != 1 || results[0].ToolCallID != "call_1" || results[0].Content != "a.txt\nb.txt" {
				t.Errorf("provider saw tool results %+v, want the one for call_1", results)
			}
			if want := []corral.Tokens{{Input: 40, Output: 12}, {Input: 60, Output: 7}}; !reflect.DeepEqual(m.recorded, want) {
				t.Errorf("recorded %v, want %v", m.recorded, want)
			}
		})
	}
}

// TestStreamReassemblesToolCalls: the provider streams each call's
// arguments in pieces, interleaved between calls; the gateway puts them
// back together by index.
func TestStreamReassemblesToolCalls(t *testing.T) {
	long := strings.Repeat("line of the file, with \"quotes\" and ünïcödé\n", 50)
	calls := []modeltest.ToolCall{
		modeltest.ShellCall("call_a", "go test ./... > out.txt"),
		modeltest.WriteCall("call_b", "notes/todo.md", long),
		modeltest.ReadCall("call_c", "go.mod"),
	}
	_, g := newProvider(t, modeltest.Sequence(modeltest.Reply{Content: "Three things.", ToolCalls: calls}))
	m := &meter{}
	resp, _, err := complete(t, context.Background(), g, corral.ModelRequest{Messages: hi}, m, true)
	if err != nil {
		t.Fatal(err)
	}
	var want []corral.ToolCall
	for _, c := range calls {
		want = append(want, corral.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	if !reflect.DeepEqual(resp.Message.ToolCalls, want) {
		t.Errorf("tool calls = %+v\nwant %+v", resp.Message.ToolCalls, want)
	}
	if resp.Message.Content != "Three things." {
		t.Errorf("content = %q, want %q", resp.Message.Content, "Three things.")
	}
	var args struct{ Path, Content string }
	if err := json.Unmarshal([]byte(resp.Message.ToolCalls[1].Arguments), &args); err != nil || args.Content != long {
		t.Errorf("write_file arguments do not decode to the content sent: %v", err)
	}
	if want := []corral.Tokens{{Input: modeltest.DefaultInputTokens, Output: modeltest.DefaultOutputTokens}}; !reflect.DeepEqual(m.recorded, want) {
		t.Errorf("recorded %v, want %v", m.recorded, want)
	}
}

// rawStream is a streamed reply of the given data lines and [DONE], for
// streams modeltest's fields cannot describe.
func rawStream(data ...string) modeltest.Reply {
	var b strings.Builder
	for _, d := range data {
		b.WriteString("data: " + d + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return modeltest.Reply{Status: http.StatusOK, Body: b.String()}
}

func TestStreamUsageAndShape(t *testing.T) {
	chunk := func(id, delta, usage string) string {
		return `{"id":"` + id + `","object":"chat.completion.chunk","created":1,"model":"m",` +
			`"choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}],"usage":` + usage + `}`
	}
	usageOnly := func(id, usage string) string {
		return `{"id":"` + id + `","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":` + usage + `}`
	}
	tests := []struct {
		name     string
		reply    modeltest.Reply
		content  string // of the corral.ModelResponse, "" when the call fails
		message  string // of the error, "" when the call succeeds
		recorded []corral.Tokens
	}{
		{
			// Some providers send running totals on every chunk: the last
			// figures are the call's, not their sum.
			name: "running totals",
			reply: rawStream(
				chunk("a", `{"role":"assistant","content":"Hel"}`, `{"prompt_tokens":9,"completion_tokens":1}`),
				chunk("a", `{"content":"lo"}`, `{"prompt_tokens":9,"completion_tokens":2}`),
				usageOnly("a", `{"prompt_tokens":9,"completion_tokens":3}`),
			),
			content:  "Hello",
			recorded: []corral.Tokens{{Input: 9, Output: 3}},
		},
		{
			name: "usage chunk with another id",
			reply: rawStream(
				chunk("a", `{"role":"assistant","content":"Hi"}`, "null"),
				usageOnly("b", `{"prompt_tokens":4,"completion_tokens":1}`),
			),
			content:  "Hi",
			recorded: []corral.Tokens{{Input: 4, Output: 1}},
		},
		{
			// The reply is broken, but the tokens were spent all the same.
			name: "chunks of two replies",
			reply: rawStream(
				chunk("a", `{"role":"assistant","content":"Hi"}`, "null"),
				chunk("b", `{"content":" there"}`, "null"),
				usageOnly("a", `{"prompt_tokens":4,"completion_tokens":2}`),
			),
			message:  "the provider streamed a reply that does not fit together",
			recorded: []corral.Tokens{{Input: 4, Output: 2}},
		},
		{
			name: "no choices",
			reply: rawStream(
				usageOnly("a", `{"prompt_tokens":4,"completion_tokens":0}`),
			),
			message:  "the provider returned no reply",
			recorded: []corral.Tokens{{Input: 4, Output: 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, g := newProvider(t, modeltest.Sequence(tt.reply))
			m := &meter{}
			resp, _, err := complete(t, context.Background(), g, corral.ModelRequest{Messages: hi}, m, true)
			if tt.message == "" {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Message.Content != tt.content {
					t.Errorf("content = %q, want %q", resp.Message.Content, tt.content)
				}
			} else if got := corral.ErrorMessage(err); err == nil || got != tt.message {
				t.Errorf("error = %v, want the message %q", err, tt.message)
			}
			if !reflect.DeepEqual(m.recorded, tt.recorded) {
				t.Errorf("recorded %v, want %v", m.recorded, tt.recorded)
			}
		})
	}
}

func TestMissingUsage(t *testing.T) {
	msg := `{"role":"assistant","content":"unmetered"}`
	tests := []struct {
		name   string
		reply  modeltest.Reply
		stream bool
	}{
		{"absent", modeltest.Reply{Content: "unmetered", NoUsage: true}, false},
		{"null", completion(msg, "null"), false},
		{"empty", completion(msg, "{}"), false},
		{"no completion tokens", completion(msg, `{"prompt_tokens":3}`), false},
		{"stream without a usage chunk", modeltest.Reply{Content: "unmetered", NoUsage: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, g := newProvider(t, modeltest.Sequence(tt.reply))
			m := &meter{}
			_, _, err := complete(t, context.Background(), g, corral.ModelRequest{Messages: hi}, m, tt.stream)
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

// checkHidden fails t if err, or its cause for the log, carries any secret.
func checkHidden(t *testing.T, err error, secrets ...string) {
	t.Helper()
	var e *corral.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *corral.Error", err, err)
	}
	if e.Err == nil {
		t.Error("Err is nil: the log gets no cause")
	}
	all := err.Error() + fmt.Sprintf(" %+v %v %#v", err, e.Err, e.Err)
	for _, secret := range secrets {
		if strings.Contains(all, secret) {
			t.Errorf("error text carries %q: %s", secret, all)
		}
	}
}

func TestProviderErrorsHideTheKey(t *testing.T) {
	// Real providers echo (parts of) a bad key back; the fake echoes all of it.
	echo := `{"error":{"message":"Incorrect API key provided: ` + testKey + `","type":"invalid_request_error","code":"invalid_api_key"}}`
	// The provider's own message is shown, the key taken out, except on a
	// refusal of the credentials, whose message may echo part of the key.
	tests := []struct {
		name     string
		reply    modeltest.Reply
		message  string
		requests int // 429 and 5xx are tried again
	}{
		{"500", modeltest.Reply{Status: 500, Body: `{"error":{"message":"boom ` + testKey + `","type":"server_error"}}`},
			"the model provider answered 500 Internal Server Error after 3 tries: boom [redacted]", 3},
		{"401", modeltest.Reply{Status: 401, Body: echo},
			"the model provider refused the credentials (401): check CORRAL_MODEL_API_KEY", 1},
		{"403", modeltest.Reply{Status: 403, Body: echo},
			"the model provider refused the credentials (403): check CORRAL_MODEL_API_KEY", 1},
		{"400", modeltest.Reply{Status: 400, Body: echo},
			"the model provider answered 400 Bad Request: Incorrect API key provided: [redacted]", 1},
		{"429", modeltest.Reply{Status: 429, Body: echo},
			"the model provider answered 429 Too Many Requests after 3 tries: Incorrect API key provided: [redacted]", 3},
		{"not JSON", modeltest.Reply{Status: 502, Body: "<html>bad gateway " + testKey + "</html>"},
			"the model provider answered 502 Bad Gateway after 3 tries", 3},
	}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+mode.name, func(t *testing.T) {
				p, g := newProvider(t, modeltest.Sequence(tt.reply))
				m := &meter{}
				resp, _, err := complete(t, context.Background(), g, corral.ModelRequest{
					Messages: []corral.ModelMessage{{Role: "user", Content: "request body text"}},
					Tools:    []corral.ModelTool{shellTool},
				}, m, mode.stream)
				if err == nil {
					t.Fatal("Complete = nil error for a failed provider")
				}
				if code := errorCode(t, err); code != corral.EUNAVAIL {
					t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
				}
				checkHidden(t, err, testKey, "request body text", "Run a command")
				if got := corral.ErrorMessage(err); got != tt.message {
					t.Errorf("message = %q, want %q", got, tt.message)
				}
				if !reflect.DeepEqual(resp, corral.ModelResponse{}) || len(m.recorded) != 0 {
					t.Errorf("got %+v and recorded %v, want neither", resp, m.recorded)
				}
				if n := len(p.Requests()); n != tt.requests {
					t.Errorf("fake provider got %d requests, want %d", n, tt.requests)
				}
			})
		}
	}
}

// TestStreamErrorEventHidesTheKey: a provider that fails in the middle of a
// stream sends an error event, whose message may echo the key or the
// request; neither reaches the error.
func TestStreamErrorEventHidesTheKey(t *testing.T) {
	p, g := newProvider(t, modeltest.Sequence(modeltest.Reply{
		Content:     "I will start by",
		StreamError: "overloaded while answering request body text with key " + testKey,
	}))
	m := &meter{}
	resp, deltas, err := complete(t, context.Background(), g, corral.ModelRequest{
		Messages: []corral.ModelMessage{{Role: "user", Content: "request body text"}},
	}, m, true)
	if err == nil {
		t.Fatal("Complete = nil error for a stream that ended in an error event")
	}
	if code := errorCode(t, err); code != corral.EUNAVAIL {
		t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
	}
	checkHidden(t, err, testKey, "request body text")
	if want := "the model provider reported an error in the middle of its reply"; corral.ErrorMessage(err) != want {
		t.Errorf("message = %q, want %q", corral.ErrorMessage(err), want)
	}
	if strings.Join(deltas, "") != "I will start by" {
		t.Errorf("deltas %q, want the text sent before the error", deltas)
	}
	if !reflect.DeepEqual(resp, corral.ModelResponse{}) || len(m.recorded) != 0 || m.unmetered != 1 {
		t.Errorf("got %+v, recorded %v, %d metered at the ceiling; want none, none, 1: an answer came with no usage", resp, m.recorded, m.unmetered)
	}
	if n := len(p.Requests()); n != 1 {
		t.Errorf("fake provider got %d requests, want 1", n)
	}
}

func TestUnreachableProviderHidesTheKey(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	w := &waits{}
	g, err := New(Config{BaseURL: url + "/v1", APIKey: testKey, Model: "m", Sleep: w.sleep})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range modes {
		_, _, err = complete(t, context.Background(), g, corral.ModelRequest{Messages: hi}, &meter{}, mode.stream)
		if code := errorCode(t, err); code != corral.EUNAVAIL {
			t.Errorf("%s: code = %q, want %q", mode.name, code, corral.EUNAVAIL)
		}
		// A refused connection is tried again, as a 5xx is.
		if want := "the model provider could not be reached after 3 tries"; corral.ErrorMessage(err) != want {
			t.Errorf("%s: message = %q, want %q", mode.name, corral.ErrorMessage(err), want)
		}
		checkHidden(t, err, testKey)
	}
}

// TestStreamCancelled: cancelling the context while the provider holds a
// stream open ends the call at once, with the cancelled error.
func TestStreamCancelled(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	p, g := newProvider(t, modeltest.Sequence(modeltest.Reply{Content: "a reply that never finishes", Block: release}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	firstDelta := make(chan struct{})
	var deltas []string
	req := corral.ModelRequest{Messages: hi, OnDelta: func(d corral.ModelDelta) {
		if len(deltas) == 0 {
			close(firstDelta)
		}
		deltas = append(deltas, d.Content)
	}}
	m := &meter{}
	type outcome struct {
		resp corral.ModelResponse
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		resp, err := g.Complete(ctx, req, m)
		done <- outcome{resp, err}
	}()

	select {
	case <-firstDelta:
	case o := <-done:
		t.Fatalf("Complete returned before the stream was cancelled: %+v, %v", o.resp, o.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no delta arrived from the held stream")
	}
	cancel()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Complete did not return 5s after its context was cancelled")
	}
	if o.err == nil {
		t.Fatalf("Complete = %+v, nil error after cancelling", o.resp)
	}
	if code := errorCode(t, o.err); code != corral.EUNAVAIL {
		t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
	}
	if want := "the model call was cancelled"; corral.ErrorMessage(o.err) != want {
		t.Errorf("message = %q, want %q", corral.ErrorMessage(o.err), want)
	}
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", o.err)
	}
	checkHidden(t, o.err, testKey)
	if len(m.recorded) != 0 {
		t.Errorf("recorded %v, want nothing: no usage came", m.recorded)
	}
	if n := len(p.Requests()); n != 1 {
		t.Errorf("fake provider got %d requests, want 1", n)
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
		for _, mode := range modes {
			t.Run(tt.name+"/"+mode.name, func(t *testing.T) {
				p, g := newProvider(t, modeltest.Sequence(modeltest.Text("ok")))
				m := &meter{}
				resp, _, err := complete(t, context.Background(), g, corral.ModelRequest{Model: tt.reqModel, Messages: hi}, m, mode.stream)
				if err != nil {
					t.Fatal(err)
				}
				if got := p.Requests()[0].Model; got != tt.want {
					t.Errorf("model sent = %q, want %q", got, tt.want)
				}
				// The reservation names the model sent, which usage is kept under.
				if !slices.Equal(m.models, []string{tt.want}) {
					t.Errorf("reserved for models %q, want [%q]", m.models, tt.want)
				}
				if resp.Model != tt.want {
					t.Errorf("Response.Model = %q, want %q", resp.Model, tt.want)
				}
			})
		}
	}
}

func TestInvalidRequestsSendNothing(t *testing.T) {
	tests := []struct {
		name string
		req  corral.ModelRequest
	}{
		{"unknown role", corral.ModelRequest{Messages: []corral.ModelMessage{{Role: "wizard", Content: "hi"}}}},
		{"tool result without id", corral.ModelRequest{Messages: []corral.ModelMessage{{Role: "tool", Content: "out"}}}},
		{"tool without name", corral.ModelRequest{Messages: hi, Tools: []corral.ModelTool{{Description: "x"}}}},
	}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+mode.name, func(t *testing.T) {
				p, g := newProvider(t, nil)
				m := &meter{}
				_, _, err := complete(t, context.Background(), g, tt.req, m, mode.stream)
				if code := errorCode(t, err); code != corral.EINVALID {
					t.Errorf("code = %q, want %q", code, corral.EINVALID)
				}
				if n := len(p.Requests()); n != 0 || m.checks != 0 {
					t.Errorf("sent %d requests and %d checks, want none", n, m.checks)
				}
			})
		}
	}
}

// TestCallsReserveTheirCeiling: every call is sent with an output cap, in
// the field the provider takes, and reserves its request's bytes and that
// cap before it goes; usage that is beyond it is left to the meter (see
// corral.Charge).
func TestCallsReserveTheirCeiling(t *testing.T) {
	for _, field := range []string{"", "max_completion_tokens"} {
		p := modeltest.New(modeltest.Sequence(modeltest.Text("ok")))
		t.Cleanup(p.Close)
		g, err := New(Config{BaseURL: p.URL(), Model: "m", MaxOutput: 1234, OutputField: field})
		if err != nil {
			t.Fatal(err)
		}
		m := &meter{}
		if _, err := g.Complete(context.Background(), corral.ModelRequest{Messages: hi}, m); err != nil {
			t.Fatal(err)
		}
		want := field
		if want == "" {
			want = "max_tokens"
		}
		body := p.Requests()[0].Body
		var sent map[string]any
		if err := json.Unmarshal(body, &sent); err != nil || sent[want] != float64(1234) {
			t.Fatalf("%s: sent %s, want %s 1234", want, body, want)
		}
		if len(m.ceilings) != 1 || m.ceilings[0] < int64(len(body))+1234-16 {
			t.Fatalf("%s: reserved %v for a body of %d bytes and an output cap of 1234", want, m.ceilings, len(body))
		}
	}
	if _, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", OutputField: "max_output"}); corral.ErrorCode(err) != corral.EINVALID {
		t.Errorf("an unknown output field: %v", err)
	}
}
