// Package gateway is the one place every model call goes through. It speaks
// Chat Completions (with tool calls) to any OpenAI-compatible endpoint,
// meters tokens from the provider's own usage figures, enforces the budget
// through a corral.Meter (each call reserves its ceiling, its request's size
// and an output cap it is sent with, before it goes, and settles on the
// provider's usage), and keeps the provider key: the key is sent only in
// the Authorization header and never appears in an error, a log or a
// response. The words of a call (corral.ModelRequest, corral.ModelResponse,
// corral.Meter...) are the root package's: the runner, the services and
// the model API speak them without importing the gateway.
//
// Embed (embed.go) asks the provider's /v1/embeddings for vectors under the
// same rules: budget reserved first, usage metered, key kept, retries alike.
//
// A call is made whole or streamed: a request with OnDelta streams
// (Server-Sent Events, with the usage asked for in a final chunk) and hands
// over the assistant's text as it arrives; both kinds go through the same
// reservation, the same metering and the same error rules.
//
// A call the provider answered 429 or 5xx, or whose connection failed
// before any answer came, is tried again (see retry.go): a bounded number
// of times, waiting what the provider asks, under the call's one
// reservation, and never once a streamed call handed text to its caller.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"corral"
	"corral/internal/sanitize"
	"corral/internal/telemetry"
)

// Config is what the gateway needs to reach a provider. cmd/ fills it from
// CORRAL_MODEL_BASE_URL, CORRAL_MODEL_API_KEY and CORRAL_MODEL.
type Config struct {
	BaseURL    string       // e.g. http://127.0.0.1:11434/v1; "" means no provider
	APIKey     string       // may be empty for local providers such as Ollama
	Model      string       // the default model; a request may name another
	HTTPClient *http.Client // optional
	// Native lists the protocols the provider also speaks itself
	// (NativeResponses, NativeMessages): agent CLIs' calls in them are
	// passed through instead of translated to Chat Completions.
	Native []string
	// MaxOutput caps every call's output (0: DefaultMaxOutput), so that
	// what a call reserves bounds what it can spend; OutputField names the
	// Chat Completions field that carries it: "max_tokens" (the default,
	// what OpenAI-compatible servers take) or "max_completion_tokens"
	// (what OpenAI's reasoning models require).
	MaxOutput   int64
	OutputField string

	// Sleep waits between tries; it must return ctx's error as soon as ctx
	// ends. nil is a real timer. Tests set one that does not wait.
	Sleep func(ctx context.Context, d time.Duration) error

	// Observer, when set, is told of every call Complete and Embed make,
	// and of each the budget refused (the server's metrics).
	Observer corral.ModelObserver
	// Tracer makes a chat span of each call Complete makes (nil: none).
	Tracer *telemetry.Tracer
}

// DefaultMaxOutput is the output cap a call is sent with when its request
// sets none or a higher one (Config.MaxOutput).
const DefaultMaxOutput = 32_000

// Gateway makes model calls. It is safe for concurrent use.
type Gateway struct {
	configured bool
	model      string
	chat       openai.ChatCompletionService
	embeddings openai.EmbeddingService // see embed.go
	sleep      func(ctx context.Context, d time.Duration) error
	// redact removes the key from text that came from outside. The key is
	// held only inside closures so that printing a Gateway cannot show it.
	redact func(string) string
	// Forward's way to the provider (forward.go): authorize puts the key
	// in a request's header.
	baseURL            string
	client             *http.Client
	authorize          func(*http.Request)
	authorizeAnthropic func(*http.Request)
	native             map[string]bool
	maxOutput          int64
	outputField        string
	observer           corral.ModelObserver
	// tracer makes the calls' spans; host and port name the provider in
	// them.
	tracer *telemetry.Tracer
	host   string
	port   int
}

// MaxOutput is the output cap calls are sent with, and the Chat
// Completions field that carries it (Config.MaxOutput, OutputField).
func (g *Gateway) MaxOutput() (field string, n int64) { return g.outputField, g.maxOutput }

