package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"

	"corral"
	"corral/internal/modeltest"
	"corral/internal/otlptest"
	"corral/internal/telemetry"
)

// What the tracing tests' runs are told and answer: none of it may reach a
// span.
const (
	tracedPrompt = "PROMPT-canary-4b1d: show me the trace context"
	tracedAnswer = "ANSWER-canary-77c2: the trace context is there"
	// tracedCommand prints the session's trace context, as a CLI reads it.
	tracedCommand = `echo "tp=[$TRACEPARENT] ts=[$TRACESTATE]"`
)

// usage makes a reply report these tokens.
func usage(r modeltest.Reply, in, out int64) modeltest.Reply {
	r.Usage = &modeltest.Usage{Input: in, Output: out}
	return r
}

// traced is the spans a receiver got, by what they are.
type traced struct {
	all   []otlptest.Span
	runs  []otlptest.Span // invoke_agent
	chats []otlptest.Span
	tools []otlptest.Span
}

func sortSpans(spans []otlptest.Span) traced {
	t := traced{all: spans}
	for _, s := range spans {
		switch s.Attrs["gen_ai.operation.name"] {
		case "invoke_agent":
			t.runs = append(t.runs, s)
		case "chat":
			t.chats = append(t.chats, s)
		case "execute_tool":
			t.tools = append(t.tools, s)
		}
	}
	return t
}

// noContent fails t when any span's name, attribute, event or resource
// holds one of the secrets.
func noContent(t *testing.T, spans []otlptest.Span, secrets ...string) {
	t.Helper()
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(where+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", where, i), e)
			}
		default:
			s := fmt.Sprint(x)
			for _, secret := range secrets {
				if secret != "" && strings.Contains(s, secret) {
					t.Errorf("%s holds %q: %q", where, secret, s)
				}
			}
		}
	}
	for _, s := range spans {
		walk(s.Name+": name", s.Name)
		walk(s.Name+": status", s.StatusMessage)
		walk(s.Name+": attributes", s.Attrs)
		walk(s.Name+": resource", s.Resource)
		for _, e := range s.Events {
			walk(s.Name+": event "+e.Name, e.Attrs)
		}
	}
}

// wantAttrs fails t when span lacks one of attrs.
func wantAttrs(t *testing.T, what string, span otlptest.Span, attrs map[string]any) {
	t.Helper()
	for k, want := range attrs {
		got := span.Attrs[k]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %s = %#v, want %#v", what, k, got, want)
		}
	}
}

// traceParent is what the command printed of TRACEPARENT.
func traceParent(t *testing.T, output string) string {
	t.Helper()
	_, tp, ok := strings.Cut(output, "tp=[")
	if !ok {
		t.Fatalf("the command's output %q does not hold its TRACEPARENT", output)
	}
	tp, _, _ = strings.Cut(tp, "]")
	return tp
}

