package protocol

import (
	"encoding/json"
	"fmt"
)

// responsesStreamer writes a Chat Completions stream as Responses API
// events, the ones Codex reads and in the order OpenAI sends them:
//
//	response.created, response.in_progress
//	per message: output_item.added, content_part.added,
//	  output_text.delta..., output_text.done, content_part.done, output_item.done
//	per call: output_item.added, function_call_arguments.delta...,
//	  function_call_arguments.done, output_item.done
//	response.completed (response.incomplete at the length limit,
//	  response.failed on an error), with the usage
//
// Codex acts on output_item.done (the whole item) and needs the final
// event: a stream without response.completed is retried as broken. Every
// event has a sequence_number. Calls may interleave, as Chat's indexes
// allow; each call's item stays open until the answer ends.
type responsesStreamer struct {
	o    *out
	call Call
	a    *answer
	seq  int

	output []map[string]any // the items, by output_index, for the final response
	msg    *openMessage     // the message being written, if any
	items  map[*toolCall]int
}

type openMessage struct {
	index int
	id    string
	text  string
}

func (s *responsesStreamer) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	s.o.event(typ, fields)
}

func (s *responsesStreamer) start() {
	r := responseObject(s.call, s.a, "in_progress", nil)
	r["output"] = []any{}
	r["usage"] = nil
	s.emit("response.created", map[string]any{"response": r})
	s.emit("response.in_progress", map[string]any{"response": r})
}

func (s *responsesStreamer) itemID(prefix string, index int) string {
	return fmt.Sprintf("%s_%s_%d", prefix, s.call.ID, index)
}