// New returns a Gateway for cfg. A Config without BaseURL gives a Gateway
// whose calls all answer Configured's error.
func New(cfg Config) (*Gateway, error) {
	key := cfg.APIKey
	g := &Gateway{
		model: cfg.Model,
		sleep: cfg.Sleep,
		redact: func(s string) string {
			if key == "" {
				return s
			}
			return strings.ReplaceAll(s, key, "[redacted]")
		},
	}
	if g.sleep == nil {
		g.sleep = sleep
	}
	g.observer = cfg.Observer
	if g.observer == nil {
		g.observer = unobserved{}
	}
	g.maxOutput, g.outputField = cfg.MaxOutput, cfg.OutputField
	if g.maxOutput == 0 {
		g.maxOutput = DefaultMaxOutput
	}
	if g.outputField == "" {
		g.outputField = "max_tokens"
	}
	if g.maxOutput < 1 {
		return nil, corral.Errorf(corral.EINVALID, "the output cap must be a positive number of tokens, not %d", g.maxOutput)
	}
	if g.outputField != "max_tokens" && g.outputField != "max_completion_tokens" {
		return nil, corral.Errorf(corral.EINVALID, "the output field is %q or %q, not %q", "max_tokens", "max_completion_tokens", g.outputField)
	}
	if cfg.BaseURL == "" {
		return g, nil
	}
	if err := validBaseURL(cfg.BaseURL); err != nil {
		return nil, err
	}
	g.baseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	g.tracer = cfg.Tracer
	if u, err := url.Parse(g.baseURL); err == nil {
		g.host = u.Hostname()
		g.port, _ = strconv.Atoi(u.Port())
	}
	g.client = cfg.HTTPClient
	if g.client == nil {
		g.client = &http.Client{} // no overall timeout: a stream lasts as long as it lasts; ctx ends it
	}
	g.authorize = func(r *http.Request) {
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
	}
	g.authorizeAnthropic = func(r *http.Request) {
		if key != "" {
			r.Header.Set("x-api-key", key)
		}
	}
	g.native = map[string]bool{}
	for _, p := range cfg.Native {
		if p != NativeResponses && p != NativeMessages {
			return nil, corral.Errorf(corral.EINVALID, "CORRAL_MODEL_NATIVE takes %q and %q, not %q", NativeResponses, NativeMessages, p)
		}
		g.native[p] = true
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(key),
		// Retries belong to Complete, where the budget is checked again
		// before each try (see retry.go).
		option.WithMaxRetries(0),
		option.WithMiddleware(observe),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	// The service, not openai.NewClient: NewClient reads OPENAI_* from the
	// environment, and configuration comes only from Config.
	g.chat = openai.NewChatCompletionService(opts...)
	g.embeddings = openai.NewEmbeddingService(opts...)
	g.configured = true
	return g, nil
}

func validBaseURL(s string) error {
	u, err := sanitize.ServerURL(s)
	if err != nil {
		return corral.Errorf(corral.EINVALID,
			"CORRAL_MODEL_BASE_URL must be an absolute http or https URL, such as http://127.0.0.1:11434/v1")
	}
	if u.User != nil {
		return corral.Errorf(corral.EINVALID,
			"CORRAL_MODEL_BASE_URL must not carry credentials: put the key in CORRAL_MODEL_API_KEY")
	}
	return nil
}

// Configured reports whether a provider is set, and if not, how to set one.
func (g *Gateway) Configured() error {
	if g.configured {
		return nil
	}
	return &corral.Error{
		Code: corral.EUNAVAIL,
		Op:   "gateway",
		Message: "no model provider is configured: set CORRAL_MODEL_BASE_URL " +
			"(e.g. http://127.0.0.1:11434/v1 for Ollama, https://api.openai.com/v1 for OpenAI), " +
			"CORRAL_MODEL_API_KEY and CORRAL_MODEL",
	}
}

// Complete makes one model call, streamed when req.OnDelta is set, its
// output capped at the gateway's MaxOutput. It asks m.Reserve first for
// the call's ceiling, and returns its error unchanged without calling the
// provider. However the call ends, it settles the reservation once: with
// the provider's usage, with none (the ceiling) when an answer came
// without it, or empty when no answer came; a Settle error is returned
// unchanged along with the response. A provider that reports no usage
// makes the call fail.
//
// A try that the provider answered 429 or 5xx, or whose connection was
// refused or broken before it answered, is made again, up to maxTries in
// all, after the wait the provider asks for (Retry-After, retry-after-ms)
// or else a short backoff, each retry told to req.OnRetry, under the same
// reservation. A wait that would take the call past maxWaiting in all is
// not waited: the call fails at once. A streamed try that handed over a
// delta is never made again.
//
// With a Tracer, the call is a chat span under ctx's (its run's), from its
// reservation to its answer, whatever the number of tries.
func (g *Gateway) Complete(ctx context.Context, req corral.ModelRequest, m corral.Meter) (resp corral.ModelResponse, err error) {
	if err := g.Configured(); err != nil {
		return corral.ModelResponse{}, err
	}
	model := req.Model
	if model == "" {
		model = g.model
	}
	if model == "" {
		return corral.ModelResponse{}, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "no model is named: set CORRAL_MODEL or the agent's model"}
	}
	var r result // the last try
	chat := g.tracer.StartChat(ctx, telemetry.ChatStart{Provider: telemetry.ProviderOpenAI, Model: model, ServerAddress: g.host, ServerPort: g.port})
	if chat != nil {
		defer func() { chat.End(chatEnd(ctx, resp, r, err)) }()
	}
	params, err := buildParams(model, req)
	if err != nil {
		return corral.ModelResponse{}, err
	}
	if g.outputField == "max_completion_tokens" {
		params.MaxCompletionTokens = openai.Int(g.maxOutput)
	} else {
		params.MaxTokens = openai.Int(g.maxOutput)
	}
	body, err := json.Marshal(params)
	if err != nil {
		return corral.ModelResponse{}, corral.Internal("gateway", err)
	}
	settle, err := g.reserve(ctx, m, model, corral.Ceiling(len(body), g.maxOutput))
	if err != nil {
		return corral.ModelResponse{}, err
	}
	start := time.Now()
	var waited time.Duration
	for try := 1; ; try++ {
		if req.OnDelta != nil {
			r = g.stream(ctx, params, req.OnDelta)
		} else {
			r = g.call(ctx, params)
		}
		r.tries = try
		retry, ok := g.transient(ctx, r)
		if !ok || try == maxTries {
			g.observe(corral.ModelChat, model, r, start)
			return g.settle(ctx, model, r, settle)
		}
		retry.Attempt = try + 1
		retry.Wait = backoff[try-1]
		if d, ok := retryAfter(r.exchange.header, time.Now()); ok {
			retry.Wait = d
		}
		if waited+retry.Wait > maxWaiting {
			r.refused = retry.Wait
			g.observe(corral.ModelChat, model, r, start)
			return g.settle(ctx, model, r, settle)
		}
		if req.OnRetry != nil {
			req.OnRetry(retry)
		}
		chat.Retry(retry.Attempt, retry.Status)
		if err := g.wait(ctx, req.Interrupt, retry.Wait); err != nil {
			g.observe(corral.ModelChat, model, r, start)
			settle(context.WithoutCancel(ctx), corral.Tokens{}, true)
			r = result{cancelled: true}
			return corral.ModelResponse{}, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
				Message: "the model call was cancelled", Err: fmt.Errorf("waiting to retry: %w", err)}
		}
		waited += retry.Wait
	}
}