// TestTracing: a server pointed at a collector (a real OTLP/HTTP receiver
// on loopback) runs an agent whose model makes two calls and one tool
// call. The collector gets one invoke_agent span with the run's id and,
// under it, two chat spans and one execute_tool span, in the GenAI
// conventions' names, with the provider's usage; the tool's command found
// the run's span as its TRACEPARENT; no attribute holds the prompt, the
// answer, the tool's command or the provider's key. The spans arrive
// because closing the server flushes them.
func TestTracing(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	e := newEnv(t, envOptions{otlp: rcv.URL()})
	if !e.app.Tracer.On() {
		t.Fatal("the server does not trace with --otlp-endpoint")
	}
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("tracer")
	e.answer(modeltest.Sequence(
		usage(modeltest.Calls(modeltest.ShellCall("call_env", tracedCommand)), 31, 7),
		usage(modeltest.Text(tracedAnswer), 43, 11),
	))
	run, results := owner.runTools(id, tracedPrompt)
	e.app.Close() // the runs' loops end, then the tracer flushes

	got := sortSpans(rcv.Spans())
	if len(got.runs) != 1 || len(got.chats) != 2 || len(got.tools) != 1 || len(got.all) != 4 {
		t.Fatalf("the collector got %d spans: %d invoke_agent, %d chat, %d execute_tool; want 1, 2, 1: %+v",
			len(got.all), len(got.runs), len(got.chats), len(got.tools), got.all)
	}
	root := got.runs[0]
	wantAttrs(t, "invoke_agent", root, map[string]any{
		"gen_ai.operation.name": "invoke_agent", "corral.run.id": run.ID, "gen_ai.agent.id": id, "gen_ai.agent.name": "tracer",
		"gen_ai.provider.name": "openai", "gen_ai.request.model": "test-model", "corral.run.status": "completed",
		"gen_ai.usage.input_tokens": 31 + 43, "gen_ai.usage.output_tokens": 7 + 11,
	})
	if root.Name != "invoke_agent tracer" || root.ParentSpanID != "" || root.Error {
		t.Errorf("the run's span is %q, parent %q, error %v; want invoke_agent tracer, a root, no error", root.Name, root.ParentSpanID, root.Error)
	}
	if want := telemetry.TraceID(run.ID); root.TraceID != want {
		t.Errorf("the run's trace is %s, want %s (its own id's)", root.TraceID, want)
	}
	if run.Tokens.Input != 31+43 || run.Tokens.Output != 7+11 {
		t.Errorf("the run's tokens are %+v, want the provider's 74 and 18", run.Tokens)
	}
	for i, want := range []struct {
		in, out int
		finish  string
	}{{31, 7, "tool_calls"}, {43, 11, "stop"}} {
		c := got.chats[i]
		what := fmt.Sprintf("chat %d", i+1)
		wantAttrs(t, what, c, map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "test-model",
			"gen_ai.response.model": "test-model", "gen_ai.usage.input_tokens": want.in, "gen_ai.usage.output_tokens": want.out,
			"gen_ai.response.finish_reasons": []any{want.finish}, "server.address": "127.0.0.1",
		})
		if c.Name != "chat test-model" || c.Kind.String() != "SPAN_KIND_CLIENT" {
			t.Errorf("%s is %q (%s), want chat test-model, a client span", what, c.Name, c.Kind)
		}
	}
	tool := got.tools[0]
	wantAttrs(t, "execute_tool", tool, map[string]any{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "shell", "gen_ai.tool.call.id": "call_env",
	})
	if tool.Name != "execute_tool shell" {
		t.Errorf("the tool's span is %q, want execute_tool shell", tool.Name)
	}
	for _, s := range append(got.chats, tool) {
		if s.TraceID != root.TraceID || s.ParentSpanID != root.SpanID {
			t.Errorf("%s: trace %s, parent %s; want the run's (%s, %s)", s.Name, s.TraceID, s.ParentSpanID, root.TraceID, root.SpanID)
		}
	}

	// The session's environment held the run's span as TRACEPARENT.
	var out struct{ Output string }
	if err := json.Unmarshal([]byte(results["call_env"]), &out); err != nil {
		t.Fatalf("the shell's result %q: %v", results["call_env"], err)
	}
	if tp, want := traceParent(t, out.Output), "00-"+root.TraceID+"-"+root.SpanID+"-01"; tp != want {
		t.Errorf("TRACEPARENT in the sandbox = %q, want the run span's %q", tp, want)
	}
	noContent(t, got.all, tracedPrompt, tracedAnswer, tracedCommand, "TRACEPARENT", testModelKey)
}

// TestTracingOff: without --otlp-endpoint nothing is traced, even with
// the SDK's own OTEL_EXPORTER_OTLP_ENDPOINT set: the tracer is the no-op
// one, no goroutine runs the SDK, the collector hears nothing, and a run's
// session has no TRACEPARENT.
func TestTracingOff(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL())
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	e := newEnv(t, envOptions{})
	if e.app.Tracer.On() {
		t.Fatal("the server traces without --otlp-endpoint")
	}
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("untraced")
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.ShellCall("call_env", tracedCommand)), modeltest.Text(tracedAnswer)))
	_, results := owner.runTools(id, tracedPrompt)
	if !strings.Contains(results["call_env"], `tp=[] ts=[]`) {
		t.Errorf("the session's environment had a trace context with tracing off: %q", results["call_env"])
	}
	buf := make([]byte, 8<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "go.opentelemetry.io/otel/sdk/trace.") {
		t.Error("a goroutine runs the OpenTelemetry SDK with tracing off")
	}
	e.app.Close()
	if n := rcv.Requests(); n != 0 {
		t.Errorf("the collector got %d exports with tracing off", n)
	}
}

