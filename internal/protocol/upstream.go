package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
)

// The provider's side of a relay: its stream read event by event, and its
// answer gathered as it comes.

func isSSE(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// sseReader reads server-sent events. It keeps each event's raw bytes, for
// the Chat pass-through, and its data.
type sseReader struct {
	r *bufio.Reader
}

type sseEvent struct {
	raw  []byte // the event's lines, blank line included
	data []byte // its data lines joined, nil when it has none
	done bool   // data: [DONE]
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next event; io.EOF at the end of the stream, also when
// it ends mid-event.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.r.ReadBytes('\n')
		if len(line) > 0 {
			ev.raw = append(ev.raw, line...)
		}
		if err != nil {
			if len(bytes.TrimSpace(ev.raw)) > 0 && errors.Is(err, io.EOF) {
				// The last event had no blank line after it: take it.
				s.parse(&ev, line)
				return ev, nil
			}
			return sseEvent{}, err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			if len(bytes.TrimSpace(ev.raw)) == 0 {
				ev.raw = nil
				continue
			}
			return ev, nil
		}
		s.parse(&ev, line)
	}
}

func (s *sseReader) parse(ev *sseEvent, line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	v, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return // event:, id:, retry: and comments carry nothing Relay needs
	}
	v = bytes.TrimPrefix(v, []byte(" "))
	if ev.data != nil {
		ev.data = append(ev.data, '\n')
	}
	ev.data = append(ev.data, v...)
	ev.done = string(bytes.TrimSpace(ev.data)) == "[DONE]"
}

type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int       `json:"index"`
		Delta        chatDelta `json:"delta"`
		FinishReason *string   `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage     `json:"usage"`
	Error *providerError `json:"error"`
}

type chatDelta struct {
	Content   *string         `json:"content"`
	Refusal   *string         `json:"refusal"`
	ToolCalls []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
}

func (u *chatUsage) cached() int64 {
	if u == nil || u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

func (u *chatUsage) reasoning() int64 {
	if u == nil || u.CompletionTokensDetails == nil {
		return 0
	}
	return u.CompletionTokensDetails.ReasoningTokens
}

type chatCompletion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

// providerError is the error object of OpenAI-compatible providers.
type providerError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"` // a string at OpenAI, a number at some others
	Param   any    `json:"param"`
}

func (e *providerError) code() string {
	if s, ok := e.Code.(string); ok {
		return s
	}
	return ""
}

func (e *providerError) failure() *failure {
	f := &failure{code: e.code(), message: e.Message}
	if f.code == "" {
		f.code = "server_error"
	}
	if f.message == "" {
		f.message = "the model provider failed mid-answer"
	}
	return f
}

// answer gathers the provider's answer as it comes, for the whole answers,
// the usage, and the estimate when no usage came.
type answer struct {
	id, model string
	text      strings.Builder
	calls     []*toolCall
	finish    string
	usage     *chatUsage
	bytes     int // of text and arguments, for the estimate
}

// toolCall is one tool call of the answer. started is whether its name is
// known and its start was written.
type toolCall struct {
	index   int // its position among the answer's calls
	chatIdx int // the index the provider gave it
	id      string
	name    string
	args    strings.Builder
	started bool
}

func newAnswer() *answer { return &answer{} }

// add takes one chunk in, and hands what is new to t (nil when gathering).
func (a *answer) add(ch *chatChunk, t streamer) {
	if a.id == "" {
		a.id = ch.ID
	}
	if ch.Model != "" {
		a.model = ch.Model
	}
	if ch.Usage != nil {
		a.usage = ch.Usage
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // one answer is asked for; others are not the client's
		}
		for _, s := range []*string{c.Delta.Content, c.Delta.Refusal} {
			if s != nil && *s != "" {
				a.addText(*s, t)
			}
		}
		for _, d := range c.Delta.ToolCalls {
			a.addCall(d, t)
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			a.finish = *c.FinishReason
		}
	}
}

func (a *answer) addText(s string, t streamer) {
	a.text.WriteString(s)
	a.bytes += len(s)
	if t != nil {
		t.text(s)
	}
}

// addCall takes a tool call delta. A call is known by its index, and a
// delta with no index (some providers give none) continues the last call
// unless it brings an id. A new id at an index in use is a new call all
// the same: some providers send every call whole at index 0.
func (a *answer) addCall(d toolCallDelta, t streamer) {
	var c *toolCall
	if d.Index != nil {
		for _, k := range a.calls {
			if k.chatIdx == *d.Index {
				c = k
			}
		}
	} else if d.ID == "" && len(a.calls) > 0 {
		c = a.calls[len(a.calls)-1]
	}
	if c != nil && d.ID != "" && c.id != "" && c.id != d.ID {
		c.chatIdx = -1 // retired: its index is the new call's now
		c = nil
	}
	if c == nil {
		c = &toolCall{index: len(a.calls), chatIdx: -1}
		if d.Index != nil {
			c.chatIdx = *d.Index
		}
		a.calls = append(a.calls, c)
	}
	if c.id == "" {
		c.id = d.ID
	}
	if c.name == "" {
		// The name comes whole, in the first delta; some providers
		// repeat it in every one.
		c.name = d.Function.Name
	}
	args := d.Function.Arguments
	c.args.WriteString(args)
	a.bytes += len(args)
	if t == nil {
		return
	}
	if !c.started && c.name != "" {
		c.started = true
		t.callStart(c)
		if c.args.Len() > len(args) {
			// Arguments that came before the name.
			t.callArgs(c, strings.TrimSuffix(c.args.String(), args))
		}
	}
	if c.started && args != "" {
		t.callArgs(c, args)
	}
}

// fromCompletion takes a whole completion in, as one chunk each of text
// and calls.
func (a *answer) fromCompletion(comp *chatCompletion, t streamer) {
	a.id, a.model, a.usage = comp.ID, comp.Model, comp.Usage
	if len(comp.Choices) == 0 {
		return
	}
	ch := comp.Choices[0]
	for _, s := range []*string{ch.Message.Content, ch.Message.Refusal} {
		if s != nil && *s != "" {
			a.addText(*s, t)
		}
	}
	for i, tc := range ch.Message.ToolCalls {
		i := i
		d := toolCallDelta{Index: &i, ID: tc.ID}
		d.Function.Name, d.Function.Arguments = tc.Function.Name, tc.Function.Arguments
		a.addCall(d, t)
	}
	a.finish = ch.FinishReason
}

// usageFor is the call's usage: the provider's, or the estimate.
func (a *answer) usageFor(call Call) Usage {
	if a.usage != nil {
		return Usage{Input: a.usage.PromptTokens, Output: a.usage.CompletionTokens}
	}
	return Usage{Input: estimate(len(call.Chat)), Output: estimate(a.bytes), Estimated: true}
}

// tokens are the usage figures a translated answer reports: the provider's
// or the estimate.
type tokens struct {
	input, output, cached, reasoning int64
}

func (a *answer) tokens(call Call) tokens {
	u := a.usageFor(call)
	return tokens{input: u.Input, output: u.Output, cached: a.usage.cached(), reasoning: a.usage.reasoning()}
}

// arguments is a call's arguments, "{}" when the provider sent none.
func (c *toolCall) arguments() string {
	if c.args.Len() == 0 {
		return "{}"
	}
	return c.args.String()
}