// spent is what a try is metered at: the provider's usage; none when no
// answer came (a refused connection, an error status: nothing is billed);
// the ceiling (reported false) when an answer came without usage.
func (r result) spent() (corral.Tokens, bool) {
	if r.metered {
		return r.usage, true
	}
	answered := r.exchange != nil && r.exchange.responded && r.exchange.status/100 == 2
	return corral.Tokens{}, !answered
}

// errInterrupted is why a wait ended when corral.ModelRequest.Interrupt closed.
var errInterrupted = errors.New("interrupted")

// wait sleeps d before the next try, ending early, with an error, when ctx
// ends or interrupt closes.
func (g *Gateway) wait(ctx context.Context, interrupt <-chan struct{}, d time.Duration) error {
	if interrupt != nil {
		select {
		case <-interrupt:
			return errInterrupted
		default:
		}
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			select {
			case <-interrupt:
				cancel(errInterrupted)
			case <-ctx.Done():
			}
		}()
	}
	if err := g.sleep(ctx, d); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errInterrupted) {
			return cause
		}
		return err
	}
	return nil
}

// result is what one call brought back, whole or streamed, before it is
// judged by settle.
type result struct {
	op        string // what the call was, for the log; "" is a chat completion
	err       error  // the SDK's error: it holds the request, so it never leaves the package
	usage     corral.Tokens
	metered   bool                          // the provider reported both token counts
	message   *openai.ChatCompletionMessage // the first choice's; nil if none came
	finish    string                        // and why it ended, as the provider says
	model     string
	malformed bool // a streamed chunk could not be added to the reply

	exchange  *exchange     // what the try saw of the HTTP answer
	delivered bool          // a delta was handed to OnDelta
	tries     int           // how many tries the call took, this one included
	refused   time.Duration // the wait the provider asked for and the gateway would not make
	cancelled bool          // the wait for the next try was cut short
}

