package modeltest

import (
	"bytes"
	"context"
	"corral/internal/poll"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// start runs a provider for the test.
func start(t *testing.T, script Script) *Provider {
	t.Helper()
	p := New(script)
	t.Cleanup(p.Close)
	return p
}

// post sends a chat completion request and returns the response, whose
// body the caller closes.
func post(t *testing.T, ctx context.Context, p *Provider, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const userHi = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

// completion is the part of a whole reply the tests look at.
type completion struct {
	Model   string `json:"model"`
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

func wholeReply(t *testing.T, p *Provider, body string) completion {
	t.Helper()
	resp := post(t, context.Background(), p, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var cc completion
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil {
		t.Fatal(err)
	}
	return cc
}

func content(cc completion) string {
	if len(cc.Choices) == 0 || cc.Choices[0].Message.Content == nil {
		return ""
	}
	return *cc.Choices[0].Message.Content
}

func TestSequence(t *testing.T) {
	p := start(t, Sequence(Text("one"), Text("two"), Text("three")))
	var got []string
	for range 5 {
		got = append(got, content(wholeReply(t, p, userHi)))
	}
	if want := []string{"one", "two", "three", "three", "three"}; !reflect.DeepEqual(got, want) {
		t.Errorf("replies = %q, want %q", got, want)
	}
	if n := len(p.Requests()); n != 5 {
		t.Errorf("Requests() has %d, want 5", n)
	}
}

func TestUnscripted(t *testing.T) {
	tests := []struct {
		name   string
		script Script
	}{
		{"nil script", nil},
		{"empty sequence", Sequence()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, tt.script)
			resp := post(t, context.Background(), p, userHi)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), "no reply is scripted") {
				t.Errorf("unscripted request answered %d %s, want 500 saying no reply is scripted", resp.StatusCode, b)
			}
		})
	}
}

func TestWholeReply(t *testing.T) {
	p := start(t, Sequence(
		Reply{Content: "hello", Model: "m-2024", Usage: &Usage{Input: 7, Output: 3}},
		Calls(ShellCall("call_x", "ls"), ReadCall("", "go.mod")),
		Reply{Content: "unmetered", NoUsage: true},
	))

	cc := wholeReply(t, p, userHi)
	if content(cc) != "hello" || cc.Model != "m-2024" || cc.Choices[0].FinishReason != "stop" {
		t.Errorf("reply = %+v, want hello from m-2024, finished with stop", cc)
	}
	if cc.Usage == nil || cc.Usage.PromptTokens != 7 || cc.Usage.CompletionTokens != 3 || cc.Usage.TotalTokens != 10 {
		t.Errorf("usage = %+v, want 7 + 3 = 10", cc.Usage)
	}

	cc = wholeReply(t, p, userHi)
	msg := cc.Choices[0].Message
	if msg.Content != nil || len(msg.ToolCalls) != 2 || cc.Choices[0].FinishReason != "tool_calls" || cc.Model != "m" {
		t.Fatalf("reply = %+v, want two tool calls, null content, the requested model", cc)
	}
	if c := msg.ToolCalls[0]; c.ID != "call_x" || c.Type != "function" || c.Function.Name != "shell" || c.Function.Arguments != `{"command":"ls"}` {
		t.Errorf("first call = %+v", c)
	}
	if c := msg.ToolCalls[1]; c.ID != "call_2_1" || c.Function.Name != "read_file" {
		t.Errorf("second call = %+v, want read_file given the id call_2_1", c)
	}
	if cc.Usage == nil || cc.Usage.PromptTokens != DefaultInputTokens || cc.Usage.CompletionTokens != DefaultOutputTokens {
		t.Errorf("usage = %+v, want the defaults", cc.Usage)
	}

	if cc = wholeReply(t, p, userHi); cc.Usage != nil {
		t.Errorf("NoUsage reply carries usage %+v", cc.Usage)
	}
}

// events reads a Server-Sent Events body into its data lines, [DONE]
// included.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %q is not a data line", ev)
		}
		out = append(out, data)
	}
	return out
}

