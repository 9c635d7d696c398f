package telemetry

// The three kinds of span, each started by a Start method of Tracer and
// ended once by its End. A nil span (tracing off) does nothing.

import (
	"context"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"corral"
)

// The attributes, by the names of the GenAI semantic conventions (and two
// of Corral's own). Written out rather than taken from a semconv package:
// the Go packages of newer conventions leave the GenAI group out.
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrAgentID       = attribute.Key("gen_ai.agent.id")
	attrAgentName     = attribute.Key("gen_ai.agent.name")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrResponseModel = attribute.Key("gen_ai.response.model")
	attrFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrToolType      = attribute.Key("gen_ai.tool.type")
	attrToolCallID    = attribute.Key("gen_ai.tool.call.id")
	attrErrorType     = attribute.Key("error.type")
	attrServerAddress = attribute.Key("server.address")
	attrServerPort    = attribute.Key("server.port")
	attrHTTPStatus    = attribute.Key("http.response.status_code")
	attrRunID         = attribute.Key("corral.run.id")
	attrRunStatus     = attribute.Key("corral.run.status")
)

// Providers, as gen_ai.provider.name names them: the gateway speaks
// OpenAI's Chat Completions to any compatible provider (the conventions
// name the API the instrumentation speaks when it cannot know better), and
// Anthropic's Messages when it passes a CLI's call through in it.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// Run is the invoke_agent span of one run, from its loop's start to its
// end or pause. It adds up the usage of the chat spans under it.
type Run struct {
	span trace.Span

	mu       sync.Mutex
	usage    corral.Tokens
	provider string
}

// RunStart is what a run's span knows when it starts.
type RunStart struct {
	RunID, AgentID string
	// Tree is the id of the root run of its delegation tree (the run's
	// own, for a run a person started): a span without a parent in ctx is
	// put in that tree's trace (TraceID).
	Tree string
}

type runKey struct{}

// StartRun starts the span of a run under ctx's span, if any, and returns
// a context carrying it: the chat and tool spans started from that
// context are its children, and Env of it is the run's trace context.
func (t *Tracer) StartRun(ctx context.Context, s RunStart) (context.Context, *Run) {
	if !t.On() {
		return ctx, nil
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = context.WithValue(ctx, treeKey{}, treeTraceID(s.Tree))
	}
	ctx, span := t.tracer.Start(ctx, "invoke_agent", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrOperation.String("invoke_agent"), attrAgentID.String(s.AgentID), attrRunID.String(s.RunID)))
	r := &Run{span: span}
	return context.WithValue(ctx, runKey{}, r), r
}

// RunEnd is how a run's span ends.
type RunEnd struct {
	AgentName, Model string
	Status           corral.RunStatus // how the run ended, or paused
	// ErrorType is why it failed, in few words ("timeout", "errored"); ""
	// when it did not.
	ErrorType string
}

// End ends the run's span, named after its agent, with the usage its
// chats reported.
func (r *Run) End(e RunEnd) {
	if r == nil {
		return
	}
	r.mu.Lock()
	u, provider := r.usage, r.provider
	r.mu.Unlock()
	if e.AgentName != "" {
		r.span.SetName("invoke_agent " + e.AgentName)
	}
	attrs := []attribute.KeyValue{
		attrAgentName.String(e.AgentName),
		attrInputTokens.Int64((u.Input)),
		attrOutputTokens.Int64((u.Output)),
		attrRunStatus.String(string(e.Status)),
	}
	if e.Model != "" {
		attrs = append(attrs, attrRequestModel.String(e.Model))
	}
	if provider != "" {
		attrs = append(attrs, attrProvider.String(provider))
	}
	r.span.SetAttributes(attrs...)
	fail(r.span, e.ErrorType)
	r.span.End()
}

// add counts a chat's usage and provider on its run.
func (r *Run) add(u corral.Tokens, provider string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.usage.Input += u.Input
	r.usage.Output += u.Output
	if r.provider == "" {
		r.provider = provider
	}
	r.mu.Unlock()
}

// Chat is the span of one model call.
type Chat struct {
	span     trace.Span
	run      *Run
	provider string
}

// ChatStart is what a model call's span knows when it starts.
type ChatStart struct {
	Provider string // ProviderOpenAI or ProviderAnthropic
	Model    string // the model asked for
	// The provider's host and port, when known.
	ServerAddress string
	ServerPort    int
}

