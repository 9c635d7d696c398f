package modelapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"corral"
	"corral/internal/runner"
)

// toolGrant is run_a's grant with the delegation tools: it keeps every
// tool call it is given and answers it with answer.
type toolGrant struct {
	grant
	answer func(ctx context.Context, name, args string) (string, bool)
	mu     sync.Mutex
	calls  []toolCall
}

type toolCall struct{ name, args string }

func (g *toolGrant) Tools() []corral.ModelTool { return runner.DelegationTools }

func (g *toolGrant) CallTool(ctx context.Context, name, args string) (string, bool) {
	g.mu.Lock()
	g.calls = append(g.calls, toolCall{name, args})
	g.mu.Unlock()
	return g.answer(ctx, name, args)
}

func (g *toolGrant) called() []toolCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]toolCall(nil), g.calls...)
}

type toolRuns struct{ g *toolGrant }

func (r toolRuns) Authorize(ctx context.Context, token string) (corral.CLIGrant, error) {
	if token == "crt_a" {
		return r.g, nil
	}
	return nil, corral.Errorf(corral.EUNAUTH, "no")
}

// mcpServe starts the gateway with g's tools and returns an HTTP client
// whose connections come from session, carrying token.
func mcpServe(t *testing.T, g *toolGrant) func(session, token string) *http.Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gw.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := Serve(ln, Handler(toolRuns{g}, upstream{}, nil, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { srv.Close() })
	return func(session, token string) *http.Client {
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
			if err == nil {
				_, err = io.WriteString(c, corral.GatewayPreamble(session))
			}
			return c, err
		}}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: bearer{token, tr}}
	}
}

// bearer adds the run's token to every request, as the CLIs are
// configured to.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

const mcpURL = "http://" + corral.GatewayAddr + "/mcp"

// mcpConnect connects an MCP client (the SDK's, speaking its latest
// protocol) through hc.
func mcpConnect(ctx context.Context, hc *http.Client) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL, HTTPClient: hc, MaxRetries: -1}, nil)
}

// mcpPost posts one JSON-RPC message through hc, as a client of the
// 2025-03-26 protocol does, without a session.
func mcpPost(ctx context.Context, hc *http.Client, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", mcpURL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return hc.Do(req)
}

// TestMCPRefused: /mcp answers only a running run's token on its own
// session's connection; anything else is a 401 before any tool is listed
// or called.
func TestMCPRefused(t *testing.T) {
	g := &toolGrant{answer: func(context.Context, string, string) (string, bool) { return "called", false }}
	client := mcpServe(t, g)
	tests := []struct{ name, session, token string }{
		{"no token", "run_a", ""},
		{"a token of no run", "run_a", "crt_nope"},
		{"another session's token", "run_b", "crt_a"},
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents","arguments":{}}}`
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			hc := client(tt.session, tt.token)
			for _, body := range []string{list, call} {
				resp, err := mcpPost(ctx, hc, body)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(b), "list_agents") {
					t.Errorf("%s: %d %s, want 401 and no tool", body, resp.StatusCode, b)
				}
			}
			if cs, err := mcpConnect(ctx, hc); err == nil {
				cs.Close()
				t.Errorf("an MCP client connected with %s", tt.name)
			}
		})
	}
	if calls := g.called(); len(calls) != 0 {
		t.Errorf("tools called through refused requests: %v", calls)
	}
}

// TestMCPTools: tools/list answers the grant's tools as they are given,
// and tools/call reaches the grant with the call's arguments and answers
// its result as text, an error with isError.
func TestMCPTools(t *testing.T) {
	g := &toolGrant{answer: func(_ context.Context, name, args string) (string, bool) {
		if name == "create_agent" {
			return "error: the agents cap is reached", true
		}
		return "the answer to " + name, false
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcpConnect(ctx, mcpServe(t, g)("run_a", "crt_a"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.Tools) != len(runner.DelegationTools) {
		t.Fatalf("tools/list: %d tools, want %d", len(listed.Tools), len(runner.DelegationTools))
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range listed.Tools {
		byName[tool.Name] = tool
	}
	for _, want := range runner.DelegationTools {
		got, ok := byName[want.Name]
		if !ok {
			t.Errorf("tools/list lacks %s", want.Name)
			continue
		}
		if got.Description != want.Description || jsonOf(t, got.InputSchema) != jsonOf(t, want.Parameters) {
			t.Errorf("tool %s = %q %s, want %q %s", want.Name, got.Description, jsonOf(t, got.InputSchema),
				want.Description, jsonOf(t, want.Parameters))
		}
	}

	tests := []struct {
		name    string
		args    map[string]any
		want    string
		isError bool
	}{
		{"delegate", map[string]any{"agent_id": "agt_helper", "task": "count the files"}, "the answer to delegate", false},
		{"list_agents", map[string]any{}, "the answer to list_agents", false},
		{"create_agent", map[string]any{"name": "n", "instructions": "i"}, "error: the agents cap is reached", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.name, Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			calls := g.called()
			if len(calls) != i+1 || calls[i].name != tt.name || calls[i].args != jsonOf(t, tt.args) {
				t.Fatalf("CallTool got %+v, want %s %s", calls, tt.name, jsonOf(t, tt.args))
			}
			if len(res.Content) != 1 {
				t.Fatalf("result content = %+v, want one text", res.Content)
			}
			text, ok := res.Content[0].(*mcp.TextContent)
			if !ok || text.Text != tt.want || res.IsError != tt.isError {
				t.Errorf("result = %+v (isError %v), want %q (isError %v)", res.Content[0], res.IsError, tt.want, tt.isError)
			}
		})
	}
}

// TestMCPLongCall: a call in progress has its answer's headers and a
// keep-alive sent at once (a client waiting for its first byte does not
// give up on a long delegation), and a client that goes away cancels it.
func TestMCPLongCall(t *testing.T) {
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	g := &toolGrant{answer: func(ctx context.Context, name, args string) (string, bool) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return "stopped", true
	}}
	client := mcpServe(t, g)
	tests := []struct {
		name string
		call func(ctx context.Context, hc *http.Client) error
	}{
		{"2025-03-26, the connection closed", func(ctx context.Context, hc *http.Client) error {
			resp, err := mcpPost(ctx, hc, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delegate","arguments":{"agent_id":"a","task":"t"}}}`)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(line, ":") {
				t.Errorf("while the call runs: %d %s, first line %q (%v); want 200, an event stream, a comment",
					resp.StatusCode, resp.Header.Get("Content-Type"), line, err)
			}
			return nil // the body closed: the connection goes
		}},
		{"latest protocol, the call cancelled", func(ctx context.Context, hc *http.Client) error {
			cs, err := mcpConnect(ctx, hc)
			if err != nil {
				return err
			}
			defer cs.Close()
			callCtx, cancel := context.WithCancel(ctx)
			go func() {
				<-started
				started <- struct{}{} // for the wait below
				cancel()
			}()
			cs.CallTool(callCtx, &mcp.CallToolParams{Name: "delegate", Arguments: map[string]any{"agent_id": "a", "task": "t"}})
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			hc := client("run_a", "crt_a")
			if err := tt.call(ctx, hc); err != nil {
				t.Fatal(err)
			}
			hc.Transport.(bearer).next.(*http.Transport).CloseIdleConnections()
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("the call never reached the grant")
			}
			select {
			case err := <-ended:
				if err == nil {
					t.Error("the call ended without its context ending")
				}
			case <-ctx.Done():
				t.Fatal("the call went on after its client went away")
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