// TestTracingCLI: a run of Codex, traced. Its model calls come back
// through the gateway's pass-through (the run's grant makes their chat
// spans) and its own tool calls come from its transcript; the command it
// runs finds the run's span as TRACEPARENT (Codex reads it as its parent,
// and exports nothing of its own); no span holds the prompt, the answer,
// the run's token or the provider's key.
func TestTracingCLI(t *testing.T) {
	needTools(t, corral.DriverCodex)
	rcv := otlptest.New()
	defer rcv.Close()
	e := newEnv(t, envOptions{otlp: rcv.URL()})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("traced-codex")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": corral.DriverCodex}).want(http.StatusOK)
	var mu sync.Mutex
	var toolOutput string
	e.answer(func(r modeltest.Request) modeltest.Reply {
		if res := r.LastToolResults(); len(res) > 0 {
			mu.Lock()
			toolOutput = res[len(res)-1].Content
			mu.Unlock()
			return modeltest.Text(tracedAnswer)
		}
		if !contains(r.Tools, "exec_command") {
			return modeltest.Text("Title") // a side request of the CLI's
		}
		args, _ := json.Marshal(map[string]string{"cmd": tracedCommand + `; echo "token=$OPENAI_API_KEY"`})
		return modeltest.Calls(modeltest.ToolCall{ID: "call_env", Name: "exec_command", Arguments: string(args)})
	})
	run := owner.send(id, tracedPrompt)
	done := owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
	if done.Status != "completed" {
		t.Fatalf("run %s: %s (%s)\ntrace: %s", run.ID, done.Status, done.Reason, brief(owner.trace(run.ID)))
	}
	calls := len(e.model.Requests())
	e.app.Close()

	mu.Lock()
	out := toolOutput
	mu.Unlock()
	_, tok, _ := strings.Cut(out, "token=")
	tok, _, _ = strings.Cut(tok, "\n")
	if !strings.HasPrefix(tok, "crt_") {
		t.Fatalf("the CLI's key was %q, not a run token", tok)
	}
	got := sortSpans(rcv.Spans())
	if len(got.runs) != 1 {
		t.Fatalf("%d invoke_agent spans, want 1: %+v", len(got.runs), got.all)
	}
	root := got.runs[0]
	wantAttrs(t, "invoke_agent", root, map[string]any{"corral.run.id": run.ID, "gen_ai.agent.name": "traced-codex", "corral.run.status": "completed"})
	if len(got.chats) != calls {
		t.Errorf("%d chat spans for the provider's %d calls", len(got.chats), calls)
	}
	var in, outTokens int64
	for _, c := range got.chats {
		wantAttrs(t, "chat", c, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "test-model", "gen_ai.provider.name": "openai"})
		n, _ := c.Attrs["gen_ai.usage.input_tokens"].(int64)
		m, _ := c.Attrs["gen_ai.usage.output_tokens"].(int64)
		in, outTokens = in+n, outTokens+m
	}
	if done.Tokens.Input != in || done.Tokens.Output != outTokens {
		t.Errorf("the chat spans' usage adds up to %d and %d, the run's tokens are %+v", in, outTokens, done.Tokens)
	}
	if len(got.tools) != 1 || got.tools[0].Attrs["gen_ai.tool.name"] != "command" {
		t.Errorf("execute_tool spans = %+v, want Codex's one command", got.tools)
	}
	for _, s := range append(got.chats, got.tools...) {
		if s.TraceID != root.TraceID || s.ParentSpanID != root.SpanID {
			t.Errorf("%s: trace %s, parent %s; want the run's (%s, %s)", s.Name, s.TraceID, s.ParentSpanID, root.TraceID, root.SpanID)
		}
	}
	if tp := traceParent(t, out); !strings.HasPrefix(tp, "00-"+root.TraceID+"-") {
		t.Errorf("TRACEPARENT in Codex's command = %q, want one in the run's trace %s", tp, root.TraceID)
	}
	noContent(t, got.all, tracedPrompt, tracedAnswer, tok, testModelKey, "TRACEPARENT")
}

