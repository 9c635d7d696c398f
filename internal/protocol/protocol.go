// Package protocol translates the model protocols that agent CLIs speak into
// the one Corral's provider speaks, and the provider's answers back.
//
// Corral's gateway talks to one upstream provider that speaks OpenAI Chat
// Completions only (OpenAI, vLLM, Ollama, any compatible endpoint), while
// the CLIs run inside the sandbox speak three protocols: OpenCode speaks
// Chat Completions itself, Codex only the OpenAI Responses API, and Claude
// Code only Anthropic Messages. A client request becomes a Call (ParseChat,
// ParseResponses, ParseMessages): the Chat Completions body to send upstream
// and what the way back needs. Relay then writes the provider's answer in the
// client's protocol, streamed event by event or whole, and returns the usage
// the provider reported, so that every call is metered, whether it completed,
// failed, or was abandoned by its client half way.
//
// The package is pure translation: no routing, tokens, budgets or keys. It
// never sends anything upstream itself, and what it cannot translate is
// never dropped silently: Call.Dropped names it for the trace.
package protocol

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"corral"
)

// Protocol is a client's wire protocol.
type Protocol int

const (
	Chat      Protocol = iota // OpenAI Chat Completions, POST /v1/chat/completions
	Responses                 // OpenAI Responses API, POST /v1/responses
	Messages                  // Anthropic Messages, POST /v1/messages
)

func (p Protocol) String() string {
	switch p {
	case Chat:
		return "chat"
	case Responses:
		return "responses"
	case Messages:
		return "messages"
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// Call is one client request, made into the Chat Completions request to send
// upstream.
type Call struct {
	Protocol Protocol
	Model    string // the model the client named; translated answers name it back
	Stream   bool

	// Chat is the Chat Completions JSON body to send upstream, with the model
	// as the client named it (the gateway may replace it). When Stream, it
	// always asks for "stream_options": {"include_usage": true}: without the
	// usage chunk a streamed call could not be metered.
	Chat []byte

	// Dropped names what could not be sent upstream and was left out ("tool
	// web_search", "reasoning item", "param thinking"), once each, in the
	// order met, for a trace note.
	Dropped []string

	// ID is the id of the answer in the client's protocol (resp_…, msg_…)
	// and Created its creation time in Unix seconds. Parse sets a random id
	// and the current time; tests set fixed ones.
	ID      string
	Created int64

	// tools maps a Chat function name back to the Responses tool it stands
	// for, when they differ: a function of a namespace (flattened to
	// "namespace__name") or a custom tool (a function of one string).
	tools map[string]toolRef
	// usageAsked is whether a Chat client asked for the usage chunk itself;
	// when it did not, the chunk Corral asked for is not forwarded.
	usageAsked bool
}

// toolRef is the Responses tool a Chat function stands for.
type toolRef struct {
	namespace string // "" for a top-level tool
	name      string
	custom    bool // a custom (freeform) tool: the function's one argument is its input
}

// Usage is what the provider reported for a call. When it reported nothing
// (the stream broke, or the provider sends no usage chunk) Estimated is true
// and Input and Output are estimates, one token per four bytes of the
// request body and of the answer's text and arguments, so that a call is
// never metered at zero.
type Usage struct {
	Input, Output int64
	Estimated     bool
}

// Result is how a relay went.
type Result struct {
	Usage      Usage
	Model      string // the model the provider says answered ("" if it did not say)
	Finish     string // why the answer ended, as the provider said (its finish_reason)
	Status     int    // the upstream status
	ClientGone bool   // the client went away before the answer was written whole
	Err        error  // what went wrong, for the log; nil when all went well
}

// newCall starts a Call with a fresh id in the protocol's style.
func newCall(p Protocol, prefix string) Call {
	var b [12]byte
	rand.Read(b[:])
	return Call{Protocol: p, ID: prefix + hex.EncodeToString(b[:]), Created: time.Now().Unix()}
}

// drop notes something left out, once.
func (c *Call) drop(what string) {
	for _, d := range c.Dropped {
		if d == what {
			return
		}
	}
	c.Dropped = append(c.Dropped, what)
}

// invalid is the error of a request the client got wrong.
func invalid(format string, args ...any) error {
	return corral.Errorf(corral.EINVALID, format, args...)
}

// marshal is json.Marshal that leaves <, > and & as they are: what goes
// upstream and back to the client keeps the bytes the model and the
// client wrote (a shell command's "> file", a patch's "<<").
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// decodeError says what is wrong with a request body json could not
// decode, in the client's terms (its field, not a Go type).
func decodeError(what string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return invalid("the request is not %s: %s must not be a JSON %s", what, te.Field, te.Value)
	}
	return invalid("the request body is not %s in valid JSON", what)
}

// estimate is the token estimate of n bytes: one token per four bytes,
// rounded up, at least one. Real tokenizers average three to four bytes
// per token on English and code, so this errs on the side of metering.
func estimate(n int) int64 {
	if n <= 0 {
		return 1
	}
	return int64((n + 3) / 4)
}

// --- the Chat Completions request, as sent upstream ---

type chatRequest struct {
	Model             string          `json:"model"`
	Messages          []chatMessage   `json:"messages"`
	Tools             []chatTool      `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens         *int64          `json:"max_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	Stop              []string        `json:"stop,omitempty"`
	ResponseFormat    json.RawMessage `json:"response_format,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     *streamOptions  `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"` // a string, or []chatPart when there are images
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string        `json:"type"` // text or image_url
	Text     string        `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string      `json:"type"`
	Function chatToolDef `json:"function"`
}

type chatToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// content makes a Chat message content from parts: one string when all
// are text (what every provider accepts, for every role), parts otherwise.
func content(parts []chatPart) any {
	text, images := "", false
	for i, p := range parts {
		if p.Type != "text" {
			images = true
			break
		}
		if i > 0 {
			text += "\n"
		}
		text += p.Text
	}
	if images {
		return parts
	}
	return text
}

// mergeSystem folds the system messages that come before the first
// assistant turn into one, first: many models' chat templates take a
// single system message, at the start, and Claude Code and Codex both send
// more (Claude Code one after the user's first message).
func mergeSystem(msgs []chatMessage) []chatMessage {
	var system []string
	var rest []chatMessage
	for i, m := range msgs {
		if m.Role == "assistant" {
			rest = append(rest, msgs[i:]...)
			break
		}
		if s, ok := m.Content.(string); ok && m.Role == "system" {
			system = append(system, s)
			continue
		}
		rest = append(rest, m)
	}
	if len(system) == 0 {
		return msgs
	}
	return append([]chatMessage{{Role: "system", Content: strings.Join(system, "\n\n")}}, rest...)
}

// finish completes a Call from the request: the stream options forced on
// and the body encoded.
func (c *Call) finish(req *chatRequest) (Call, error) {
	req.Model = c.Model
	req.Messages = mergeSystem(req.Messages)
	if len(req.Messages) == 0 {
		return Call{}, invalid("the request has no messages")
	}
	if c.Stream {
		req.Stream = true
		req.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	b, err := marshal(req)
	if err != nil {
		return Call{}, corral.Internal("protocol", err)
	}
	c.Chat = b
	return *c, nil
}
