package modelapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/gateway"
)

// runs authorizes one token, as run_a's.
type runs struct{}

func (runs) Authorize(ctx context.Context, token string) (corral.CLIGrant, error) {
	if token == "crt_a" {
		return grant{}, nil
	}
	return nil, corral.Errorf(corral.EUNAUTH, "no")
}

// grant is run_a's: any call is within its budget.
type grant struct{}

func (grant) Run() string                                                       { return "run_a" }
func (grant) Model() string                                                     { return "test-model" }
func (grant) Reserve(context.Context, int64) error                              { return nil }
func (grant) Record(context.Context, corral.Tokens, bool, corral.CLICall) error { return nil }
func (grant) Tools() []corral.ModelTool                                         { return nil }
func (grant) CallTool(context.Context, string, string) (string, bool) {
	return "error: no tools", true
}

type upstream struct{}

func (upstream) Forward(ctx context.Context, model string, body []byte) (*http.Response, error) {
	return nil, fmt.Errorf("not called in these tests")
}
func (upstream) ModelName(m string) string  { return m }
func (upstream) MaxOutput() (string, int64) { return "max_tokens", gateway.DefaultMaxOutput }
func (upstream) Native(string) bool         { return false }
func (upstream) ForwardNative(context.Context, string, string, http.Header, []byte) (*http.Response, error) {
	return nil, fmt.Errorf("not called in these tests")
}

// serve starts the gateway on a socket and returns a dial function that
// writes preamble first (as a supervisor does), unless it is "".
func serve(t *testing.T) func(preamble string) net.Conn {
	t.Helper()
	return serveHandler(t, Handler(runs{}, upstream{}, nil, slog.New(slog.DiscardHandler)))
}

// serveHandler is serve with the handler h.
func serveHandler(t *testing.T, h http.Handler) func(preamble string) net.Conn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gw.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := Serve(ln, h)
	t.Cleanup(func() { srv.Close() })
	return func(preamble string) net.Conn {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, preamble)
		return c
	}
}

// do sends one request on c and returns the status and body.
func do(t *testing.T, c net.Conn, method, path string, header map[string]string) (int, string) {
	t.Helper()
	return doBody(t, c, method, path, `{"model":"m","messages":[]}`, header)
}

// doBody is do with the request's body.
func doBody(t *testing.T, c net.Conn, method, path, body string, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://gateway"+path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := req.Write(c); err != nil {
		return 0, err.Error() // closed by the gateway
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTokens: the gateway answers only a running run's token, and only on
// a connection from that run's own session; every refusal is the same 401
// in the protocol's own shape.
func TestTokens(t *testing.T) {
	dial := serve(t)
	tests := []struct {
		name     string
		session  string
		path     string
		header   map[string]string
		wantBody string // a part of the answer's body
	}{
		{"no token, OpenAI", "run_a", "/v1/responses", nil, `"error":{`},
		{"a wrong token, Anthropic", "run_a", "/v1/messages", map[string]string{"x-api-key": "crt_x"}, `"type":"authentication_error"`},
		{"another run's token", "run_b", "/v1/chat/completions", map[string]string{"Authorization": "Bearer crt_a"}, `not a running run's token`},
		{"another run's token, models", "run_b", "/v1/models", map[string]string{"Authorization": "Bearer crt_a"}, `not a running run's token`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := http.MethodPost
			if tt.path == "/v1/models" {
				method = http.MethodGet
			}
			status, body := do(t, dial(corral.GatewayPreamble(tt.session)), method, tt.path, tt.header)
			if status != http.StatusUnauthorized || !strings.Contains(body, tt.wantBody) {
				t.Fatalf("answer = %d %s, want 401 with %s", status, body, tt.wantBody)
			}
		})
	}
	// The same token on its own session's connection is let through.
	status, body := do(t, dial(corral.GatewayPreamble("run_a")), http.MethodGet, "/v1/models", map[string]string{"Authorization": "Bearer crt_a"})
	if status != http.StatusOK {
		t.Fatalf("models on run_a's own session = %d %s", status, body)
	}
}

