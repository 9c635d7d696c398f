package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// memMeter is the trivial in-memory Meter of the benchmark.
type memMeter struct {
	mu       sync.Mutex
	in, out  int64
	calls    int
	checkErr error
}

func (m *memMeter) Check(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkErr
}

func (m *memMeter) Record(_ context.Context, u Usage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.in += u.Input
	m.out += u.Output
	m.calls++
	return nil
}

// BenchmarkGatewayOverhead makes the same scripted completion (a tool call
// with usage) directly with the openai-go client and through
// Gateway.Complete, interleaved so both see the same machine state, and
// reports each one's time per call and their ratio.
func BenchmarkGatewayOverhead(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",` +
		`"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"command\":\"ls\"}"}}]}}],` +
		`"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()

	direct := openai.NewClient(
		option.WithBaseURL(srv.URL+"/v1"),
		option.WithAPIKey(testKey),
		option.WithHTTPClient(srv.Client()),
		option.WithMaxRetries(0),
	)
	g, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: testKey, Model: "m", HTTPClient: srv.Client()})
	if err != nil {
		b.Fatal(err)
	}
	m := &memMeter{}
	ctx := context.Background()

	gwReq := Request{
		Messages: []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "what is here?"}},
		Tools:    []Tool{shellTool},
	}
	directParams := openai.ChatCompletionNewParams{
		Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("be brief"),
			openai.UserMessage("what is here?"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        shellTool.Name,
			Description: openai.String(shellTool.Description),
			Parameters:  shellTool.Parameters,
		})},
	}

	var directTime, gatewayTime time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		cc, err := direct.Chat.Completions.New(ctx, directParams)
		t1 := time.Now()
		if err != nil || len(cc.Choices[0].Message.ToolCalls) != 1 {
			b.Fatalf("direct call: %v", err)
		}
		resp, err := g.Complete(ctx, gwReq, m)
		t2 := time.Now()
		if err != nil || len(resp.Message.ToolCalls) != 1 {
			b.Fatalf("gateway call: %v", err)
		}
		directTime += t1.Sub(t0)
		gatewayTime += t2.Sub(t1)
		n++
	}
	if m.calls != n || m.in != int64(40*n) {
		b.Fatalf("meter saw %d calls and %d input tokens, want %d and %d", m.calls, m.in, n, 40*n)
	}
	b.ReportMetric(float64(directTime.Nanoseconds())/float64(n), "direct-ns/call")
	b.ReportMetric(float64(gatewayTime.Nanoseconds())/float64(n), "gateway-ns/call")
	b.ReportMetric(float64(gatewayTime)/float64(directTime), "gateway/direct")
}
