package modelapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/gateway"
	"corral/internal/runner"
)

// runs authorizes one token, as run_a's.
type runs struct{}

func (runs) Authorize(ctx context.Context, token string) (Grant, error) {
	if token == "crt_a" {
		return grant{}, nil
	}
	return nil, corral.Errorf(corral.EUNAUTH, "no")
}

// grant is run_a's: any call is within its budget.
type grant struct{}

func (grant) Run() string                                              { return "run_a" }
func (grant) Model() string                                            { return "test-model" }
func (grant) Check(context.Context) error                              { return nil }
func (grant) Record(context.Context, gateway.Usage, runner.Call) error { return nil }

type upstream struct{}

func (upstream) Forward(ctx context.Context, model string, body []byte) (*http.Response, error) {
	return nil, fmt.Errorf("not called in these tests")
}
func (upstream) ModelName(m string) string { return m }

// serve starts the gateway on a socket and returns a dial function that
// writes preamble first (as a supervisor does), unless it is "".
func serve(t *testing.T) func(preamble string) net.Conn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gw.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := Serve(ln, Handler(runs{}, upstream{}, slog.New(slog.DiscardHandler)))
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
	req, _ := http.NewRequest(method, "http://gateway"+path, strings.NewReader(`{"model":"m","messages":[]}`))
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
