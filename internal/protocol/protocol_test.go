package protocol

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"corral"
)

func TestParseInvalid(t *testing.T) {
	cases := []struct {
		name  string
		parse func([]byte) (Call, error)
		body  string
	}{
		{"chat not JSON", ParseChat, `{`},
		{"chat not an object", ParseChat, `[1]`},
		{"chat no messages", ParseChat, `{"model":"m","messages":[]}`},
		{"chat stream not a bool", ParseChat, `{"model":"m","messages":[{}],"stream":"yes"}`},
		{"responses not JSON", ParseResponses, `{"input":`},
		{"responses previous_response_id", ParseResponses, `{"model":"m","input":"hi","previous_response_id":"resp_1"}`},
		{"responses input a number", ParseResponses, `{"model":"m","input":3}`},
		{"responses unknown role", ParseResponses, `{"model":"m","input":[{"type":"message","role":"robot","content":"x"}]}`},
		{"responses no input", ParseResponses, `{"model":"m"}`},
		{"messages not JSON", ParseMessages, `nope`},
		{"messages no messages", ParseMessages, `{"model":"m","max_tokens":5,"messages":[]}`},
		{"messages unknown role", ParseMessages, `{"model":"m","messages":[{"role":"tool","content":"x"}]}`},
		{"messages tool_result from the assistant", ParseMessages, `{"model":"m","messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`},
		{"messages tool_use from the user", ParseMessages, `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}]}`},
		{"messages system a number", ParseMessages, `{"model":"m","system":5,"messages":[{"role":"user","content":"x"}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.parse([]byte(tc.body))
			if got := corral.ErrorCode(err); got != corral.EINVALID {
				t.Fatalf("parse(%s) error = %v (code %q), want %q", tc.body, err, got, corral.EINVALID)
			}
			if corral.ErrorMessage(err) == "internal error" {
				t.Errorf("the error says nothing to the client: %v", err)
			}
		})
	}
}

func TestParseChatUsage(t *testing.T) {
	cases := []struct {
		name, body  string
		wantOptions string // stream_options as sent upstream, "" for none
		asked       bool
	}{
		{"stream without options", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`, `{"include_usage":true}`, false},
		{"stream with usage off", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":false}}`, `{"include_usage":true}`, false},
		{"stream with usage asked", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true,"x":1}}`, `{"include_usage":true,"x":1}`, true},
		{"whole", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseChat([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				StreamOptions json.RawMessage `json:"stream_options"`
			}
			if err := json.Unmarshal(c.Chat, &got); err != nil {
				t.Fatal(err)
			}
			if string(got.StreamOptions) != tc.wantOptions {
				t.Errorf("stream_options = %s, want %s", got.StreamOptions, tc.wantOptions)
			}
			if c.usageAsked != tc.asked {
				t.Errorf("usageAsked = %v, want %v", c.usageAsked, tc.asked)
			}
			if c.Model != "m" {
				t.Errorf("Model = %q, want m", c.Model)
			}
		})
	}
}

func TestWriteError(t *testing.T) {
	cases := []struct {
		name       string
		p          Protocol
		status     int
		wantStatus int
		noRetry    bool
		wantBody   string
	}{
		{"chat bad token", Chat, 401, 401, true, `{"error":{"code":"invalid_api_key","message":"m","param":null,"type":"invalid_request_error"}}`},
		{"chat budget", Chat, 402, 402, true, `{"error":{"code":"insufficient_quota","message":"m","param":null,"type":"insufficient_quota"}}`},
		{"chat rate limit", Chat, 429, 429, false, `{"error":{"code":"rate_limit_exceeded","message":"m","param":null,"type":"rate_limit_error"}}`},
		{"chat unreachable", Chat, 502, 502, false, `{"error":{"code":"server_error","message":"m","param":null,"type":"server_error"}}`},
		{"responses budget is Codex's quota error", Responses, 402, 429, true, `{"error":{"code":"insufficient_quota","message":"m","param":null,"type":"insufficient_quota"}}`},
		{"responses model not allowed", Responses, 403, 403, true, `{"error":{"code":"forbidden","message":"m","param":null,"type":"permission_error"}}`},
		{"responses bad request", Responses, 400, 400, true, `{"error":{"code":null,"message":"m","param":null,"type":"invalid_request_error"}}`},
		{"messages bad token", Messages, 401, 401, true, `{"error":{"message":"m","type":"authentication_error"},"type":"error"}`},
		{"messages budget", Messages, 402, 402, true, `{"error":{"message":"m","type":"billing_error"},"type":"error"}`},
		{"messages not allowed", Messages, 403, 403, true, `{"error":{"message":"m","type":"permission_error"},"type":"error"}`},
		{"messages not found", Messages, 404, 404, true, `{"error":{"message":"m","type":"not_found_error"},"type":"error"}`},
		{"messages rate limit", Messages, 429, 429, false, `{"error":{"message":"m","type":"rate_limit_error"},"type":"error"}`},
		{"messages unreachable", Messages, 502, 502, false, `{"error":{"message":"m","type":"api_error"},"type":"error"}`},
		{"messages overloaded", Messages, 503, 503, false, `{"error":{"message":"m","type":"overloaded_error"},"type":"error"}`},
		{"messages internal", Messages, 500, 500, false, `{"error":{"message":"m","type":"api_error"},"type":"error"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			if tc.status == http.StatusPaymentRequired {
				WriteBudget(w, tc.p, "m")
			} else {
				WriteError(w, tc.p, tc.status, "m")
			}
			if w.Code != tc.wantStatus {
				t.Errorf("status = %d, want %d", w.Code, tc.wantStatus)
			}
			if got := w.Header().Get("X-Should-Retry") == "false"; got != tc.noRetry {
				t.Errorf("X-Should-Retry false = %v, want %v", got, tc.noRetry)
			}
			if got := w.Body.String(); got != tc.wantBody {
				t.Errorf("body = %s\nwant   %s", got, tc.wantBody)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}

// TestClientAbort: the client goes away mid-answer; Relay stops writing,
// reads the provider's stream to its end, and returns the provider's usage.
func TestClientAbort(t *testing.T) {
	first := `data: {"id":"c","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"}}]}` + "\n\n"
	rest := `data: {"id":"c","model":"gpt-4o","choices":[{"index":0,"delta":{"content":", world"}}]}` + "\n\n" +
		`data: {"id":"c","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":321,"completion_tokens":54,"total_tokens":375}}` + "\n\n" +
		"data: [DONE]\n\n"
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			call := clientCall(t, cl.fixture, cl.parse, true)
			pr, pw := io.Pipe()
			upstream := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr}
			results := make(chan Result, 1)
			gone := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				go func() { <-r.Context().Done(); close(gone) }()
				results <- Relay(r.Context(), w, upstream, call)
			}))
			defer srv.Close()
			go pw.Write([]byte(first))

			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			// Read up to the first text, then leave.
			rd := bufio.NewReader(resp.Body)
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					t.Fatalf("the stream ended before the first text: %v", err)
				}
				if strings.Contains(line, "Hello") {
					break
				}
			}
			resp.Body.Close()
			wait(t, gone, "the server to see the client go")

			// The provider goes on to its end, usage last.
			go func() {
				pw.Write([]byte(rest))
				pw.Close()
			}()
			var res Result
			select {
			case res = <-results:
			case <-time.After(10 * time.Second):
				t.Fatal("Relay did not return")
			}
			if !res.ClientGone {
				t.Error("ClientGone = false, want true")
			}
			if want := (Usage{Input: 321, Output: 54}); res.Usage != want {
				t.Errorf("Usage = %+v, want the provider's %+v", res.Usage, want)
			}
			if res.Err != nil {
				t.Errorf("Err = %v, want nil", res.Err)
			}
			if res.Model != "gpt-4o" {
				t.Errorf("Model = %q, want gpt-4o", res.Model)
			}
		})
	}
}

