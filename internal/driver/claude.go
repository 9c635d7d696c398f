package driver

import (
	"encoding/json"
	"path"
	"strconv"
	"strings"
)

// Claude Code (npm @anthropic-ai/claude-code, a native binary) runs as
// `claude -p --output-format stream-json --verbose`, printing one JSON
// message a line and a last "result". It speaks Anthropic Messages to
// ANTHROPIC_BASE_URL (without /v1) and, given ANTHROPIC_API_KEY, needs no
// login step. It refuses to skip its permission prompts as root unless
// IS_SANDBOX is set: sessions run as uid 1000, and the variable says what
// is true anyway.
//
// Measured for a two-turn run: a peak RSS of 210 MiB, about 120 MiB of
// it anonymous; under a 96 MiB limit it is killed, under 128 MiB it
// finishes. Real runs hold more context: 768 MiB leaves room.
const claudeMinMemory = 768 * mib

func buildClaude(in Input) (Invocation, error) {
	env := append(baseEnv(in),
		"CLAUDE_CONFIG_DIR="+path.Join(in.Home, ".claude"),
		"ANTHROPIC_BASE_URL="+strings.TrimSuffix(in.BaseURL, "/v1"),
		"ANTHROPIC_API_KEY="+in.Token, // sent as x-api-key
		"ANTHROPIC_MODEL="+in.Model,
		// Every model Claude Code picks by itself (a small one for side
		// tasks, sub-agents) is the agent's: the gateway serves no other.
		"ANTHROPIC_DEFAULT_OPUS_MODEL="+in.Model,
		"ANTHROPIC_DEFAULT_SONNET_MODEL="+in.Model,
		"ANTHROPIC_DEFAULT_HAIKU_MODEL="+in.Model,
		"ANTHROPIC_SMALL_FAST_MODEL="+in.Model,
		"CLAUDE_CODE_SUBAGENT_MODEL="+in.Model,
		// Without it Claude Code calls HEAD /api/hello at the base URL
		// and looks up api.anthropic.com at start.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_BUG_COMMAND=1",
		"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1",
		"CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1",
		"IS_SANDBOX=1",
	)
	argv := []string{
		path.Join(in.ToolsDir, "bin", "claude"),
		"-p",
		"--output-format", "stream-json",
		"--verbose", // stream-json in print mode requires it
		"--dangerously-skip-permissions",
		"--no-session-persistence", // the trace is the record
		"--model", in.Model,
	}
	if s := in.instructions(); s != "" {
		argv = append(argv, "--append-system-prompt", s)
	}
	if in.ReadOnly {
		argv = append(argv, "--disallowedTools", "Edit,Write,NotebookEdit")
	}
	var files map[string][]byte
	if in.MCPURL != "" {
		p, b, err := claudeMCPConfig(in)
		if err != nil {
			return Invocation{}, err
		}
		files = map[string][]byte{p: b}
		// Only Corral's server: none of a .mcp.json in the workspace. Its
		// tools are allowed with the rest (--dangerously-skip-permissions).
		argv = append(argv, "--mcp-config", p, "--strict-mcp-config")
		env = append(env, in.mcpEnv()...)
		// The default for every server; the config's own timeout is this
		// one's.
		env = append(env, "MCP_TOOL_TIMEOUT="+strconv.FormatInt(in.mcpTimeoutMillis(), 10))
	}
	argv = append(argv, "--", in.Task)
	return Invocation{Argv: argv, Env: env, Files: files}, nil
}

// claudeMCPConfig is the --mcp-config file that registers the gateway's
// MCP server. The token is not in it: Claude Code expands ${VAR} in a
// server's headers from its environment.
func claudeMCPConfig(in Input) (string, []byte, error) {
	cfg := map[string]any{"mcpServers": map[string]any{mcpServer: map[string]any{
		"type":    "http",
		"url":     in.MCPURL,
		"headers": map[string]string{"Authorization": "Bearer ${" + MCPTokenEnv + "}"},
		// Milliseconds, for a call (a delegate call waits for a child
		// run); it also raises the five minutes an HTTP server's call may
		// go without a byte.
		"timeout": in.mcpTimeoutMillis(),
		// Its tools in the first turn's prompt, not deferred behind tool
		// search: start waits (at most 5 s) for the server.
		"alwaysLoad": true,
	}}}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", nil, err
	}
	return path.Join(in.Home, "corral-mcp.json"), append(b, '\n'), nil
}