func (g *Gateway) call(ctx context.Context, params openai.ChatCompletionNewParams) result {
	x := &exchange{}
	cc, err := g.chat.New(context.WithValue(ctx, exchangeKey{}, x), params)
	if err != nil {
		return result{err: err, exchange: x}
	}
	r := result{model: cc.Model, exchange: x}
	r.usage, r.metered = usageOf(cc.JSON.Usage.Valid(), cc.Usage)
	if len(cc.Choices) > 0 {
		r.message, r.finish = &cc.Choices[0].Message, cc.Choices[0].FinishReason
	}
	return r
}

func (g *Gateway) stream(ctx context.Context, params openai.ChatCompletionNewParams, onDelta func(corral.ModelDelta)) result {
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	x := &exchange{}
	s := g.chat.NewStreaming(context.WithValue(ctx, exchangeKey{}, x), params)
	defer s.Close()
	var (
		acc openai.ChatCompletionAccumulator
		r   = result{exchange: x}
	)
	for s.Next() {
		chunk := s.Current()
		// The usage comes in a chunk of its own at the end. The last figures
		// reported are taken as they are, not added up as the accumulator
		// does: some providers repeat running totals on every chunk.
		if u, ok := usageOf(chunk.JSON.Usage.Valid(), chunk.Usage); ok {
			r.usage, r.metered = u, true
		}
		if r.malformed {
			continue // read on: the usage is still to come
		}
		if !acc.AddChunk(chunk) {
			// Refusing a usage-only chunk (say, one with another id) loses
			// nothing; refusing one that carries part of the reply breaks it.
			r.malformed = len(chunk.Choices) > 0
			continue
		}
		for _, c := range chunk.Choices {
			if c.Index == 0 && c.Delta.Content != "" {
				r.delivered = true
				onDelta(corral.ModelDelta{Content: c.Delta.Content})
			}
		}
	}
	r.err = s.Err()
	r.model = acc.Model
	if len(acc.Choices) > 0 {
		r.message, r.finish = &acc.Choices[0].Message, acc.Choices[0].FinishReason
	}
	return r
}

func usageOf(present bool, u openai.CompletionUsage) (corral.Tokens, bool) {
	if !present || !u.JSON.PromptTokens.Valid() || !u.JSON.CompletionTokens.Valid() {
		return corral.Tokens{}, false
	}
	return corral.Tokens{Input: u.PromptTokens, Output: u.CompletionTokens}, true
}

// settle applies the same rules to every call, whole or streamed: record
// what the provider says was spent, then judge the reply.
func (g *Gateway) settle(ctx context.Context, model string, r result, settle corral.Settle) (corral.ModelResponse, error) {
	// The tokens are spent whatever the reply looks like, so they are
	// recorded before the reply is judged, and even when the caller has
	// given up on the call meanwhile.
	u, reported := r.spent()
	recErr := settle(context.WithoutCancel(ctx), u, reported)
	fail := func(err error) (corral.ModelResponse, error) {
		if recErr != nil {
			return corral.ModelResponse{}, recErr
		}
		return corral.ModelResponse{}, err
	}
	switch {
	case r.err != nil:
		return fail(g.providerError(ctx, r))
	case !r.metered:
		return corral.ModelResponse{}, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "the provider reported no token usage: Corral cannot meter it"}
	case r.malformed:
		return fail(&corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "the provider streamed a reply that does not fit together"})
	case r.message == nil:
		return fail(&corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "the provider returned no reply"})
	}
	resp := corral.ModelResponse{Message: fromOpenAI(*r.message), Usage: r.usage, Model: r.model}
	if resp.Model == "" {
		resp.Model = model
	}
	return resp, recErr
}

