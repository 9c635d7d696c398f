package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Anthropic Messages, as Claude Code sends it: POST /v1/messages with the
// system prompt apart, content blocks, tool_use and tool_result blocks, and
// tools with an input_schema.

type messagesRequest struct {
	Model      string            `json:"model"`
	System     json.RawMessage   `json:"system"`
	Messages   []messagesMessage `json:"messages"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	MaxTokens     *int64   `json:"max_tokens"`
	StopSequences []string `json:"stop_sequences"`
	Temperature   *float64 `json:"temperature"`
	TopP          *float64 `json:"top_p"`
	TopK          *int64   `json:"top_k"`
	Stream        bool     `json:"stream"`
	Thinking      *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	OutputConfig *struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
	// metadata and context_management (which clears thinking blocks,
	// dropped here anyway) change nothing in a Chat answer: they are left
	// out without a note.
}

type messagesMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messagesBlock is one content block; which fields are set depends on Type.
type messagesBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    *imageSource    `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	ToolName  string          `json:"tool_name"` // tool_reference
}

type imageSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type messagesTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	DeferLoading bool            `json:"defer_loading"`
}

// ParseMessages makes an Anthropic Messages request into a Chat
// Completions one.
func ParseMessages(body []byte) (Call, error) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Call{}, decodeError("a Messages request", err)
	}
	c := newCall(Messages, "msg_")
	c.Model, c.Stream = req.Model, req.Stream
	out := chatRequest{MaxTokens: req.MaxTokens, Stop: req.StopSequences, Temperature: req.Temperature, TopP: req.TopP}
	if req.TopK != nil {
		c.drop("param top_k")
	}
	if req.Thinking != nil && req.Thinking.Type != "" && req.Thinking.Type != "disabled" {
		c.drop("param thinking")
	}
	if req.OutputConfig != nil && req.OutputConfig.Effort != "" {
		c.drop("param output_config.effort")
	}
	system, err := c.messagesText("system", req.System)
	if err != nil {
		return Call{}, err
	}
	if system != "" {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: system})
	}
	referenced := map[string]bool{}
	for i, m := range req.Messages {
		msgs, err := c.messagesMessage(i, m, referenced)
		if err != nil {
			return Call{}, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	for _, raw := range req.Tools {
		if t, ok := c.messagesTool(raw, referenced); ok {
			out.Tools = append(out.Tools, t)
		}
	}
	if len(out.Tools) > 0 && req.ToolChoice != nil {
		switch tc := req.ToolChoice; tc.Type {
		case "auto", "":
			out.ToolChoice = "auto"
		case "any":
			out.ToolChoice = "required"
		case "none":
			out.ToolChoice = "none"
		case "tool":
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		default:
			c.drop("tool_choice " + tc.Type)
		}
		if tc := req.ToolChoice; tc.DisableParallelToolUse {
			f := false
			out.ParallelToolCalls = &f
		}
	}
	return c.finish(&out)
}

// messagesText reads a string or a list of text blocks, as the system
// prompt is.
func (c *Call) messagesText(field string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []messagesBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", invalid("%s must be a string or a list of text blocks", field)
	}
	var texts []string
	for _, b := range blocks {
		if b.Type != "text" {
			c.drop(field + " block " + b.Type)
			continue
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// messagesMessage makes one message into Chat messages. A user message's
// tool_result blocks become tool messages, first (Chat wants them right
// after the assistant's calls), then its other blocks one user message; an
// assistant message's tool_use blocks become its tool calls.
func (c *Call) messagesMessage(i int, m messagesMessage, referenced map[string]bool) ([]chatMessage, error) {
	switch m.Role {
	case "user", "assistant", "system":
	default:
		return nil, invalid("messages[%d] has an unknown role %q", i, m.Role)
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []chatMessage{{Role: m.Role, Content: s}}, nil
	}
	var blocks []messagesBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, invalid("messages[%d].content must be a string or a list of blocks", i)
	}
	var tools []chatMessage
	var parts []chatPart
	var calls []chatToolCall
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, chatPart{Type: "text", Text: b.Text})
		case "image":
			switch u := dataURL(b.Source); {
			case m.Role != "user":
				c.drop("image not from the user") // Chat takes images from the user only
			case u == "":
				c.drop("image without data or a URL")
			default:
				parts = append(parts, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: u}})
			}
		case "tool_use":
			args := "{}"
			var compact bytes.Buffer
			if json.Compact(&compact, b.Input) == nil && compact.String() != "null" {
				args = compact.String()
			}
			calls = append(calls, chatToolCall{ID: b.ID, Type: "function", Function: chatFunction{Name: b.Name, Arguments: args}})
		case "tool_result":
			text := c.toolResult(b.Content, referenced)
			if b.IsError {
				// Chat has no flag for a failed tool: say it in words.
				text = "Error: " + text
			}
			tools = append(tools, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: text})
		case "thinking", "redacted_thinking":
			c.drop("thinking block")
		default:
			c.drop("content " + b.Type)
		}
	}
	if m.Role != "user" && len(tools) > 0 {
		return nil, invalid("messages[%d]: tool_result blocks belong in a user message", i)
	}
	out := tools
	if len(parts) > 0 || len(calls) > 0 {
		msg := chatMessage{Role: m.Role, Content: content(parts), ToolCalls: calls}
		if m.Role != "assistant" && len(calls) > 0 {
			return nil, invalid("messages[%d]: tool_use blocks belong in an assistant message", i)
		}
		out = append(out, msg)
	}
	if len(out) == 0 {
		out = []chatMessage{{Role: m.Role, Content: ""}}
	}
	return out, nil
}

// dataURL makes an image source into a URL Chat takes.
func dataURL(s *imageSource) string {
	switch {
	case s == nil:
		return ""
	case s.Type == "base64" && s.Data != "":
		return "data:" + s.MediaType + ";base64," + s.Data
	case s.Type == "url":
		return s.URL
	}
	return ""
}

// toolResult makes a tool_result's content, a string or blocks, into text.
// A tool_reference (what Claude Code's ToolSearch answers) names a deferred
// tool the model may now call: it is said in words and the tool is sent.
func (c *Call) toolResult(raw json.RawMessage, referenced map[string]bool) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []messagesBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	var texts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_reference":
			referenced[b.ToolName] = true
			texts = append(texts, "Tool "+b.ToolName+" is now available.")
		default:
			c.drop("tool result " + b.Type)
		}
	}
	return strings.Join(texts, "\n")
}

// messagesTool makes one tool into a Chat function. A deferred tool
// (defer_loading) is sent once a ToolSearch result has named it, as
// Anthropic's API does; till then the model is not to see it, so leaving it
// out loses nothing. Anthropic's own server and client tools (web_search,
// bash, text_editor..., with a versioned type) are dropped.
func (c *Call) messagesTool(raw json.RawMessage, referenced map[string]bool) (chatTool, bool) {
	var t messagesTool
	if err := json.Unmarshal(raw, &t); err != nil {
		c.drop("tool that is not an object")
		return chatTool{}, false
	}
	if t.Type != "" && t.Type != "custom" {
		c.drop("tool " + t.Type)
		return chatTool{}, false
	}
	if t.DeferLoading && !referenced[t.Name] {
		return chatTool{}, false
	}
	params := t.InputSchema
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return chatTool{Type: "function", Function: chatToolDef{Name: t.Name, Description: t.Description, Parameters: params}}, true
}
