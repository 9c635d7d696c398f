package protocol

import (
	"encoding/json"

	"corral"
)

// CountTokens answers POST /v1/messages/count_tokens: {"input_tokens": N}.
// N is an estimate, one token per four bytes of the Chat Completions request
// the call would become (its messages and tools as JSON): no provider
// counts tokens for Chat Completions, and a count on the high side only
// makes Claude Code compact its context a little early.
func CountTokens(body []byte) ([]byte, error) {
	c, err := ParseMessages(body)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(map[string]int64{"input_tokens": estimate(len(c.Chat))})
	if err != nil {
		return nil, corral.Internal("protocol", err)
	}
	return b, nil
}

// Models answers GET /v1/models for a list of model names, in OpenAI's
// shape ({"object": "list", "data": [{"id", "object": "model", ...}]}) or,
// for Messages, in Anthropic's ({"data": [{"type": "model", "id",
// "display_name", "created_at"}], "has_more", "first_id", "last_id"}).
func Models(p Protocol, names []string) []byte {
	data := []any{}
	for _, n := range names {
		if p == Messages {
			data = append(data, map[string]any{"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"})
		} else {
			data = append(data, map[string]any{"id": n, "object": "model", "created": 0, "owned_by": "corral"})
		}
	}
	v := map[string]any{"object": "list", "data": data}
	if p == Messages {
		v = map[string]any{"data": data, "has_more": false, "first_id": nil, "last_id": nil}
		if len(names) > 0 {
			v["first_id"], v["last_id"] = names[0], names[len(names)-1]
		}
	}
	b, _ := marshal(v)
	return b
}
