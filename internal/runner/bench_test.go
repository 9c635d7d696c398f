package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"corral"
	"corral/internal/modeltest"
	"corral/internal/runner"
)

// BenchmarkLoopGatewayOverhead measures what the gateway costs a whole
// agent run (model call, one list_files tool call in the sandbox, model
// call, answer) against the same run whose model calls go straight to the
// SDK. Each iteration runs both, alternating which goes first, over the
// same store, workspaces and fake provider; gateway/direct is the ratio
// of their total times. The difference is the gateway's budget check and
// metering (a store read before each call, a usage write and a trace event
// after), plus its request building and checks.
//
//	go test -run '^$' -bench LoopGatewayOverhead -benchtime 20x ./internal/runner/
func BenchmarkLoopGatewayOverhead(b *testing.B) {
	h := newHarness(b, func(req modeltest.Request) modeltest.Reply {
		if req.Last().Role == "tool" {
			return modeltest.Text("The workspace is empty.")
		}
		return modeltest.Calls(modeltest.ListCall("", "."))
	})
	variants := []struct {
		name   string
		runner *runner.Runner
		spent  time.Duration
	}{
		{name: "gateway", runner: h.newRunner(h.db, h.gateway, runner.Config{})},
		{name: "direct", runner: h.newRunner(h.db, newDirect(h.model.URL()), runner.Config{})},
	}
	i := 0
	for b.Loop() {
		for k := range variants {
			v := &variants[(i+k)%len(variants)]
			v.spent += timeRun(b, h, v.name, v.runner, "what is in the workspace?")
		}
		i++
	}
	gw, direct := variants[0].spent, variants[1].spent
	b.ReportMetric(float64(gw)/float64(direct), "gateway/direct")
	b.ReportMetric(float64(gw)/float64(i), "gateway-ns/run")
	b.ReportMetric(float64(direct)/float64(i), "direct-ns/run")
}

// benchToolCalls is how many tool calls the long run of
// BenchmarkRunShellCalls makes.
const benchToolCalls = 50

// BenchmarkRunShellCalls measures the wall time of a whole agent run of
// benchToolCalls trivial shell calls (`true`), one per model call, then an
// answer: the run's staging, its sandbox, every exec, the model round trips
// to the fake provider, the trace and the change set at the end. Each
// iteration also runs the same with one tool call, alternating which goes
// first: the difference, over the benchToolCalls-1 more calls, is what one
// more tool call costs a run (ms/extra-call), apart from what every run
// pays once (ms/run-1-call).
//
//	go test -run '^$' -bench RunShellCalls -benchtime 5x -count 3 ./internal/runner/
func BenchmarkRunShellCalls(b *testing.B) {
	// The user's message says how many calls to make: "call true N times".
	h := newHarness(b, func(req modeltest.Request) modeltest.Reply {
		want := 0
		for _, m := range req.Messages {
			if m.Role == "user" {
				fmt.Sscanf(m.Content, "call true %d times", &want)
			}
		}
		n := req.CountRole("tool")
		if n >= want {
			return modeltest.Text("done")
		}
		return modeltest.Calls(modeltest.ShellCall(fmt.Sprintf("c%d", n), "true"))
	})
	r := h.newRunner(h.db, h.gateway, runner.Config{MaxTurns: benchToolCalls + 1})
	run := func(calls int) time.Duration {
		agent := h.agent(corral.Limits{})
		run, msg, ev := h.admit(agent, fmt.Sprintf("call true %d times", calls))
		events, cancel := r.Subscribe(run.ID)
		defer cancel()
		start := time.Now()
		r.Start(run, msg, ev)
		if !drained(events, patience) {
			b.Fatalf("run %s did not end within %v", run.ID, patience)
		}
		spent := time.Since(start)
		if got, err := h.db.Run(context.Background(), run.ID); err != nil || got.Status != corral.RunCompleted {
			b.Fatalf("run = %s (%s), %v; want completed", got.Status, got.Reason, err)
		}
		// The last model call saw every tool's result, each a success.
		reqs := h.model.Requests()
		last := reqs[len(reqs)-1]
		if n := last.CountRole("tool"); n != calls {
			b.Fatalf("the model saw %d tool results, want %d", n, calls)
		}
		for _, m := range last.Messages {
			if m.Role == "tool" && !strings.Contains(m.Content, `"exit_code":0`) {
				b.Fatalf("a tool call of the run ended %q, want exit 0", m.Content)
			}
		}
		return spent
	}
	var long, short time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			long += run(benchToolCalls)
			short += run(1)
		} else {
			short += run(1)
			long += run(benchToolCalls)
		}
		i++
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(i) }
	b.ReportMetric(ms(long), "ms/run")
	b.ReportMetric(ms(short), "ms/run-1-call")
	b.ReportMetric((ms(long)-ms(short))/(benchToolCalls-1), "ms/extra-call")
}