// providerError turns a failed call into EUNAVAIL. The SDK's error holds the
// request, headers included, so it is never wrapped: Err gets a fresh error
// made of safe facts, with the key scrubbed besides. The status is the one
// the HTTP answer carried (see observe): a provider whose error body the SDK
// cannot decode is still reported by its status and its own message.
func (g *Gateway) providerError(ctx context.Context, r result) error {
	e := &corral.Error{Code: corral.EUNAVAIL, Op: "gateway"}
	var streamErr *ssestream.StreamError
	tries := ""
	if r.tries > 1 {
		tries = fmt.Sprintf(" after %d tries", r.tries)
	}
	op := r.op
	if op == "" {
		op = "chat completion"
	}
	x := r.exchange
	switch {
	case ctx.Err() != nil:
		e.Message = "the model call was cancelled"
		e.Err = fmt.Errorf("%s: %w", op, ctx.Err())
	case x != nil && x.responded && x.status >= 400:
		status := x.status
		switch status {
		case http.StatusUnauthorized, http.StatusForbidden:
			// Not the provider's message: it may echo part of the key.
			e.Message = fmt.Sprintf("the model provider refused the credentials (%d): check CORRAL_MODEL_API_KEY", status)
		default:
			e.Message = "the model provider answered " + statusLine(status) + tries
			if r.refused > 0 {
				e.Message += fmt.Sprintf(" and asked to wait %s, longer than Corral waits for a model call (%s in all)",
					r.refused.Round(time.Second), maxWaiting)
			}
			if msg := g.providerMessage(x.body); msg != "" {
				e.Message += ": " + msg
			}
		}
		text := fmt.Sprintf("%s: status %d", op, status)
		var apiErr *openai.Error
		if errors.As(r.err, &apiErr) && apiErr.Code != "" {
			text += ", code " + apiErr.Code
		}
		e.Err = errors.New(g.redact(fmt.Sprintf("%s (try %d)", text, r.tries)))
	case errors.As(r.err, &streamErr):
		// The event's message may quote the request, as an error body may:
		// only its type and code are kept.
		e.Message = "the model provider reported an error in the middle of its reply"
		e.Err = errors.New(g.redact("chat completion stream: error event" + streamErrorKind(streamErr.Event.Data)))
	default:
		e.Message = "the model provider could not be reached" + tries
		e.Err = errors.New(g.redact(fmt.Sprintf("%s (try %d): %s", op, r.tries, r.err)))
	}
	return e
}

// statusLine is "429 Too Many Requests", or just "529" for a status
// net/http has no text for.
func statusLine(status int) string {
	return strings.TrimSpace(fmt.Sprintf("%d %s", status, http.StatusText(status)))
}

// streamErrorKind gives the type and code of an SSE error event, such as
// ", type server_error, code 500", or "" when it names neither.
func streamErrorKind(data []byte) string {
	var ev struct {
		Error struct {
			Type string `json:"type"`
			Code any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return ""
	}
	var s string
	if ev.Error.Type != "" {
		s += ", type " + ev.Error.Type
	}
	if ev.Error.Code != nil {
		s += fmt.Sprintf(", code %v", ev.Error.Code)
	}
	return s
}

func buildParams(model string, req corral.ModelRequest) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	for i, m := range req.Messages {
		switch m.Role {
		case "system":
			p.Messages = append(p.Messages, openai.SystemMessage(m.Content))
		case "user":
			p.Messages = append(p.Messages, openai.UserMessage(m.Content))
		case "assistant":
			var a openai.ChatCompletionAssistantMessageParam
			// With tool calls, content is optional; an empty string would
			// be a turn that said "".
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = param.NewOpt(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      tc.Name,
							Arguments: tc.Arguments,
						},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case "tool":
			if m.ToolCallID == "" {
				return p, corral.Errorf(corral.EINVALID, "message %d: a tool result needs the id of its tool call", i)
			}
			p.Messages = append(p.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		default:
			return p, corral.Errorf(corral.EINVALID, "message %d: role must be system, user, assistant or tool", i)
		}
	}
	for _, t := range req.Tools {
		if t.Name == "" {
			return p, corral.Errorf(corral.EINVALID, "a tool needs a name")
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.Parameters)}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return p, nil
}

func fromOpenAI(m openai.ChatCompletionMessage) corral.ModelMessage {
	out := corral.ModelMessage{Role: "assistant", Content: m.Content}
	for _, tc := range m.ToolCalls {
		// Only function tools are offered; anything else (a custom tool
		// call) is dropped rather than passed on half-understood. Some
		// compatible providers omit "type", so the function name decides.
		if tc.Type == "custom" || tc.Function.Name == "" {
			continue
		}
		out.ToolCalls = append(out.ToolCalls, corral.ToolCall{
			ID:        tc.ID,
			Name:      tc.Function.Name,
			Arguments: tc.Function.Arguments,
		})
	}
	return out
}