// TestDrainBounds: after the client left, a provider stream that does not
// end is cut off, by bytes or by time, and the call is still metered.
func TestDrainBounds(t *testing.T) {
	chunk := `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"la la la la la la la la"}}]}` + "\n\n"
	cases := []struct {
		name  string
		bytes int64
		time  time.Duration
		feed  bool // the provider keeps sending; else it stalls
		want  string
	}{
		{"too many bytes", 4 << 10, time.Hour, true, "past 4096 bytes"},
		{"too long", 16 << 20, 0, false, "past 0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func(b int64, d time.Duration) { drainBytes, drainTime = b, d }(drainBytes, drainTime)
			drainBytes, drainTime = tc.bytes, tc.time
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() {
				pw.Write([]byte(chunk))
				for tc.feed {
					if _, err := pw.Write([]byte(chunk)); err != nil {
						return
					}
				}
			}()
			call := clientCall(t, "responses.json", ParseResponses, true)
			w := &failingWriter{ResponseRecorder: httptest.NewRecorder()}
			upstream := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr}
			done := make(chan Result, 1)
			go func() { done <- Relay(t.Context(), w, upstream, call) }()
			var res Result
			select {
			case res = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Relay did not return")
			}
			if !res.ClientGone || res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Errorf("ClientGone = %v, Err = %v; want gone and an error %q", res.ClientGone, res.Err, tc.want)
			}
			if !res.Usage.Estimated || res.Usage.Input == 0 || res.Usage.Output == 0 {
				t.Errorf("Usage = %+v, want a non-zero estimate", res.Usage)
			}
		})
	}
}

// failingWriter is a client that went away: every write fails.
type failingWriter struct{ *httptest.ResponseRecorder }

