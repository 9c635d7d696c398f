package telemetry_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/otlptest"
	"corral/internal/poll"
	"corral/internal/telemetry"
)

func TestEndpointURL(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
		err            bool
	}{
		{name: "base", in: "http://127.0.0.1:4318", want: "http://127.0.0.1:4318/v1/traces"},
		{name: "base with slash", in: "https://otel.example.org/", want: "https://otel.example.org/v1/traces"},
		{name: "whole URL", in: "https://otel.example.org/ingest/traces", want: "https://otel.example.org/ingest/traces"},
		{name: "no scheme", in: "127.0.0.1:4318", err: true},
		{name: "grpc", in: "grpc://127.0.0.1:4317", err: true},
		{name: "no host", in: "http:///v1/traces", err: true},
		{name: "credentials", in: "https://user:secret@otel.example.org", err: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := telemetry.EndpointURL(tt.in)
			if tt.err {
				if err == nil || corral.ErrorCode(err) != corral.EINVALID {
					t.Fatalf("EndpointURL(%q) = %q, %v, want EINVALID", tt.in, got, err)
				}
				if strings.Contains(corral.ErrorMessage(err), "secret") {
					t.Errorf("EndpointURL(%q)'s error repeats the credentials: %v", tt.in, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("EndpointURL(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// sdkGoroutines counts the goroutines running the SDK's code (its batch
// span processor's).
func sdkGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "go.opentelemetry.io/otel/sdk/trace.")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestOffMakesNothing: without an endpoint (or without a Tracer at all),
// nothing is started, no span is made, and a run's context carries no
// trace context.
func TestOffMakesNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	off, err := telemetry.New(context.Background(), telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]*telemetry.Tracer{"no endpoint": off, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			if tr.On() {
				t.Fatal("On() = true without an endpoint")
			}
			ctx := context.Background()
			rctx, run := tr.StartRun(ctx, telemetry.RunStart{RunID: "run_1", AgentID: "agt_1", Tree: "run_1"})
			if run != nil || rctx != ctx {
				t.Errorf("StartRun = %v, %v: want the same context and no span", rctx, run)
			}
			chat := tr.StartChat(rctx, telemetry.ChatStart{Provider: telemetry.ProviderOpenAI, Model: "m"})
			tool := tr.StartTool(rctx, "shell", "call_1")
			if chat != nil || tool != nil {
				t.Errorf("StartChat, StartTool = %v, %v: want none", chat, tool)
			}
			// Ending what was never started does nothing.
			chat.End(telemetry.ChatEnd{})
			tool.End("")
			run.End(telemetry.RunEnd{})
			if env := telemetry.Env(rctx); env != nil {
				t.Errorf("Env = %q, want none", env)
			}
			if err := tr.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	if n := sdkGoroutines(); n != 0 || runtime.NumGoroutine() != before {
		t.Errorf("with tracing off, %d goroutines run the SDK's code, and %d goroutines run where %d did before", n, runtime.NumGoroutine(), before)
	}
	on, err := telemetry.New(context.Background(), telemetry.Config{Endpoint: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer on.Close(context.Background())
	// (A goroutine not scheduled yet does not show whose it is.)
	poll.Until(t, "a goroutine of the SDK with tracing on (else the count above proves nothing)", func() bool { return sdkGoroutines() > 0 })
}

// TestSpans makes a run with a model call and a tool call that delegates
// to a child run, exports them to a receiver on loopback, and checks the
// tree, the trace's id, the attributes and the run's usage.
func TestSpans(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	tr, err := telemetry.New(context.Background(), telemetry.Config{Endpoint: rcv.URL(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, run := tr.StartRun(context.Background(), telemetry.RunStart{RunID: "run_root", AgentID: "agt_1", Tree: "run_root"})
	chat := tr.StartChat(ctx, telemetry.ChatStart{Provider: telemetry.ProviderOpenAI, Model: "m-1", ServerAddress: "127.0.0.1", ServerPort: 8080})
	chat.Retry(2, 429)
	chat.End(telemetry.ChatEnd{ResponseModel: "m-1-2026", Usage: corral.Tokens{Input: 40, Output: 12}, Reported: true, FinishReasons: []string{"tool_calls"}})
	failed := tr.StartChat(ctx, telemetry.ChatStart{Provider: telemetry.ProviderOpenAI, Model: "m-1"})
	failed.End(telemetry.ChatEnd{ErrorType: "503"})
	tool := tr.StartTool(ctx, "delegate", "call_1")
	_, child := tr.StartRun(tool.Context(context.Background()), telemetry.RunStart{RunID: "run_child", AgentID: "agt_2", Tree: "run_root"})
	env := telemetry.Env(ctx)
	child.End(telemetry.RunEnd{AgentName: "helper", Status: corral.RunCompleted})
	tool.End("")
	run.End(telemetry.RunEnd{AgentName: "boss", Model: "m-1", Status: corral.RunErrored, ErrorType: "timeout"})
	closed, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Close(closed); err != nil {
		t.Fatalf("Close: %v", err)
	}

	spans := map[string]otlptest.Span{}
	for _, s := range rcv.Spans() {
		spans[s.Name] = s
	}
	if len(rcv.Spans()) != 5 {
		t.Fatalf("the receiver got %d spans, want 5: %+v", len(rcv.Spans()), rcv.Spans())
	}
	root, c, f, tl, ch := spans["invoke_agent boss"], spans["chat m-1"], otlptest.Span{}, spans["execute_tool delegate"], spans["invoke_agent helper"]
	for _, s := range rcv.Spans() {
		if s.Name == "chat m-1" && s.Error {
			f = s
		} else if s.Name == "chat m-1" {
			c = s
		}
	}
	if want := telemetry.TraceID("run_root"); root.TraceID != want {
		t.Errorf("the root run's trace = %s, want %s (derived from the tree's root)", root.TraceID, want)
	}
	for _, tt := range []struct {
		name   string
		s      otlptest.Span
		parent otlptest.Span
	}{{"chat", c, root}, {"failed chat", f, root}, {"tool", tl, root}, {"child run", ch, tl}} {
		if tt.s.TraceID != root.TraceID || tt.s.ParentSpanID != tt.parent.SpanID || tt.s.SpanID == "" {
			t.Errorf("%s: trace %s, parent %s; want trace %s, parent %s", tt.name, tt.s.TraceID, tt.s.ParentSpanID, root.TraceID, tt.parent.SpanID)
		}
	}
	if root.ParentSpanID != "" {
		t.Errorf("the root run's span has a parent: %s", root.ParentSpanID)
	}
	if want := "TRACEPARENT=00-" + root.TraceID + "-" + root.SpanID + "-01"; len(env) != 1 || env[0] != want {
		t.Errorf("Env = %q, want [%s]", env, want)
	}
	for _, tt := range []struct {
		name  string
		s     otlptest.Span
		attrs map[string]any
	}{
		{"root run", root, map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "agt_1", "gen_ai.agent.name": "boss",
			"gen_ai.request.model": "m-1", "gen_ai.provider.name": "openai", "corral.run.id": "run_root", "corral.run.status": "errored",
			"gen_ai.usage.input_tokens": int64(40), "gen_ai.usage.output_tokens": int64(12), "error.type": "timeout"}},
		{"chat", c, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m-1",
			"gen_ai.response.model": "m-1-2026", "gen_ai.usage.input_tokens": int64(40), "gen_ai.usage.output_tokens": int64(12),
			"gen_ai.response.finish_reasons": []any{"tool_calls"}, "server.address": "127.0.0.1", "server.port": int64(8080)}},
		{"failed chat", f, map[string]any{"gen_ai.operation.name": "chat", "error.type": "503"}},
		{"tool", tl, map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delegate", "gen_ai.tool.call.id": "call_1"}},
		{"child run", ch, map[string]any{"gen_ai.agent.id": "agt_2", "corral.run.id": "run_child", "corral.run.status": "completed"}},
	} {
		for k, want := range tt.attrs {
			if got := tt.s.Attrs[k]; !equal(got, want) {
				t.Errorf("%s: %s = %#v, want %#v", tt.name, k, got, want)
			}
		}
	}
	if !root.Error || c.Error || !f.Error || ch.Error {
		t.Errorf("error statuses: root %v, chat %v, failed chat %v, child %v; want true, false, true, false", root.Error, c.Error, f.Error, ch.Error)
	}
	if _, ok := f.Attrs["gen_ai.usage.input_tokens"]; ok {
		t.Errorf("a call without a usage report has a usage: %v", f.Attrs)
	}
	if len(c.Events) != 1 || c.Events[0].Name != "retry" || c.Events[0].Attrs["http.response.status_code"] != int64(429) {
		t.Errorf("chat events = %+v, want one retry after a 429", c.Events)
	}
	if root.Resource["service.name"] != "corral" || root.Resource["service.version"] != "test" {
		t.Errorf("resource = %v, want service corral, version test", root.Resource)
	}
}

func equal(a, b any) bool {
	as, ok1 := a.([]any)
	bs, ok2 := b.([]any)
	if ok1 && ok2 {
		if len(as) != len(bs) {
			return false
		}
		for i := range as {
			if as[i] != bs[i] {
				return false
			}
		}
		return true
	}
	return a == b
}

// TestToolNamesAreNotContent: a tool's name and call id come from a model,
// which may write a sentence there; such a name is recorded as _OTHER and
// such an id not at all.
func TestToolNamesAreNotContent(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	tr, err := telemetry.New(context.Background(), telemetry.Config{Endpoint: rcv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, id string }{
		{"shell", "call_1"},
		{"the deploy key is hunter2", "call 2 says hunter2"},
		{strings.Repeat("x", 65), strings.Repeat("y", 65)},
		{"mcp__corral__delegate", "toolu_01ABC-def.9:x/y"},
	} {
		tr.StartTool(context.Background(), tt.name, tt.id).End("")
	}
	if err := tr.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range rcv.Spans() {
		got = append(got, fmt.Sprintf("%s %v %v", s.Name, s.Attrs["gen_ai.tool.name"], s.Attrs["gen_ai.tool.call.id"]))
	}
	want := []string{
		"execute_tool shell shell call_1",
		"execute_tool _OTHER _OTHER <nil>",
		"execute_tool _OTHER _OTHER <nil>",
		"execute_tool mcp__corral__delegate mcp__corral__delegate toolu_01ABC-def.9:x/y",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tool spans:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkChatSpan is what tracing adds to one model call, alone: its
// chat span started and ended under a run's span, through the batch span
// processor, exported to a receiver on loopback (the export's cost shared
// out over the spans of each batch). Compare ns/op with the call itself
// (BenchmarkGatewayOverhead's gateway-ns/call).
func BenchmarkChatSpan(b *testing.B) {
	rcv := otlptest.New()
	defer rcv.Close()
	tr, err := telemetry.New(context.Background(), telemetry.Config{Endpoint: rcv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, run := tr.StartRun(context.Background(), telemetry.RunStart{RunID: "run_bench", AgentID: "agt_bench", Tree: "run_bench"})
	start := telemetry.ChatStart{Provider: telemetry.ProviderOpenAI, Model: "m", ServerAddress: "127.0.0.1", ServerPort: 8080}
	end := telemetry.ChatEnd{ResponseModel: "m", Usage: corral.Tokens{Input: 40, Output: 12}, Reported: true, FinishReasons: []string{"tool_calls"}}
	b.ReportAllocs()
	for b.Loop() {
		tr.StartChat(ctx, start).End(end)
	}
	b.StopTimer()
	run.End(telemetry.RunEnd{Status: corral.RunCompleted})
	if err := tr.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
}