// chunk is the part of a streamed chunk the tests look at.
type chunk struct {
	Choices []struct {
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func TestStreamedReply(t *testing.T) {
	calls := []ToolCall{
		WriteCall("call_w", "a.txt", "some longer content for the file"),
		ShellCall("call_s", "make test"),
	}
	tests := []struct {
		name      string
		reply     Reply
		options   string
		wantUsage bool
	}{
		{"with usage", Reply{Content: "Let me write that down.", ToolCalls: calls, Usage: &Usage{Input: 21, Output: 8}},
			`,"stream_options":{"include_usage":true}`, true},
		{"usage not asked for", Reply{Content: "Let me write that down.", ToolCalls: calls}, ``, false},
		{"no usage", Reply{Content: "Let me write that down.", ToolCalls: calls, NoUsage: true},
			`,"stream_options":{"include_usage":true}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, Sequence(tt.reply))
			resp := post(t, context.Background(), p,
				`{"model":"m","stream":true`+tt.options+`,"messages":[{"role":"user","content":"hi"}]}`)
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type = %q, want text/event-stream", ct)
			}
			evs := events(t, resp.Body)
			if evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("last event = %q, want [DONE]", evs[len(evs)-1])
			}

			var (
				text       []string
				args       = make([][]string, len(calls))
				ids, names = make([]string, len(calls)), make([]string, len(calls))
				finish     string
				usage      int
			)
			for _, ev := range evs[:len(evs)-1] {
				var c chunk
				if err := json.Unmarshal([]byte(ev), &c); err != nil {
					t.Fatalf("event %s: %v", ev, err)
				}
				if c.Usage != nil {
					usage++
					if len(c.Choices) != 0 || c.Usage.PromptTokens != 21 || c.Usage.CompletionTokens != 8 {
						t.Errorf("usage chunk %s, want no choices and 21 + 8 tokens", ev)
					}
				}
				for _, ch := range c.Choices {
					if ch.Delta.Content != nil && *ch.Delta.Content != "" {
						text = append(text, *ch.Delta.Content)
					}
					for _, tc := range ch.Delta.ToolCalls {
						args[tc.Index] = append(args[tc.Index], tc.Function.Arguments)
						ids[tc.Index] += tc.ID
						names[tc.Index] += tc.Function.Name
					}
					if ch.FinishReason != nil {
						finish = *ch.FinishReason
					}
				}
			}
			if len(text) < 2 || strings.Join(text, "") != tt.reply.Content {
				t.Errorf("text pieces %q, want several adding up to %q", text, tt.reply.Content)
			}
			for i, c := range calls {
				if len(args[i]) < 2 || strings.Join(args[i], "") != c.Arguments {
					t.Errorf("call %d: argument pieces %q, want several adding up to %s", i, args[i], c.Arguments)
				}
				if ids[i] != c.ID || names[i] != c.Name {
					t.Errorf("call %d: id %q and name %q, want each sent once: %q, %q", i, ids[i], names[i], c.ID, c.Name)
				}
			}
			if finish != "tool_calls" {
				t.Errorf("finish_reason = %q, want tool_calls", finish)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.wantUsage]; usage != want {
				t.Errorf("got %d usage chunks, want %d", usage, want)
			}
		})
	}
}

func TestStreamError(t *testing.T) {
	p := start(t, Sequence(Reply{Content: "partial answer", StreamError: "overloaded"}))
	resp := post(t, context.Background(), p, `{"model":"m","stream":true,"messages":[]}`)
	defer resp.Body.Close()
	evs := events(t, resp.Body)
	var last chunk
	if err := json.Unmarshal([]byte(evs[len(evs)-1]), &last); err != nil || last.Error == nil || last.Error.Message != "overloaded" {
		t.Errorf("last event = %s, want an error event saying overloaded", evs[len(evs)-1])
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		name     string
		reply    Reply
		wantBody string
	}{
		{"default body", Reply{Status: 429}, `"message":"Too Many Requests"`},
		{"given body", Reply{Status: 401, Body: `{"error":{"message":"bad key"}}`}, `{"error":{"message":"bad key"}}`},
		{"raw 200", Reply{Status: 200, Body: `{"choices":[]}`}, `{"choices":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, Sequence(tt.reply))
			resp := post(t, context.Background(), p, userHi)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.reply.Status || !strings.Contains(string(b), tt.wantBody) {
				t.Errorf("answered %d %s, want %d with %s", resp.StatusCode, b, tt.reply.Status, tt.wantBody)
			}
		})
	}
}

func TestRateLimited(t *testing.T) {
	tests := []struct {
		name       string
		reply      Reply
		retryAfter string // the header the answer must carry; "" for none
	}{
		{"seconds", RateLimited("7"), "7"},
		{"HTTP date", RateLimited("Wed, 21 Oct 2015 07:28:00 GMT"), "Wed, 21 Oct 2015 07:28:00 GMT"},
		{"no header", RateLimited(""), ""},
		{"header on a completion", Reply{Content: "hi", Header: http.Header{"Retry-After": {"3"}}}, "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, Sequence(tt.reply))
			resp := post(t, context.Background(), p, userHi)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			wantStatus := tt.reply.Status
			if wantStatus == 0 {
				wantStatus = http.StatusOK
			}
			if resp.StatusCode != wantStatus {
				t.Errorf("answered %d %s, want %d", resp.StatusCode, b, wantStatus)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
			if wantStatus == http.StatusTooManyRequests && !strings.Contains(string(b), `"code":"rate_limit_exceeded"`) {
				t.Errorf("429 body %s does not say rate_limit_exceeded", b)
			}
		})
	}
}

func TestBlock(t *testing.T) {
	release := make(chan struct{})
	p := start(t, Sequence(Reply{Content: "at last", Block: release}))
	got := make(chan string, 1)
	go func() {
		resp, err := http.Post(p.URL()+"/chat/completions", "application/json", strings.NewReader(userHi))
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		var cc completion
		json.NewDecoder(resp.Body).Decode(&cc)
		got <- content(cc)
	}()
	select {
	case s := <-got:
		t.Fatalf("held reply answered %q before its release", s)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case s := <-got:
		if s != "at last" {
			t.Errorf("released reply = %q, want %q", s, "at last")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reply did not come after its release")
	}
}

// TestBlockMidStream: a held streamed reply has sent its start; the rest
// follows the release.
func TestBlockMidStream(t *testing.T) {
	release := make(chan struct{})
	p := start(t, Sequence(Reply{Content: "one two three four", Block: release}))
	resp := post(t, context.Background(), p, `{"model":"m","stream":true,"messages":[]}`)
	defer resp.Body.Close()

	// The role chunk and the first piece arrive while the reply is held.
	buf := make([]byte, 0, 4096)
	for bytes.Count(buf, []byte("\n\n")) < 2 {
		b := make([]byte, 4096)
		n, err := resp.Body.Read(b)
		if err != nil {
			t.Fatalf("reading the held stream: %v", err)
		}
		buf = append(buf, b[:n]...)
	}
	if !strings.Contains(string(buf), `"content":"one `) {
		t.Errorf("held stream so far = %s, want the first piece of text", buf)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("stream after the release = %s, want it to run to [DONE]", rest)
	}
}

// TestBlockEnds: a held reply ends when the client goes away or the
// provider closes, so a test that never releases it cannot hang.
func TestBlockEnds(t *testing.T) {
	never := make(chan struct{})
	t.Run("client cancels", func(t *testing.T) {
		p := start(t, Sequence(Reply{Content: "never", Block: never}))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL()+"/chat/completions", strings.NewReader(userHi))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatal("a held reply answered")
		}
		closed := make(chan struct{})
		go func() { p.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Close hangs after the client went away")
		}
	})
	t.Run("provider closes", func(t *testing.T) {
		p := New(Sequence(Reply{Content: "never", Block: never}))
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, p.URL()+"/chat/completions", strings.NewReader(userHi))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		// A liveness bound, not a timing assertion: the request is local.
		poll.Within(t, time.Minute, "the held request to reach the provider", func() bool { return len(p.Requests()) > 0 })
		closed := make(chan struct{})
		go func() { p.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Close hangs on a held reply")
		}
		<-done
	})
}

