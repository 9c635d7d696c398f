package protocol

import "encoding/json"

// ParseChat takes a Chat Completions request, which goes upstream as it
// came but for one thing: a streamed call always asks for the usage chunk,
// since metering depends on it.
func ParseChat(body []byte) (Call, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return Call{}, invalid("the request body is not a JSON object")
	}
	c := newCall(Chat, "chatcmpl-")
	if err := jsonField(fields, "model", &c.Model); err != nil {
		return Call{}, err
	}
	if err := jsonField(fields, "stream", &c.Stream); err != nil {
		return Call{}, err
	}
	var msgs []json.RawMessage
	if err := jsonField(fields, "messages", &msgs); err != nil {
		return Call{}, err
	}
	if len(msgs) == 0 {
		return Call{}, invalid("the request has no messages")
	}
	if !c.Stream {
		c.Chat = body
		return c, nil
	}
	var opts map[string]json.RawMessage
	if err := jsonField(fields, "stream_options", &opts); err != nil {
		return Call{}, err
	}
	if opts == nil {
		opts = map[string]json.RawMessage{}
	}
	jsonField(opts, "include_usage", &c.usageAsked)
	opts["include_usage"] = json.RawMessage("true")
	fields["stream_options"], _ = marshal(opts)
	b, err := marshal(fields)
	if err != nil {
		return Call{}, invalid("the request body is not valid JSON")
	}
	c.Chat = b
	return c, nil
}

// jsonField decodes fields[name] into v when it is there and not null.
func jsonField(fields map[string]json.RawMessage, name string, v any) error {
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return invalid("%s has the wrong type", name)
	}
	return nil
}

// chatStreamer passes a Chat stream through as the provider sent it. It
// makes one up only when the provider answered a streamed call whole.
type chatStreamer struct {
	o    *out
	call Call
	a    *answer
	// synth is set when the provider answered a streamed call whole: the
	// stream is then made up from the answer.
	synth bool
}

func (s *chatStreamer) forward(raw []byte) {
	s.o.header("text/event-stream")
	s.o.write(raw)
}

func (s *chatStreamer) start() {}

func (s *chatStreamer) chunk(delta map[string]any, finish any, usage *chatUsage) {
	ch := map[string]any{
		"id": s.a.idOr(s.call), "object": "chat.completion.chunk", "created": s.call.Created, "model": s.a.modelOr(s.call),
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}
	if usage != nil {
		ch["choices"] = []any{}
		ch["usage"] = usage
	}
	s.o.event("", ch)
}

func (s *chatStreamer) text(delta string) {
	if !s.synth {
		return
	}
	s.chunk(map[string]any{"role": "assistant", "content": delta}, nil, nil)
}

func (s *chatStreamer) callStart(c *toolCall) {}

func (s *chatStreamer) callArgs(c *toolCall, delta string) {}

func (s *chatStreamer) end(fail *failure) {
	if !s.synth {
		return // the stream went through as it came
	}
	if len(s.a.calls) > 0 {
		var calls []any
		for _, c := range s.a.calls {
			calls = append(calls, map[string]any{"index": c.index, "id": c.id, "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.arguments()}})
		}
		s.chunk(map[string]any{"role": "assistant", "tool_calls": calls}, nil, nil)
	}
	s.chunk(map[string]any{}, s.a.finishOr("stop"), nil)
	if s.call.usageAsked && s.a.usage != nil {
		s.chunk(nil, nil, s.a.usage)
	}
	s.o.header("text/event-stream")
	s.o.write([]byte("data: [DONE]\n\n"))
}

// completion is a gathered answer as a whole chat completion, for a call
// that did not stream whose provider streamed all the same.
func (a *answer) completion(call Call) map[string]any {
	msg := map[string]any{"role": "assistant", "content": a.text.String()}
	if len(a.calls) > 0 {
		var calls []any
		for _, c := range a.calls {
			calls = append(calls, map[string]any{"id": c.id, "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.arguments()}})
		}
		msg["tool_calls"] = calls
	}
	v := map[string]any{
		"id": a.idOr(call), "object": "chat.completion", "created": call.Created, "model": a.modelOr(call),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": a.finishOr("stop")}},
	}
	if a.usage != nil {
		v["usage"] = a.usage
	}
	return v
}

func (a *answer) idOr(call Call) string {
	if a.id != "" {
		return a.id
	}
	return call.ID
}

// modelOr is the model a Chat answer names: the provider's, as a
// pass-through would show it.
func (a *answer) modelOr(call Call) string {
	if a.model != "" {
		return a.model
	}
	return call.Model
}

func (a *answer) finishOr(def string) string {
	if a.finish != "" {
		return a.finish
	}
	if len(a.calls) > 0 {
		return "tool_calls"
	}
	return def
}
