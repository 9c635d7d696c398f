package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"corral"
	"corral/internal/otlptest"
	"corral/internal/telemetry"
)

// memMeter is the trivial in-memory corral.Meter of the benchmark.
type memMeter struct {
	mu       sync.Mutex
	in, out  int64
	calls    int
	checkErr error
}

func (m *memMeter) Reserve(context.Context, string, int64) (corral.Settle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.checkErr != nil {
		return nil, m.checkErr
	}
	return func(_ context.Context, u corral.Tokens, _ bool) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.in += u.Input
		m.out += u.Output
		m.calls++
		return nil
	}, nil
}

// The benchmark's provider answers fixed bytes, so that the provider's own
// cost, shared by both sides, stays small next to the client's.
var (
	benchCompletion = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",` +
		`"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Let me look.",` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"command\":\"ls\"}"}}]}}],` +
		`"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}}`)
	benchStream = sseBody(
		`{"role":"assistant","content":""}`,
		`{"content":"Let "}`,
		`{"content":"me "}`,
		`{"content":"look."}`,
		`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"comm"}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"ls\"}"}}]}`,
	)
)

// sseBody is a streamed completion: one chunk per delta, a finish chunk, a
// usage chunk and [DONE].
func sseBody(deltas ...string) []byte {
	var b strings.Builder
	head := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",`
	for _, d := range deltas {
		b.WriteString(head + `"choices":[{"index":0,"delta":` + d + `,"finish_reason":null}],"usage":null}` + "\n\n")
	}
	b.WriteString(head + `"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}` + "\n\n")
	b.WriteString(head + `"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// BenchmarkGatewayOverhead makes the same scripted completion (text and a
// tool call, with usage) directly with the openai-go client and through
// Gateway.Complete, interleaved so both see the same machine state, and
// reports each one's time per call and their ratio. The streamed case reads
// the same reply as Server-Sent Events, through the accumulator on both
// sides.
func BenchmarkGatewayOverhead(b *testing.B) {
	b.Run("whole", func(b *testing.B) { benchOverhead(b, false) })
	b.Run("streamed", func(b *testing.B) { benchOverhead(b, true) })
}

// benchProvider answers every call with the benchmark's completion,
// streamed or whole, to the test key only.
func benchProvider(b *testing.B, stream bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(benchStream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(benchCompletion)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchOverhead(b *testing.B, stream bool) {
	srv := benchProvider(b, stream)

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

	gwReq := corral.ModelRequest{
		Messages: []corral.ModelMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "what is here?"}},
		Tools:    []corral.ModelTool{shellTool},
	}
	var text strings.Builder
	if stream {
		gwReq.OnDelta = func(d corral.ModelDelta) { text.WriteString(d.Content) }
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
	if stream {
		directParams.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	directCall := func() (openai.ChatCompletionMessage, error) {
		if !stream {
			cc, err := direct.Chat.Completions.New(ctx, directParams)
			if err != nil || len(cc.Choices) == 0 {
				return openai.ChatCompletionMessage{}, err
			}
			return cc.Choices[0].Message, nil
		}
		s := direct.Chat.Completions.NewStreaming(ctx, directParams)
		defer s.Close()
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if s.Err() != nil || len(acc.Choices) == 0 {
			return openai.ChatCompletionMessage{}, s.Err()
		}
		return acc.Choices[0].Message, nil
	}

	var directTime, gatewayTime time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		msg, err := directCall()
		t1 := time.Now()
		if err != nil || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Arguments != `{"command":"ls"}` {
			b.Fatalf("direct call: %+v, %v", msg, err)
		}
		text.Reset()
		resp, err := g.Complete(ctx, gwReq, m)
		t2 := time.Now()
		if err != nil || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Arguments != `{"command":"ls"}` {
			b.Fatalf("gateway call: %+v, %v", resp, err)
		}
		if stream && text.String() != "Let me look." {
			b.Fatalf("gateway deltas = %q, want %q", text.String(), "Let me look.")
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

// BenchmarkGatewayTracing makes the same scripted completion as
// BenchmarkGatewayOverhead through two gateways, one without a tracer and
// one whose calls are chat spans under a run's span, exported through the
// batch span processor to an OTLP/HTTP receiver on loopback (which decodes
// every export, on the same machine), interleaved so both see the same
// machine state. Read on/off: the cost of tracing a call. Whole and
// streamed.
func BenchmarkGatewayTracing(b *testing.B) {
	b.Run("whole", func(b *testing.B) { benchTracing(b, false) })
	b.Run("streamed", func(b *testing.B) { benchTracing(b, true) })
}

func benchTracing(b *testing.B, stream bool) {
	srv := benchProvider(b, stream)
	rcv := otlptest.New()
	defer rcv.Close()
	tracer, err := telemetry.New(context.Background(), telemetry.Config{Endpoint: rcv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{BaseURL: srv.URL + "/v1", APIKey: testKey, Model: "m", HTTPClient: srv.Client()}
	off, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Tracer = tracer
	on, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	req := corral.ModelRequest{
		Messages: []corral.ModelMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "what is here?"}},
		Tools:    []corral.ModelTool{shellTool},
	}
	if stream {
		req.OnDelta = func(corral.ModelDelta) {}
	}
	m := &memMeter{}
	plain := context.Background()
	traced, run := tracer.StartRun(plain, telemetry.RunStart{RunID: "run_bench", AgentID: "agt_bench", Tree: "run_bench"})
	call := func(g *Gateway, ctx context.Context) time.Duration {
		t0 := time.Now()
		resp, err := g.Complete(ctx, req, m)
		d := time.Since(t0)
		if err != nil || len(resp.Message.ToolCalls) != 1 {
			b.Fatalf("call: %+v, %v", resp, err)
		}
		return d
	}
	var offTimes, onTimes []time.Duration
	n := 0
	for b.Loop() {
		// Which goes first alternates: neither always finds the
		// connection or the caches warm.
		if n%2 == 0 {
			offTimes = append(offTimes, call(off, plain))
			onTimes = append(onTimes, call(on, traced))
		} else {
			onTimes = append(onTimes, call(on, traced))
			offTimes = append(offTimes, call(off, plain))
		}
		n++
	}
	b.StopTimer()
	run.End(telemetry.RunEnd{AgentName: "bench", Status: corral.RunCompleted})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tracer.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if got := len(rcv.Spans()); got != n+1 {
		b.Fatalf("the receiver got %d spans, want %d: the traced calls were not all exported", got, n+1)
	}
	offTime, onTime := sum(offTimes), sum(onTimes)
	b.ReportMetric(float64(offTime.Nanoseconds())/float64(n), "off-ns/call")
	b.ReportMetric(float64(onTime.Nanoseconds())/float64(n), "on-ns/call")
	b.ReportMetric(float64(onTime)/float64(offTime), "on/off")
	// The medians' ratio as well: on a shared machine a few calls that
	// another process delayed move the sums, not the medians.
	b.ReportMetric(float64(median(onTimes))/float64(median(offTimes)), "median-on/off")
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
