package modeltest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Script decides the reply to a request from the conversation so far. It is
// called once per request, one call at a time, before the reply is sent. It
// should not block: a Reply with Block holds the answer instead. A script may
// signal a channel to tell a test that the request arrived.
type Script func(req Request) Reply

// Reply is what the fake model answers to one request.
type Reply struct {
	Content   string
	ToolCalls []ToolCall // a call without an ID is given one
	Model     string     // the model the reply says answered; "" is the requested one

	// Usage is reported as given; nil reports DefaultInputTokens and
	// DefaultOutputTokens. A stream reports it only when the request set
	// stream_options.include_usage.
	Usage *Usage
	// NoUsage leaves the usage out, as some providers do.
	NoUsage bool

	// Status, when not zero, answers this HTTP status instead of a
	// completion, with Body as the response body ("" gives an OpenAI-style
	// error object). Status 200 with a Body sends that body as it is, for a
	// reply no script field can describe.
	Status int
	Body   string
	// Header is added to the answer's headers, e.g. Retry-After.
	Header http.Header

	// StreamError makes a streamed reply end, after its text and tool calls,
	// with an SSE error event carrying this message instead of finishing. A
	// whole reply answers 500 with it.
	StreamError string

	// Block, when not nil, holds the reply until it is closed (or receives),
	// the client goes away or the provider is closed. A streamed reply is
	// held after the role chunk and the first piece of text, in the middle
	// of the stream; any other is held before anything is sent.
	Block <-chan struct{}
}

// Usage is a reply's token count.
type Usage struct {
	Input  int64 // prompt_tokens
	Output int64 // completion_tokens
}

// The usage a Reply without one reports.
const (
	DefaultInputTokens  = 10
	DefaultOutputTokens = 5
)

// ToolCall is a function call the fake model makes, or one a request's
// assistant turn carries.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON
}

// Text is a reply that says content.
func Text(content string) Reply { return Reply{Content: content} }

// Calls is a reply that asks for calls.
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// RateLimited is a 429 answer with an OpenAI-style rate-limit error and,
// unless retryAfter is "", that Retry-After header (seconds or an HTTP
// date), as providers answer when a key's rate is spent.
func RateLimited(retryAfter string) Reply {
	r := Reply{Status: http.StatusTooManyRequests,
		Body: `{"error":{"message":"modeltest: rate limit reached, try again later","type":"requests","code":"rate_limit_exceeded"}}`}
	if retryAfter != "" {
		r.Header = http.Header{"Retry-After": {retryAfter}}
	}
	return r
}

// Sequence answers the n-th request with the n-th reply, and every request
// after the last with the last. With no replies, every request fails with
// 500, so an unexpected model call shows.
func Sequence(replies ...Reply) Script {
	var (
		mu sync.Mutex
		n  int
	)
	return func(Request) Reply {
		if len(replies) == 0 {
			return Reply{Status: http.StatusInternalServerError,
				Body: `{"error":{"message":"modeltest: no reply is scripted","type":"modeltest_error","code":null}}`}
		}
		mu.Lock()
		defer mu.Unlock()
		r := replies[min(n, len(replies)-1)]
		n++
		return r
	}
}

// Last returns the last message of the conversation, or a zero Message.
func (r Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastToolResults returns the tool results that end the conversation: the
// answers to the model's latest tool calls, in order. It is empty when the
// conversation does not end with tool results.
func (r Request) LastToolResults() []Message {
	i := len(r.Messages)
	for i > 0 && r.Messages[i-1].Role == "tool" {
		i--
	}
	return append([]Message(nil), r.Messages[i:]...)
}

// CountRole returns how many messages of the conversation have role.
func (r Request) CountRole(role string) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == role {
			n++
		}
	}
	return n
}

// ShellCall is a call of the agent's shell tool.
func ShellCall(id, command string) ToolCall {
	return call(id, "shell", map[string]string{"command": command})
}

// ReadCall is a call of the agent's read_file tool.
func ReadCall(id, path string) ToolCall {
	return call(id, "read_file", map[string]string{"path": path})
}

// WriteCall is a call of the agent's write_file tool.
func WriteCall(id, path, content string) ToolCall {
	return call(id, "write_file", map[string]string{"path": path, "content": content})
}

// ListCall is a call of the agent's list_files tool.
func ListCall(id, path string) ToolCall {
	return call(id, "list_files", map[string]string{"path": path})
}

// call encodes args as a model writes them: "ls > out", not "ls \u003e out".
func call(id, name string, args map[string]string) ToolCall {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		panic(err) // a map of strings always encodes
	}
	return ToolCall{ID: id, Name: name, Arguments: strings.TrimSuffix(b.String(), "\n")}
}
