package protocol

import (
	"encoding/json"
	"strings"
)

// The Responses API, as Codex sends it: one POST /responses per model turn
// with the whole history in "input" (Codex never uses previous_response_id),
// tools of types function, namespace, custom and web_search.

type responsesRequest struct {
	Model              string            `json:"model"`
	Instructions       string            `json:"instructions"`
	Input              json.RawMessage   `json:"input"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Stream             bool              `json:"stream"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Reasoning          *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Text *struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"format"`
	} `json:"text"`
	// store, include, prompt_cache_key, client_metadata, metadata,
	// service_tier, user and truncation shape only OpenAI's own service,
	// nothing in the answer: they are left out without a note.
}

// responsesItem is one input item; which fields are set depends on Type.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`  // custom_tool_call
	Output    json.RawMessage `json:"output"` // function_call_output, custom_tool_call_output
}

// responsesPart is a content part of a message, or of a tool's output.
type responsesPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"` // a string here; an object in some clients
	Detail   string          `json:"detail"`
}

type responsesTool struct {
	Type        string            `json:"type"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Parameters  json.RawMessage   `json:"parameters"`
	Strict      bool              `json:"strict"`
	Tools       []json.RawMessage `json:"tools"` // namespace
	Format      *struct {         // custom
		Type       string `json:"type"`
		Syntax     string `json:"syntax"`
		Definition string `json:"definition"`
	} `json:"format"`
}

// namespaceSep joins a namespace and a tool's name into one Chat function
// name: Chat names allow letters, digits, _ and -, 64 at most.
const namespaceSep = "__"

// ParseResponses makes a Responses API request into a Chat Completions one.
func ParseResponses(body []byte) (Call, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Call{}, decodeError("a Responses API request", err)
	}
	if req.PreviousResponseID != "" || len(req.Conversation) > 0 && string(req.Conversation) != "null" {
		return Call{}, invalid("previous_response_id and conversation are not supported: send the whole history in input")
	}
	c := newCall(Responses, "resp_")
	c.Model, c.Stream = req.Model, req.Stream
	out := chatRequest{
		ParallelToolCalls: req.ParallelToolCalls,
		MaxTokens:         req.MaxOutputTokens,
		Temperature:       req.Temperature,
		TopP:              req.TopP,
	}
	if req.Instructions != "" {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: req.Instructions})
	}
	msgs, err := c.responsesInput(req.Input)
	if err != nil {
		return Call{}, err
	}
	out.Messages = append(out.Messages, msgs...)
	for _, raw := range req.Tools {
		out.Tools = append(out.Tools, c.responsesTool(raw)...)
	}
	if len(out.Tools) > 0 {
		out.ToolChoice = c.responsesToolChoice(req.ToolChoice)
	} else {
		out.ParallelToolCalls = nil // providers refuse it without tools
	}
	if req.Reasoning != nil && req.Reasoning.Effort != "" {
		c.drop("param reasoning.effort")
	}
	if req.Text != nil && req.Text.Format != nil {
		switch f := req.Text.Format; f.Type {
		case "json_schema":
			js := map[string]any{"name": f.Name, "schema": f.Schema}
			if f.Strict != nil {
				js["strict"] = *f.Strict
			}
			out.ResponseFormat, _ = json.Marshal(map[string]any{"type": "json_schema", "json_schema": js})
		case "json_object":
			out.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
		}
	}
	return c.finish(&out)
}

// responsesInput makes the input, a string or a list of items, into Chat
// messages.
func (c *Call) responsesInput(raw json.RawMessage) ([]chatMessage, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []chatMessage{{Role: "user", Content: s}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalid("input must be a string or a list of items")
	}
	var msgs []chatMessage
	for i, rawItem := range items {
		var it responsesItem
		if err := json.Unmarshal(rawItem, &it); err != nil {
			return nil, invalid("input[%d] is not an item: %v", i, err)
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message" // the short form, {role, content}
		}
		switch it.Type {
		case "message":
			m, err := c.responsesMessage(i, it)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		case "function_call", "custom_tool_call":
			args := it.Arguments
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + namespaceSep + it.Name
			}
			if it.Type == "custom_tool_call" {
				b, _ := marshal(map[string]string{"input": it.Input})
				args = string(b)
			}
			tc := chatToolCall{ID: it.CallID, Type: "function", Function: chatFunction{Name: name, Arguments: args}}
			// Consecutive calls are one assistant turn with parallel
			// calls, and so is a turn's text followed by its calls.
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, tc)
			} else {
				msgs = append(msgs, chatMessage{Role: "assistant", Content: "", ToolCalls: []chatToolCall{tc}})
			}
		case "function_call_output", "custom_tool_call_output":
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: c.toolOutput(it.Output)})
		case "reasoning":
			c.drop("reasoning item")
		default:
			c.drop("item " + it.Type)
		}
	}
	return msgs, nil
}

func (c *Call) responsesMessage(i int, it responsesItem) (chatMessage, error) {
	role := it.Role
	switch role {
	case "user", "assistant", "system":
	case "developer":
		role = "system" // what every Chat provider knows
	default:
		return chatMessage{}, invalid("input[%d] has an unknown role %q", i, it.Role)
	}
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return chatMessage{Role: role, Content: s}, nil
	}
	var parts []responsesPart
	if err := json.Unmarshal(it.Content, &parts); err != nil {
		return chatMessage{}, invalid("input[%d].content must be a string or a list of parts", i)
	}
	var out []chatPart
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, chatPart{Type: "text", Text: p.Text})
		case "refusal":
			out = append(out, chatPart{Type: "text", Text: p.Refusal})
		case "input_image":
			switch u := imageURL(p.ImageURL); {
			case role != "user":
				c.drop("image not from the user") // Chat takes images from the user only
			case u == "":
				c.drop("image without a URL (a file_id)")
			default:
				out = append(out, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: u, Detail: p.Detail}})
			}
		default:
			c.drop("content " + p.Type)
		}
	}
	return chatMessage{Role: role, Content: content(out)}, nil
}

// imageURL reads an image_url given as a string or as {"url": ...}.
func imageURL(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		URL string `json:"url"`
	}
	json.Unmarshal(raw, &o)
	return o.URL
}

// toolOutput makes a tool's output, a string or a list of parts, into a
// Chat tool message's text: providers take no images in tool messages.
func (c *Call) toolOutput(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []responsesPart
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			texts = append(texts, p.Text)
		default:
			c.drop("tool output " + p.Type)
		}
	}
	return strings.Join(texts, "\n")
}

// responsesTool makes one tool into Chat functions: a function as it is, a
// namespace's functions flattened to "namespace__name" (Codex sends its
// sub-agent tools so, and calls them back with the namespace apart, which
// Relay restores), a custom tool into a function of one string, "input".
// Tools the provider cannot run (web_search, file_search, local_shell...)
// are dropped.
func (c *Call) responsesTool(raw json.RawMessage) []chatTool {
	var t responsesTool
	if err := json.Unmarshal(raw, &t); err != nil {
		c.drop("tool that is not an object")
		return nil
	}
	switch t.Type {
	case "function":
		return c.function("", t)
	case "custom":
		return c.function("", t)
	case "namespace":
		var out []chatTool
		for _, sub := range t.Tools {
			var st responsesTool
			if json.Unmarshal(sub, &st) != nil || st.Type != "function" && st.Type != "custom" {
				c.drop("tool namespace " + t.Name + " member " + st.Type)
				continue
			}
			out = append(out, c.function(t.Name, st)...)
		}
		return out
	}
	c.drop("tool " + t.Type)
	return nil
}

// function makes a function or custom tool, of namespace ns or top level,
// into a Chat function, and records the way back when the names differ.
func (c *Call) function(ns string, t responsesTool) []chatTool {
	name := t.Name
	if ns != "" {
		name = ns + namespaceSep + t.Name
	}
	if len(name) > 64 || name == "" {
		c.drop("tool " + name + ": name too long for Chat Completions")
		return nil
	}
	def := chatToolDef{Name: name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}
	custom := t.Type == "custom"
	if custom {
		desc := t.Description
		if t.Format != nil && t.Format.Type == "grammar" {
			desc += "\n\nThe input must follow this " + t.Format.Syntax + " grammar:\n" + t.Format.Definition
		}
		def.Description = desc
		def.Parameters = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"the tool's whole input"}},"required":["input"],"additionalProperties":false}`)
		def.Strict = false
	}
	if len(def.Parameters) == 0 || string(def.Parameters) == "null" {
		def.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if ns != "" || custom {
		if c.tools == nil {
			c.tools = map[string]toolRef{}
		}
		c.tools[name] = toolRef{namespace: ns, name: t.Name, custom: custom}
	}
	return []chatTool{{Type: "function", Function: def}}
}

// responsesToolChoice maps tool_choice: the modes as they are, a named
// function to Chat's shape; what Chat cannot say becomes auto.
func (c *Call) responsesToolChoice(raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return s
		}
		c.drop("tool_choice " + s)
		return "auto"
	}
	var o struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	json.Unmarshal(raw, &o)
	if (o.Type == "function" || o.Type == "custom") && o.Name != "" {
		name := o.Name
		if o.Namespace != "" {
			name = o.Namespace + namespaceSep + o.Name
		}
		return map[string]any{"type": "function", "function": map[string]string{"name": name}}
	}
	c.drop("tool_choice " + o.Type)
	return "auto"
}