// StartChat starts the span of a model call under ctx's span: a run's
// (see StartRun), or none.
func (t *Tracer) StartChat(ctx context.Context, s ChatStart) *Chat {
	if !t.On() {
		return nil
	}
	attrs := make([]attribute.KeyValue, 3, 5)
	attrs[0], attrs[1], attrs[2] = attrOperation.String("chat"), attrProvider.String(s.Provider), attrRequestModel.String(s.Model)
	if s.ServerAddress != "" {
		attrs = append(attrs, attrServerAddress.String(s.ServerAddress))
		if s.ServerPort > 0 {
			attrs = append(attrs, attrServerPort.Int(s.ServerPort))
		}
	}
	_, span := t.tracer.Start(ctx, "chat "+s.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	run, _ := ctx.Value(runKey{}).(*Run)
	return &Chat{span: span, run: run, provider: s.Provider}
}

// Retry notes on the span that a try failed and is made again: attempt is
// the try about to be made, status the HTTP status the failed one got (0:
// no answer).
func (c *Chat) Retry(attempt, status int) {
	if c == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.Int("attempt", attempt)}
	if status > 0 {
		attrs = append(attrs, attrHTTPStatus.Int(status))
	}
	c.span.AddEvent("retry", trace.WithAttributes(attrs...))
}

// ChatEnd is how a model call ended.
type ChatEnd struct {
	// Provider, when set, replaces the span's: an agent CLI's call is known
	// to go in Anthropic's own protocol only once it went.
	Provider      string
	ResponseModel string // the model the provider says answered
	// Usage is the provider's report; Reported false when it made none.
	Usage         corral.Tokens
	Reported      bool
	FinishReasons []string
	// ErrorType is why the call failed: the provider's HTTP status
	// ("429"), or a word ("unavailable", "cancelled", "no_usage"); ""
	// when it did not.
	ErrorType string
}

// End ends the model call's span and adds its usage to its run's.
func (c *Chat) End(e ChatEnd) {
	if c == nil {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	if e.Provider != "" {
		c.provider = e.Provider
		attrs = append(attrs, attrProvider.String(e.Provider))
	}
	if e.ResponseModel != "" {
		attrs = append(attrs, attrResponseModel.String(e.ResponseModel))
	}
	if e.Reported {
		attrs = append(attrs, attrInputTokens.Int64((e.Usage.Input)), attrOutputTokens.Int64((e.Usage.Output)))
		c.run.add(e.Usage, c.provider)
	}
	if len(e.FinishReasons) > 0 {
		attrs = append(attrs, attrFinishReasons.StringSlice(e.FinishReasons))
	}
	c.span.SetAttributes(attrs...)
	fail(c.span, e.ErrorType)
	c.span.End()
}

// Tool is the span of one tool call.
type Tool struct{ span trace.Span }

// StartTool starts the span of a tool call under ctx's span (a run's).
// callID is the model's id of the call, "" when unknown. Both come from a
// model, which may write anything there: a name that does not look like a
// tool's is recorded as Other, an id that does not look like an id not at
// all.
func (t *Tracer) StartTool(ctx context.Context, name, callID string) *Tool {
	if !t.On() {
		return nil
	}
	if !looksLikeName(name) {
		name = Other
	}
	attrs := []attribute.KeyValue{attrOperation.String("execute_tool"), attrToolName.String(name), attrToolType.String("function")}
	if callID != "" && looksLikeName(callID) {
		attrs = append(attrs, attrToolCallID.String(callID))
	}
	_, span := t.tracer.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return &Tool{span: span}
}

// Context is ctx carrying the tool call's span: a run the call starts (a
// delegated run) is started under it.
func (tl *Tool) Context(ctx context.Context) context.Context {
	if tl == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, tl.span)
}

// End ends the tool call's span; errorType says why it failed ("" when
// it did not).
func (tl *Tool) End(errorType string) {
	if tl == nil {
		return
	}
	fail(tl.span, errorType)
	tl.span.End()
}

// Other is what the conventions record for a value outside those known.
const Other = "_OTHER"

// looksLikeName reports whether s is a plausible tool name or call id: at
// most 64 letters, digits and _ . : / -, which no sentence fits.
func looksLikeName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.:/-", c)
		if !ok {
			return false
		}
	}
	return true
}

// fail marks a span as failed with error.type, when errorType is set. The
// status has no description: the words of a failure may quote content.
func fail(span trace.Span, errorType string) {
	if errorType == "" {
		return
	}
	span.SetAttributes(attrErrorType.String(errorType))
	span.SetStatus(codes.Error, "")
}