func TestRequestsDecoded(t *testing.T) {
	p := start(t, Sequence(Text("ok")))
	body := `{"model":"agent-model","stream":true,"stream_options":{"include_usage":true},` +
		`"messages":[` +
		`{"role":"system","content":"be brief"},` +
		`{"role":"user","content":[{"type":"text","text":"list "},{"type":"text","text":"files"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"c1","type":"function","function":{"name":"shell","arguments":"{\"command\":\"ls\"}"}},` +
		`{"id":"c2","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"a"},` +
		`{"role":"tool","tool_call_id":"c2","content":"A"}],` +
		`"tools":[{"type":"function","function":{"name":"shell"}},{"type":"function","function":{"name":"read_file"}}]}`
	resp := post(t, context.Background(), p, body)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	reqs := p.Requests()
	if len(reqs) != 1 {
		t.Fatalf("Requests() has %d, want 1", len(reqs))
	}
	got := reqs[0]
	if string(got.Body) != body {
		t.Errorf("Body = %s, want the request as sent", got.Body)
	}
	got.Body = nil
	want := Request{
		Model: "agent-model",
		Messages: []Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "list files"},
			{Role: "assistant", ToolCalls: []ToolCall{
				{ID: "c1", Name: "shell", Arguments: `{"command":"ls"}`},
				{ID: "c2", Name: "read_file", Arguments: `{"path":"a"}`},
			}},
			{Role: "tool", ToolCallID: "c1", Content: "a"},
			{Role: "tool", ToolCallID: "c2", Content: "A"},
		},
		Tools:         []string{"shell", "read_file"},
		Stream:        true,
		IncludeUsage:  true,
		Authorization: "Bearer sk-test",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Requests()[0] =\n%+v\nwant\n%+v", got, want)
	}

	if results := got.LastToolResults(); !reflect.DeepEqual(results, want.Messages[3:]) {
		t.Errorf("LastToolResults() = %+v, want the two tool turns", results)
	}
	for role, n := range map[string]int{"system": 1, "user": 1, "assistant": 1, "tool": 2, "wizard": 0} {
		if got := got.CountRole(role); got != n {
			t.Errorf("CountRole(%q) = %d, want %d", role, got, n)
		}
	}
	if last := got.Last(); last.ToolCallID != "c2" {
		t.Errorf("Last() = %+v, want the result for c2", last)
	}
	if results := (Request{Messages: want.Messages[:2]}).LastToolResults(); len(results) != 0 {
		t.Errorf("LastToolResults() of a conversation ending with the user = %+v, want none", results)
	}
}

