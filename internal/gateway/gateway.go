// Package gateway is the one place every model call goes through. It speaks
// Chat Completions (with tool calls) to any OpenAI-compatible endpoint,
// meters tokens from the provider's own usage figures, enforces the budget
// through a Meter before each call, and keeps the provider key: the key is
// sent only in the Authorization header and never appears in an error, a log
// or a Response.
//
// This slice makes non-streaming calls only.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"corral"
)

// Config is what the gateway needs to reach a provider. cmd/ fills it from
// CORRAL_MODEL_BASE_URL, CORRAL_MODEL_API_KEY and CORRAL_MODEL.
type Config struct {
	BaseURL    string       // e.g. http://127.0.0.1:11434/v1; "" means no provider
	APIKey     string       // may be empty for local providers such as Ollama
	Model      string       // the default model; a Request may name another
	HTTPClient *http.Client // optional
}

// Message is one turn of a conversation.
type Message struct {
	Role       string // system, user, assistant or tool
	Content    string
	ToolCalls  []ToolCall // assistant turns only
	ToolCallID string     // tool turns only: the call this result answers
}

// ToolCall is a function call the model asked for.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON, as the model wrote it: validate before use
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	Parameters  map[string]any // JSON schema of the arguments
}

// Request is one model call.
type Request struct {
	Model    string // "" means Config.Model
	Messages []Message
	Tools    []Tool
}

// Usage is the token count of one call, exactly as the provider reported it.
type Usage struct {
	Input  int64 // prompt_tokens
	Output int64 // completion_tokens
}

// Response is the model's answer to one Request.
type Response struct {
	Message Message // the assistant's reply: content and/or tool calls
	Usage   Usage
	Model   string // the model the provider says answered
}

// Meter is the budget side: Check before a call, Record after, with the
// provider's figures.
type Meter interface {
	// Check refuses a call, for instance when the budget is exhausted. Its
	// error reaches the caller unchanged.
	Check(ctx context.Context) error
	// Record adds the usage of a call that was made. Its error reaches the
	// caller unchanged, together with the Response.
	Record(ctx context.Context, u Usage) error
}

// Gateway makes model calls. It is safe for concurrent use.
type Gateway struct {
	configured bool
	model      string
	chat       openai.ChatCompletionService
	// redact removes the key from text that came from outside. The key is
	// held only inside closures so that printing a Gateway cannot show it.
	redact func(string) string
}

// New returns a Gateway for cfg. A Config without BaseURL gives a Gateway
// whose calls all answer Configured's error.
func New(cfg Config) (*Gateway, error) {
	key := cfg.APIKey
	g := &Gateway{
		model: cfg.Model,
		redact: func(s string) string {
			if key == "" {
				return s
			}
			return strings.ReplaceAll(s, key, "[redacted]")
		},
	}
	if cfg.BaseURL == "" {
		return g, nil
	}
	if err := validBaseURL(cfg.BaseURL); err != nil {
		return nil, err
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(key),
		// Retries belong to the caller, at the model-call boundary, where
		// the budget is checked again.
		option.WithMaxRetries(0),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	// The service, not openai.NewClient: NewClient reads OPENAI_* from the
	// environment, and configuration comes only from Config.
	g.chat = openai.NewChatCompletionService(opts...)
	g.configured = true
	return g, nil
}

func validBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
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

// Complete makes one model call. It asks m.Check first, and returns its
// error unchanged without calling the provider. After the call it hands
// m.Record the provider's usage; a Record error is returned unchanged along
// with the Response. A provider that reports no usage makes the call fail:
// an unmetered call cannot be allowed.
func (g *Gateway) Complete(ctx context.Context, req Request, m Meter) (Response, error) {
	if err := g.Configured(); err != nil {
		return Response{}, err
	}
	model := req.Model
	if model == "" {
		model = g.model
	}
	if model == "" {
		return Response{}, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "no model is named: set CORRAL_MODEL or the agent's model"}
	}
	params, err := buildParams(model, req)
	if err != nil {
		return Response{}, err
	}
	if err := m.Check(ctx); err != nil {
		return Response{}, err
	}

	cc, err := g.chat.New(ctx, params)
	if err != nil {
		return Response{}, g.providerError(ctx, err)
	}
	if !cc.JSON.Usage.Valid() || !cc.Usage.JSON.PromptTokens.Valid() || !cc.Usage.JSON.CompletionTokens.Valid() {
		return Response{}, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "the provider reported no token usage: Corral cannot meter it"}
	}
	usage := Usage{Input: cc.Usage.PromptTokens, Output: cc.Usage.CompletionTokens}
	// The tokens are spent whatever the reply looks like, so they are
	// recorded before the reply is judged.
	recErr := m.Record(ctx, usage)
	if len(cc.Choices) == 0 {
		if recErr != nil {
			return Response{}, recErr
		}
		return Response{}, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "the provider returned no reply"}
	}
	resp := Response{Message: fromOpenAI(cc.Choices[0].Message), Usage: usage, Model: cc.Model}
	if resp.Model == "" {
		resp.Model = model
	}
	return resp, recErr
}

// providerError turns a failed call into EUNAVAIL. The SDK's error holds the
// request, headers included, so it is never wrapped: Err gets a fresh error
// made of safe facts, with the key scrubbed besides.
func (g *Gateway) providerError(ctx context.Context, err error) error {
	e := &corral.Error{Code: corral.EUNAVAIL, Op: "gateway"}
	var apiErr *openai.Error
	switch {
	case ctx.Err() != nil:
		e.Message = "the model call was cancelled"
		e.Err = fmt.Errorf("chat completion: %w", ctx.Err())
	case errors.As(err, &apiErr):
		status := apiErr.StatusCode
		switch status {
		case http.StatusUnauthorized, http.StatusForbidden:
			e.Message = fmt.Sprintf("the model provider refused the credentials (%d): check CORRAL_MODEL_API_KEY", status)
		default:
			e.Message = fmt.Sprintf("the model provider answered %d %s", status, http.StatusText(status))
		}
		text := fmt.Sprintf("chat completion: status %d", status)
		if apiErr.Code != "" {
			text += ", code " + apiErr.Code
		}
		e.Err = errors.New(g.redact(text))
	default:
		e.Message = "the model provider could not be reached"
		e.Err = errors.New(g.redact("chat completion: " + err.Error()))
	}
	return e
}

func buildParams(model string, req Request) (openai.ChatCompletionNewParams, error) {
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

func fromOpenAI(m openai.ChatCompletionMessage) Message {
	out := Message{Role: "assistant", Content: m.Content}
	for _, tc := range m.ToolCalls {
		// Only function tools are offered; anything else (a custom tool
		// call) is dropped rather than passed on half-understood. Some
		// compatible providers omit "type", so the function name decides.
		if tc.Type == "custom" || tc.Function.Name == "" {
			continue
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{
			ID:        tc.ID,
			Name:      tc.Function.Name,
			Arguments: tc.Function.Arguments,
		})
	}
	return out
}