// TestNoPreamble: a connection that does not start with a session's
// preamble is closed before any request is read.
func TestNoPreamble(t *testing.T) {
	dial := serve(t)
	for _, preamble := range []string{"", "GET / HTTP/1.1\r\n", "corral-session \n"} {
		c := dial(preamble)
		status, body := do(t, c, http.MethodGet, "/v1/models", map[string]string{"Authorization": "Bearer crt_a"})
		if status != 0 {
			t.Errorf("preamble %q: answered %d %s, want the connection closed", preamble, status, body)
		}
	}
}

// recorded is a grant that keeps what Record was given.
type recorded struct {
	grant
	mu    sync.Mutex
	usage []corral.Tokens
	calls []corral.CLICall
}

func (g *recorded) Record(_ context.Context, u corral.Tokens, _ bool, c corral.CLICall) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.usage, g.calls = append(g.usage, u), append(g.calls, c)
	return nil
}

type recordedRuns struct{ g *recorded }

func (r recordedRuns) Authorize(ctx context.Context, token string) (corral.CLIGrant, error) {
	if token == "crt_a" {
		return r.g, nil
	}
	return nil, corral.Errorf(corral.EUNAUTH, "no")
}

// TestNative: with a provider that speaks the CLI's protocol itself, the
// call goes through as it is (the agent's model, Corral's key in the
// provider's own header), the answer comes back byte for byte, and the
// call is metered from the provider's own usage events.
func TestNative(t *testing.T) {
	tests := []struct {
		name, path, body, stream, authHeader string
		want                                 corral.Tokens
	}{
		{"responses", "/v1/responses", `{"model":"gpt-5-codex","stream":true,"input":"hi"}`,
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"m\",\"usage\":{\"input_tokens\":12,\"output_tokens\":7}}}\n\n",
			"Authorization", corral.Tokens{Input: 12, Output: 7}},
		{"messages", "/v1/messages", `{"model":"claude-sonnet","stream":true,"max_tokens":10,"messages":[]}`,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":20}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n",
			"x-api-key", corral.Tokens{Input: 20, Output: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got struct {
				path, auth, version, model string
			}
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body struct{ Model string }
				json.NewDecoder(r.Body).Decode(&body)
				got.path, got.auth, got.version, got.model = r.URL.Path, r.Header.Get(tt.authHeader), r.Header.Get("anthropic-version"), body.Model
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tt.stream)
			}))
			defer provider.Close()
			gw, err := gateway.New(gateway.Config{BaseURL: provider.URL + "/v1", APIKey: "sk-native", Model: "m",
				Native: []string{gateway.NativeResponses, gateway.NativeMessages}})
			if err != nil {
				t.Fatal(err)
			}
			g := &recorded{}
			path := filepath.Join(t.TempDir(), "gw.sock")
			ln, err := Listen(path)
			if err != nil {
				t.Fatal(err)
			}
			srv := Serve(ln, Handler(recordedRuns{g}, gw, nil, slog.New(slog.DiscardHandler)))
			defer srv.Close()
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, corral.GatewayPreamble("run_a"))
			req, _ := http.NewRequest("POST", "http://gateway"+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer crt_a")
			req.Header.Set("x-api-key", "crt_a")
			req.Write(c)
			resp, err := http.ReadResponse(bufio.NewReader(c), req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(b) != tt.stream {
				t.Errorf("client got %d %q, want the provider's stream as it was", resp.StatusCode, b)
			}
			wantAuth := "Bearer sk-native"
			if tt.authHeader == "x-api-key" {
				wantAuth = "sk-native"
			}
			if got.path != "/v1"+strings.TrimPrefix(tt.path, "/v1") || got.auth != wantAuth || got.model != "test-model" {
				t.Errorf("provider saw %+v", got)
			}
			if tt.name == "messages" && got.version == "" {
				t.Error("no anthropic-version sent to a Messages provider")
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.usage) != 1 || g.usage[0] != tt.want || g.calls[0].Estimated {
				t.Errorf("metered %+v %+v, want %+v from the provider's events", g.usage, g.calls, tt.want)
			}
		})
	}
}