func (f *failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10s for %s", what)
	}
}

func TestCountTokens(t *testing.T) {
	body := `{"model":"m","system":"be brief","messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}]}`
	b, err := CountTokens([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.InputTokens < 100 || got.InputTokens > 150 {
		t.Errorf("input_tokens = %d, want about 400/4 and a little", got.InputTokens)
	}
	if _, err := CountTokens([]byte(`{`)); corral.ErrorCode(err) != corral.EINVALID {
		t.Errorf("CountTokens({) error = %v, want invalid", err)
	}
}

func TestModels(t *testing.T) {
	cases := []struct {
		name string
		p    Protocol
		want string
	}{
		{"openai", Chat, `{"data":[{"created":0,"id":"a","object":"model","owned_by":"corral"},{"created":0,"id":"b","object":"model","owned_by":"corral"}],"object":"list"}`},
		{"openai for responses", Responses, `{"data":[{"created":0,"id":"a","object":"model","owned_by":"corral"},{"created":0,"id":"b","object":"model","owned_by":"corral"}],"object":"list"}`},
		{"anthropic", Messages, `{"data":[{"created_at":"1970-01-01T00:00:00Z","display_name":"a","id":"a","type":"model"},{"created_at":"1970-01-01T00:00:00Z","display_name":"b","id":"b","type":"model"}],"first_id":"a","has_more":false,"last_id":"b"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(Models(tc.p, []string{"a", "b"})); got != tc.want {
				t.Errorf("Models = %s\nwant     %s", got, tc.want)
			}
		})
	}
	if got := string(Models(Messages, nil)); got != `{"data":[],"first_id":null,"has_more":false,"last_id":null}` {
		t.Errorf("Models(Messages, nil) = %s", got)
	}
}

// TestToolCallDeltas: the ways providers split tool calls into deltas all
// come out as the same calls.
func TestToolCallDeltas(t *testing.T) {
	type call struct{ id, name, args string }
	cases := []struct {
		name   string
		deltas string // the tool_calls of successive chunks, one JSON list a line
		want   []call
	}{
		{"OpenAI: name first, arguments split",
			`[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]
			[{"index":0,"function":{"arguments":"{\"x\":"}}]
			[{"index":0,"function":{"arguments":"1}"}}]`,
			[]call{{"a", "f", `{"x":1}`}}},
		{"interleaved by index",
			`[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]
			[{"index":1,"id":"b","function":{"name":"g","arguments":"["}}]
			[{"index":0,"function":{"arguments":"}"}},{"index":1,"function":{"arguments":"]"}}]`,
			[]call{{"a", "f", "{}"}, {"b", "g", "[]"}}},
		{"every call whole at index 0",
			`[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]
			[{"index":0,"id":"b","function":{"name":"g","arguments":"{\"y\":2}"}}]`,
			[]call{{"a", "f", "{}"}, {"b", "g", `{"y":2}`}}},
		{"no index, split",
			`[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]
			[{"function":{"arguments":":1}"}}]
			[{"id":"b","function":{"name":"g","arguments":"{}"}}]`,
			[]call{{"a", "f", `{"x":1}`}, {"b", "g", "{}"}}},
		{"name repeated in every delta",
			`[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]
			[{"index":0,"function":{"name":"f","arguments":"}"}}]`,
			[]call{{"a", "f", "{}"}}},
		{"arguments before the name",
			`[{"index":0,"id":"a","function":{"arguments":"{\"x\":"}}]
			[{"index":0,"function":{"name":"f","arguments":"1}"}}]`,
			[]call{{"a", "f", `{"x":1}`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAnswer()
			rec := &recordingStreamer{}
			for _, line := range strings.Split(tc.deltas, "\n") {
				var ds []toolCallDelta
				if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &ds); err != nil {
					t.Fatalf("fixture %q: %v", line, err)
				}
				for _, d := range ds {
					a.addCall(d, rec)
				}
			}
			var got []call
			for _, c := range a.calls {
				got = append(got, call{c.id, c.name, c.args.String()})
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("calls = %v, want %v", got, tc.want)
			}
			// What was streamed adds up to the same arguments.
			for _, c := range a.calls {
				if rec.args[c] != c.args.String() {
					t.Errorf("streamed arguments of %s = %q, want %q", c.name, rec.args[c], c.args.String())
				}
			}
		})
	}
}

// recordingStreamer keeps what a streamer is handed.
type recordingStreamer struct{ args map[*toolCall]string }

func (r *recordingStreamer) start()              {}
func (r *recordingStreamer) text(string)         {}
func (r *recordingStreamer) end(*failure)        {}
func (r *recordingStreamer) callStart(*toolCall) {}
func (r *recordingStreamer) callArgs(c *toolCall, d string) {
	if r.args == nil {
		r.args = map[*toolCall]string{}
	}
	r.args[c] += d
}