// TestTracingDelegation: a run that delegates is one trace with its
// child: the child's invoke_agent span is a child of its parent's
// execute_tool delegate span, and carries its own run's id.
func TestTracingDelegation(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	e := newEnv(t, envOptions{otlp: rcv.URL()})
	owner := e.signup("owner@example.com", "Owner")
	boss := owner.roleAgent("boss", "boss")
	worker := owner.roleAgent("worker", "worker")
	e.answer(roles(map[string]modeltest.Script{
		"boss":   delegator,
		"worker": func(modeltest.Request) modeltest.Reply { return modeltest.Text("the worker's answer") },
	}))
	run := owner.send(boss, "delegate to "+worker)
	owner.waitRun(run.ID, "completed")
	tree := owner.tree(run.ID)
	if len(tree) != 2 {
		t.Fatalf("the tree has %d runs, want 2", len(tree))
	}
	child := tree[1].ID
	if child == run.ID {
		child = tree[0].ID
	}
	e.app.Close()

	got := sortSpans(rcv.Spans())
	runs := map[string]otlptest.Span{}
	for _, s := range got.runs {
		runs[fmt.Sprint(s.Attrs["corral.run.id"])] = s
	}
	parent, ok1 := runs[run.ID]
	kid, ok2 := runs[child]
	if len(got.runs) != 2 || !ok1 || !ok2 || len(got.tools) != 1 {
		t.Fatalf("spans: %d invoke_agent (%v), %d execute_tool; want the two runs' and one delegate", len(got.runs), runs, len(got.tools))
	}
	delegate := got.tools[0]
	if delegate.Attrs["gen_ai.tool.name"] != "delegate" || delegate.ParentSpanID != parent.SpanID {
		t.Errorf("the tool span %s (parent %s) is not the boss's delegate call (%s)", delegate.Name, delegate.ParentSpanID, parent.SpanID)
	}
	if kid.ParentSpanID != delegate.SpanID || kid.TraceID != parent.TraceID || parent.TraceID != telemetry.TraceID(run.ID) {
		t.Errorf("the worker's run: trace %s, parent %s; want the boss's trace %s (its root's), under the delegate call %s",
			kid.TraceID, kid.ParentSpanID, parent.TraceID, delegate.SpanID)
	}
	if kid.Name != "invoke_agent worker" || parent.Name != "invoke_agent boss" {
		t.Errorf("the runs' spans are %q and %q", parent.Name, kid.Name)
	}
}

// TestTracingPauseResume: a run that pauses on its budget and resumes is
// one trace of two invoke_agent spans, the first ending paused with the
// usage spent before, the call its budget refused a failed chat span.
func TestTracingPauseResume(t *testing.T) {
	rcv := otlptest.New()
	defer rcv.Close()
	e := newEnv(t, envOptions{otlp: rcv.URL()})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("paused")
	// The first call fits the budget and spends 30,010; the next one's
	// ceiling does not fit what is left.
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int64{"tokens": 50_000}}).want(http.StatusOK)
	e.answer(modeltest.Sequence(costly(modeltest.Calls(modeltest.ShellCall("s", "true"))), modeltest.Text(tracedAnswer)))
	run := owner.send(id, tracedPrompt)
	if r := owner.waitRun(run.ID, "paused", "completed", "errored"); r.Status != "paused" {
		t.Fatalf("run = %s (%s), want paused on its budget", r.Status, r.Reason)
	}
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int64{"tokens": 1_000_000}}).want(http.StatusOK)
	owner.waitRun(run.ID, "completed")
	e.app.Close()

	got := sortSpans(rcv.Spans())
	if len(got.runs) != 2 {
		t.Fatalf("%d invoke_agent spans, want 2 (before the pause, after it): %+v", len(got.runs), got.all)
	}
	first, second := got.runs[0], got.runs[1] // the one that paused, the one that completed
	if first.Attrs["corral.run.status"] == "completed" {
		first, second = second, first
	}
	wantAttrs(t, "before the pause", first, map[string]any{"corral.run.id": run.ID, "corral.run.status": "paused",
		"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 30_000})
	wantAttrs(t, "after it", second, map[string]any{"corral.run.id": run.ID, "corral.run.status": "completed"})
	if first.Error || second.Error || first.TraceID != second.TraceID || first.TraceID != telemetry.TraceID(run.ID) {
		t.Errorf("the two spans: errors %v, %v; traces %s, %s; want no error, both in %s", first.Error, second.Error, first.TraceID, second.TraceID, telemetry.TraceID(run.ID))
	}
	refused := 0
	for _, c := range got.chats {
		if c.Attrs["error.type"] == "admission_denied" {
			refused++
			if c.ParentSpanID != first.SpanID || !c.Error {
				t.Errorf("the refused call's span: parent %s, error %v; want under the paused span %s, failed", c.ParentSpanID, c.Error, first.SpanID)
			}
		}
	}
	if len(got.chats) != 3 || refused != 1 {
		t.Errorf("%d chat spans, %d refused by the budget; want 3, 1", len(got.chats), refused)
	}
}