func TestNotChatCompletions(t *testing.T) {
	p := start(t, Sequence(Text("ok")))
	resp, err := http.Get(p.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/models answered %d, want 404", resp.StatusCode)
	}
	resp = post(t, context.Background(), p, `not json`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body that is not JSON answered %d, want 400", resp.StatusCode)
	}
	if n := len(p.Requests()); n != 0 {
		t.Errorf("Requests() has %d, want 0", n)
	}
}

func TestToolCallHelpers(t *testing.T) {
	tests := []struct {
		name string
		call ToolCall
		want ToolCall
	}{
		{"shell", ShellCall("c1", `grep -r "x" . > out && echo <done>`),
			ToolCall{"c1", "shell", `{"command":"grep -r \"x\" . > out && echo <done>"}`}},
		{"read", ReadCall("c2", "src/main.go"), ToolCall{"c2", "read_file", `{"path":"src/main.go"}`}},
		{"write", WriteCall("c3", "a.txt", "line 1\nline 2\n"),
			ToolCall{"c3", "write_file", `{"content":"line 1\nline 2\n","path":"a.txt"}`}},
		{"list", ListCall("c4", "."), ToolCall{"c4", "list_files", `{"path":"."}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.call != tt.want {
				t.Errorf("call = %+v, want %+v", tt.call, tt.want)
			}
			var args map[string]string
			if err := json.Unmarshal([]byte(tt.call.Arguments), &args); err != nil {
				t.Errorf("arguments %s are not a JSON object of strings: %v", tt.call.Arguments, err)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 4, nil},
		{"a", 4, []string{"a"}},
		{"{}", 3, []string{"{", "}"}},
		{"abcdefgh", 4, []string{"ab", "cd", "ef", "gh"}},
		{"héllo wörld", 3, []string{"hél", "lo w", "örld"}},
	}
	for _, tt := range tests {
		if got := split(tt.s, tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("split(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