// timeRun runs one run of a fresh agent (so that no run carries an
// earlier run's conversation) with r, and returns how long it took to its
// final status, which must be completed.
func timeRun(b *testing.B, h *harness, name string, r *runner.Runner, content string) time.Duration {
	b.Helper()
	agent := h.agent(corral.Limits{})
	run, msg, ev := h.admit(agent, content)
	events, cancel := r.Subscribe(run.ID)
	defer cancel()
	start := time.Now()
	r.Start(run, msg, ev)
	// The channel closes once the run's final status is stored.
	if !drained(events, patience) {
		b.Fatalf("%s run %s did not end within %v", name, run.ID, patience)
	}
	spent := time.Since(start)
	if got, err := h.db.Run(context.Background(), run.ID); err != nil || got.Status != corral.RunCompleted {
		b.Fatalf("%s run = %s (%s), %v; want completed", name, got.Status, got.Reason, err)
	}
	return spent
}

// drained reads events until the channel closes; false if it is still
// open after patience (a liveness bound, not a timing assertion).
func drained(events <-chan runner.Event, patience time.Duration) bool {
	timeout := time.After(patience)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// direct is the baseline model: the SDK's streamed chat completion, as the
// gateway makes it (same request, usage asked for), with no budget check,
// no metering and no checks of the reply.
type direct struct {
	chat openai.ChatCompletionService
}

func newDirect(baseURL string) direct {
	return direct{chat: openai.NewChatCompletionService(
		option.WithBaseURL(baseURL), option.WithAPIKey("k"), option.WithMaxRetries(0))}
}

func (d direct) ModelName(m string) string { return m }

func (d direct) Complete(ctx context.Context, req corral.ModelRequest, _ corral.Meter) (corral.ModelResponse, error) {
	p := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(req.Model),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			p.Messages = append(p.Messages, openai.SystemMessage(m.Content))
		case "user":
			p.Messages = append(p.Messages, openai.UserMessage(m.Content))
		case "tool":
			p.Messages = append(p.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		case "assistant":
			var a openai.ChatCompletionAssistantMessageParam
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = param.NewOpt(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: param.NewOpt(t.Description), Parameters: shared.FunctionParameters(t.Parameters),
		}))
	}

	s := d.chat.NewStreaming(ctx, p)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		chunk := s.Current()
		acc.AddChunk(chunk)
		for _, c := range chunk.Choices {
			if c.Index == 0 && c.Delta.Content != "" && req.OnDelta != nil {
				req.OnDelta(corral.ModelDelta{Content: c.Delta.Content})
			}
		}
	}
	if err := s.Err(); err != nil {
		return corral.ModelResponse{}, err
	}
	if len(acc.Choices) == 0 {
		return corral.ModelResponse{}, errors.New("direct: no reply")
	}
	m := acc.Choices[0].Message
	out := corral.ModelMessage{Role: "assistant", Content: m.Content}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, corral.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return corral.ModelResponse{Message: out, Model: acc.Model,
		Usage: corral.Tokens{Input: acc.Usage.PromptTokens, Output: acc.Usage.CompletionTokens}}, nil
}