func (s *responsesStreamer) text(delta string) {
	if s.msg == nil {
		s.msg = &openMessage{index: len(s.output)}
		s.msg.id = s.itemID("msg", s.msg.index)
		s.output = append(s.output, nil)
		s.emit("response.output_item.added", map[string]any{"output_index": s.msg.index,
			"item": map[string]any{"id": s.msg.id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
		s.emit("response.content_part.added", map[string]any{"item_id": s.msg.id, "output_index": s.msg.index,
			"content_index": 0, "part": textPart("")})
	}
	s.msg.text += delta
	s.emit("response.output_text.delta", map[string]any{"item_id": s.msg.id, "output_index": s.msg.index,
		"content_index": 0, "delta": delta, "logprobs": []any{}})
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

// closeMessage ends the message being written: text that comes after a
// call is a message of its own.
func (s *responsesStreamer) closeMessage() {
	m := s.msg
	if m == nil {
		return
	}
	s.msg = nil
	s.emit("response.output_text.done", map[string]any{"item_id": m.id, "output_index": m.index,
		"content_index": 0, "text": m.text, "logprobs": []any{}})
	s.emit("response.content_part.done", map[string]any{"item_id": m.id, "output_index": m.index,
		"content_index": 0, "part": textPart(m.text)})
	item := messageItem(m.id, m.text)
	s.output[m.index] = item
	s.emit("response.output_item.done", map[string]any{"output_index": m.index, "item": item})
}

func messageItem(id, text string) map[string]any {
	return map[string]any{"id": id, "type": "message", "status": "completed", "role": "assistant",
		"content": []any{textPart(text)}}
}

func (s *responsesStreamer) callStart(c *toolCall) {
	s.closeMessage()
	if s.items == nil {
		s.items = map[*toolCall]int{}
	}
	idx := len(s.output)
	s.items[c] = idx
	s.output = append(s.output, nil)
	item := callItem(s.call, c, s.itemID("fc", idx), "in_progress", "")
	s.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
}

func (s *responsesStreamer) callArgs(c *toolCall, delta string) {
	idx := s.items[c]
	if s.call.tools[c.name].custom {
		return // its input is known whole only at the end, out of its arguments
	}
	s.emit("response.function_call_arguments.delta", map[string]any{"item_id": s.itemID("fc", idx),
		"output_index": idx, "delta": delta})
}

func (s *responsesStreamer) end(fail *failure) {
	s.closeMessage()
	for _, c := range s.a.calls {
		idx, ok := s.items[c]
		if !ok {
			continue // a call that never got a name is no call
		}
		id := s.itemID("fc", idx)
		item := callItem(s.call, c, id, "completed", c.arguments())
		if item["type"] == "function_call" {
			s.emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx,
				"name": item["name"], "arguments": c.arguments()})
		}
		s.output[idx] = item
		s.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
	}
	output := []any{}
	for _, it := range s.output {
		if it != nil {
			output = append(output, it)
		}
	}
	status, event := "completed", "response.completed"
	var incomplete map[string]any
	switch {
	case fail != nil:
		status, event = "failed", "response.failed"
	case s.a.finish == "length":
		status, event = "incomplete", "response.incomplete"
		incomplete = map[string]any{"reason": "max_output_tokens"}
	case s.a.finish == "content_filter":
		status, event = "incomplete", "response.incomplete"
		incomplete = map[string]any{"reason": "content_filter"}
	}
	r := responseObject(s.call, s.a, status, fail)
	r["output"] = output
	r["incomplete_details"] = incomplete
	s.emit(event, map[string]any{"response": r})
}

// callItem is a tool call as a Responses output item: a function_call,
// with its namespace apart when it had one, or a custom_tool_call.
func callItem(call Call, c *toolCall, id, status, args string) map[string]any {
	ref, mapped := call.tools[c.name]
	if mapped && ref.custom {
		var in struct {
			Input string `json:"input"`
		}
		input := args
		if json.Unmarshal([]byte(args), &in) == nil && in.Input != "" {
			input = in.Input
		}
		return map[string]any{"id": id, "type": "custom_tool_call", "status": status, "call_id": c.callID(call), "name": ref.name, "input": input}
	}
	item := map[string]any{"id": id, "type": "function_call", "status": status, "call_id": c.callID(call), "name": c.name, "arguments": args}
	if mapped && ref.namespace != "" {
		item["name"] = ref.name
		item["namespace"] = ref.namespace
	}
	return item
}

// callID is a call's id, made up when the provider gave none (some do not):
// the client echoes it back with the result.
func (c *toolCall) callID(call Call) string {
	if c.id != "" {
		return c.id
	}
	return fmt.Sprintf("call_%s_%d", call.ID, c.index)
}

// responseObject is the Response of a call as far as the answer has come.
func responseObject(call Call, a *answer, status string, fail *failure) map[string]any {
	r := map[string]any{
		"id": call.ID, "object": "response", "created_at": call.Created, "status": status,
		"model": call.Model, "output": []any{}, "error": nil, "incomplete_details": nil,
	}
	if fail != nil {
		r["error"] = map[string]any{"code": fail.code, "message": fail.message}
	}
	if status == "in_progress" {
		return r
	}
	t := a.tokens(call)
	r["usage"] = map[string]any{
		"input_tokens":          t.input,
		"input_tokens_details":  map[string]any{"cached_tokens": t.cached},
		"output_tokens":         t.output,
		"output_tokens_details": map[string]any{"reasoning_tokens": t.reasoning},
		"total_tokens":          t.input + t.output,
	}
	return r
}

// wholeResponse is a whole answer as a Response: its text first, then its
// calls.
func wholeResponse(call Call, a *answer) map[string]any {
	status := "completed"
	var incomplete map[string]any
	switch a.finish {
	case "length":
		status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
	case "content_filter":
		status, incomplete = "incomplete", map[string]any{"reason": "content_filter"}
	}
	r := responseObject(call, a, status, nil)
	output := []any{}
	if a.text.Len() > 0 {
		output = append(output, messageItem(fmt.Sprintf("msg_%s_0", call.ID), a.text.String()))
	}
	for _, c := range a.calls {
		if c.name != "" {
			output = append(output, callItem(call, c, fmt.Sprintf("fc_%s_%d", call.ID, len(output)), "completed", c.arguments()))
		}
	}
	r["output"] = output
	r["incomplete_details"] = incomplete
	return r
}
