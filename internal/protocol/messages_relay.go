package protocol

import (
	"encoding/json"
	"fmt"
)

// messagesStreamer writes a Chat Completions stream as Anthropic Messages
// events, with their "event:" lines as Anthropic sends them:
//
//	message_start
//	per block: content_block_start, content_block_delta..., content_block_stop
//	message_delta (stop_reason, usage), message_stop
//
// Text streams as text_delta, a tool call's arguments as input_json_delta,
// split as the provider split them. Anthropic's blocks never interleave,
// while Chat's calls may: the first call streams as it comes and stays open
// to the end, and what comes after it (other calls, text) is written,
// whole, when the answer ends.
type messagesStreamer struct {
	o    *out
	call Call
	a    *answer

	block   int  // the index of the next block
	open    bool // a block is open
	inText  bool // the open block is text
	first   *toolCall
	pending []any // text after the first call, as strings, and later calls
}

func (s *messagesStreamer) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	s.o.event(typ, fields)
}

func (s *messagesStreamer) start() {
	s.emit("message_start", map[string]any{"message": map[string]any{
		"id": s.call.ID, "type": "message", "role": "assistant", "model": s.call.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		// The input is known only when the provider ends: message_delta
		// says it.
		"usage": map[string]any{"input_tokens": 0, "output_tokens": 0},
	}})
}

func (s *messagesStreamer) stopBlock() {
	if !s.open {
		return
	}
	s.emit("content_block_stop", map[string]any{"index": s.block})
	s.block++
	s.open, s.inText = false, false
}

func (s *messagesStreamer) text(delta string) {
	if s.first != nil {
		s.pending = append(s.pending, delta)
		return
	}
	if !s.inText {
		s.stopBlock()
		s.emit("content_block_start", map[string]any{"index": s.block,
			"content_block": map[string]any{"type": "text", "text": ""}})
		s.open, s.inText = true, true
	}
	s.emit("content_block_delta", map[string]any{"index": s.block,
		"delta": map[string]any{"type": "text_delta", "text": delta}})
}

func (s *messagesStreamer) callStart(c *toolCall) {
	if s.first != nil {
		s.pending = append(s.pending, c)
		return
	}
	s.first = c
	s.stopBlock()
	s.startTool(c)
}

func (s *messagesStreamer) startTool(c *toolCall) {
	s.emit("content_block_start", map[string]any{"index": s.block,
		"content_block": map[string]any{"type": "tool_use", "id": c.toolUseID(s.call), "name": c.name, "input": map[string]any{}}})
	s.open = true
}

func (s *messagesStreamer) callArgs(c *toolCall, delta string) {
	if c != s.first {
		return // written whole at the end
	}
	s.jsonDelta(delta)
}

func (s *messagesStreamer) jsonDelta(delta string) {
	s.emit("content_block_delta", map[string]any{"index": s.block,
		"delta": map[string]any{"type": "input_json_delta", "partial_json": delta}})
}

func (s *messagesStreamer) end(fail *failure) {
	if fail != nil {
		// Anthropic's mid-stream error; no message_stop follows it.
		s.stopBlock()
		s.emit("error", map[string]any{"error": map[string]any{"type": streamErrorType(fail), "message": fail.message}})
		return
	}
	s.stopBlock()
	text := ""
	for _, p := range s.pending {
		switch p := p.(type) {
		case string:
			text += p
		case *toolCall:
			s.startTool(p)
			s.jsonDelta(p.arguments())
			s.stopBlock()
		}
	}
	if text != "" {
		s.emit("content_block_start", map[string]any{"index": s.block, "content_block": map[string]any{"type": "text", "text": ""}})
		s.open, s.inText = true, true
		s.emit("content_block_delta", map[string]any{"index": s.block, "delta": map[string]any{"type": "text_delta", "text": text}})
		s.stopBlock()
	}
	t := s.a.tokens(s.call)
	s.emit("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": stopReason(s.a), "stop_sequence": nil},
		"usage": messagesUsage(t),
	})
	s.emit("message_stop", map[string]any{})
}

// streamErrorType is the Anthropic error type of a failure mid-stream.
func streamErrorType(f *failure) string {
	switch f.code {
	case "context_length_exceeded":
		return "invalid_request_error"
	case "rate_limit_exceeded":
		return "rate_limit_error"
	}
	return "api_error"
}

// messagesUsage is the usage in Anthropic's terms: input_tokens leaves out
// what was read from the cache, which OpenAI counts in prompt_tokens.
func messagesUsage(t tokens) map[string]any {
	return map[string]any{
		"input_tokens":                t.input - t.cached,
		"cache_read_input_tokens":     t.cached,
		"cache_creation_input_tokens": 0,
		"output_tokens":               t.output,
	}
}

// stopReason maps Chat's finish_reason. A call is tool_use whatever the
// provider said (some say stop), since Claude Code runs tools on it.
func stopReason(a *answer) string {
	switch {
	case len(a.calls) > 0:
		return "tool_use"
	case a.finish == "length":
		return "max_tokens"
	case a.finish == "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// toolUseID is a call's id, made up when the provider gave none.
func (c *toolCall) toolUseID(call Call) string {
	if c.id != "" {
		return c.id
	}
	return fmt.Sprintf("toolu_%s_%d", call.ID, c.index)
}

// messageObject is a whole answer as a Message.
func messageObject(call Call, a *answer) map[string]any {
	content := []any{}
	if a.text.Len() > 0 {
		content = append(content, map[string]any{"type": "text", "text": a.text.String()})
	}
	for _, c := range a.calls {
		input := json.RawMessage(c.arguments())
		if !json.Valid(input) {
			input = json.RawMessage("{}")
		}
		content = append(content, map[string]any{"type": "tool_use", "id": c.toolUseID(call), "name": c.name, "input": input})
	}
	return map[string]any{
		"id": call.ID, "type": "message", "role": "assistant", "model": call.Model, "content": content,
		"stop_reason": stopReason(a), "stop_sequence": nil, "usage": messagesUsage(a.tokens(call)),
	}
}