// claudeParser reads stream-json: {"type":"system",...} first, then
// "assistant" messages (content blocks text, thinking, tool_use) and
// "user" messages (tool_result blocks), and a last "result" with the
// answer (subtype "success") or the failure (is_error, subtype error_*).
type claudeParser struct {
	result  *claudeResult
	tools   map[string]string // tool_use id → tool name
	lastMsg string
}

func newClaudeParser() parser { return &claudeParser{tools: map[string]string{}} }

type claudeResult struct {
	Subtype string
	IsError bool
	Result  string
	Errors  []string
}

type claudeBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	ToolUse  string          `json:"tool_use_id"`
	Content  json.RawMessage `json:"content"`
	IsError  bool            `json:"is_error"`
}

type claudeEvent struct {
	Type    string   `json:"type"`
	Subtype string   `json:"subtype"`
	Error   string   `json:"error"`
	IsError bool     `json:"is_error"`
	Result  string   `json:"result"`
	Errors  []string `json:"errors"`
	Message *struct {
		Content json.RawMessage `json:"content"`
		Usage   *struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	} `json:"message"`
}

func (p *claudeParser) line(b []byte, emit func(Event)) {
	var ev claudeEvent
	if json.Unmarshal(b, &ev) != nil {
		return
	}
	switch ev.Type {
	case "assistant":
		if ev.Message == nil {
			return
		}
		for _, bl := range blocks(ev.Message.Content) {
			switch bl.Type {
			case "text":
				p.lastMsg = bl.Text
				emit(Event{Kind: EventMessage, Text: bl.Text})
			case "thinking":
				emit(Event{Kind: EventReasoning, Text: bl.Thinking})
			case "tool_use":
				p.tools[bl.ID] = bl.Name
				emit(Event{Kind: EventToolCall, ID: bl.ID, Name: bl.Name, Args: string(bl.Input)})
			}
		}
		e := Event{Kind: EventModel}
		if u := ev.Message.Usage; u != nil {
			e.InputTokens, e.OutputTokens = u.InputTokens, u.OutputTokens
		}
		emit(e)
	case "user":
		if ev.Message == nil {
			return
		}
		for _, bl := range blocks(ev.Message.Content) {
			if bl.Type == "tool_result" {
				emit(Event{Kind: EventToolResult, ID: bl.ToolUse, Name: p.tools[bl.ToolUse], Text: resultText(bl.Content), IsError: bl.IsError})
			}
		}
	case "system":
		if ev.Subtype == "api_retry" {
			emit(Event{Kind: EventError, Text: "model call retried: " + ev.Error})
		}
	case "result":
		r := claudeResult{Subtype: ev.Subtype, IsError: ev.IsError, Result: ev.Result, Errors: ev.Errors}
		p.result = &r
		if r.IsError || r.Subtype != "success" {
			emit(Event{Kind: EventError, Text: r.message()})
		}
	}
}

func (r claudeResult) message() string {
	if len(r.Errors) > 0 {
		return strings.Join(r.Errors, "; ")
	}
	if r.Result != "" {
		return r.Result
	}
	return r.Subtype
}

// blocks reads a message's content: a list of blocks, or a plain string.
func blocks(raw json.RawMessage) []claudeBlock {
	var bs []claudeBlock
	if json.Unmarshal(raw, &bs) == nil {
		return bs
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []claudeBlock{{Type: "text", Text: s}}
	}
	return nil
}

// resultText reads a tool result's content: a string or text blocks.
func resultText(raw json.RawMessage) string {
	var parts []string
	for _, bl := range blocks(raw) {
		if bl.Type == "text" {
			parts = append(parts, bl.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (p *claudeParser) final() (string, error) {
	switch {
	case p.result == nil:
		return p.lastMsg, failed(ClaudeCode, "")
	case p.result.IsError || p.result.Subtype != "success":
		return "", failed(ClaudeCode, p.result.message())
	}
	return p.result.Result, nil
}
