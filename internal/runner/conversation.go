package runner

import (
	"encoding/json"
	"fmt"

	"corral"
)

// checkpointVersion is the format of a stored conversation.
const checkpointVersion = 1

// turn is one message of a conversation as a checkpoint stores it.
type turn struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type checkpoint struct {
	Version int    `json:"version"`
	Turns   []turn `json:"turns"`
}

// conversation is what a run sends the model after the system prompt:
// earlier runs' turns, this run's message, and everything since.
type conversation []corral.ModelMessage

func (c conversation) encode() ([]byte, error) {
	cp := checkpoint{Version: checkpointVersion, Turns: make([]turn, 0, len(c))}
	for _, m := range c {
		t := turn{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			t.ToolCalls = append(t.ToolCalls, toolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		cp.Turns = append(cp.Turns, t)
	}
	return json.Marshal(cp)
}

func decodeConversation(b []byte) (conversation, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if cp.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint: version %d", cp.Version)
	}
	c := make(conversation, 0, len(cp.Turns))
	for _, t := range cp.Turns {
		m := corral.ModelMessage{Role: t.Role, Content: t.Content, ToolCallID: t.ToolCallID}
		for _, tc := range t.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, corral.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		c = append(c, m)
	}
	return c, nil
}

// interrupted is the tool result given for a call whose run ended before it
// answered, so the conversation stays well-formed for the next run.
const interrupted = `{"error": "the run ended before this tool call finished; it may have partly run"}`

// repair makes a conversation valid to send again: every tool call gets a
// result (an interrupted one gets interrupted), and results with no call are
// dropped.
func (c conversation) repair() conversation {
	out := make(conversation, 0, len(c))
	var open []string // ids of the last assistant turn's calls not yet answered
	closeOpen := func() {
		for _, id := range open {
			out = append(out, corral.ModelMessage{Role: "tool", ToolCallID: id, Content: interrupted})
		}
		open = nil
	}
	for _, m := range c {
		if m.Role == "tool" {
			i := indexOf(open, m.ToolCallID)
			if i < 0 {
				continue
			}
			open = append(open[:i], open[i+1:]...)
			out = append(out, m)
			continue
		}
		closeOpen()
		out = append(out, m)
		if m.Role == "assistant" {
			for _, tc := range m.ToolCalls {
				open = append(open, tc.ID)
			}
		}
	}
	closeOpen()
	return out
}

func indexOf(ids []string, id string) int {
	for i, v := range ids {
		if v == id {
			return i
		}
	}
	return -1
}

// size is the number of bytes of text in the conversation.
func (c conversation) size() int {
	n := 0
	for _, m := range c {
		n += len(m.Content)
		for _, tc := range m.ToolCalls {
			n += len(tc.Arguments) + len(tc.Name)
		}
	}
	return n
}

// trim drops the oldest exchanges until the conversation fits in max bytes.
// It cuts only before a user turn, so no tool result loses its call; the
// newest exchange is always kept.
func (c conversation) trim(max int) conversation {
	for c.size() > max {
		next := -1
		for i := 1; i < len(c); i++ {
			if c[i].Role == "user" {
				next = i
				break
			}
		}
		if next < 0 {
			return c
		}
		c = c[next:]
	}
	return c
}

// open finds the last assistant turn whose tool calls do not all have
// results after it (the results that are there come in the calls' order),
// and returns its index.
func (c conversation) open() (int, bool) {
	for i := len(c) - 1; i >= 0; i-- {
		if c[i].Role != "assistant" {
			if c[i].Role == "tool" {
				continue
			}
			return 0, false
		}
		answered := len(c) - 1 - i
		return i, len(c[i].ToolCalls) > answered
	}
	return 0, false
}

// requestSize is the bytes a model request carries, for estimates.
func requestSize(req corral.ModelRequest) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)
		for _, tc := range m.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments)
		}
	}
	return n
}
