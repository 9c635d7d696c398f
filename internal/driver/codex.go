package driver

import (
	"encoding/json"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
)

// Codex (npm @openai/codex) runs as `codex exec --json`, printing one JSON
// event a line. It speaks only the Responses API, to a provider declared
// in $CODEX_HOME/config.toml. Its own sandbox (bwrap) cannot start inside
// Corral's, which has no user namespaces: it runs with it off, Corral's
// sandbox being the boundary.
//
// Measured for a two-turn run (a shell command, an answer): a peak RSS of
// 135 MiB, about 20 MiB of it anonymous, the rest pages of its 290 MB
// binary (started directly, not through npm's Node wrapper, which would
// stay resident beside it on this Node). The sandbox's default suffices.
const codexMinMemory = 512 * mib

func buildCodex(in Input) (Invocation, error) {
	codexHome := path.Join(in.Home, ".codex")
	var c strings.Builder
	kv := func(k, v string) { fmt.Fprintf(&c, "%s = %s\n", k, v) }
	kv("model", tomlString(in.Model))
	kv("model_provider", tomlString("corral"))
	// The sandbox is Corral's and nobody is there to approve.
	kv("approval_policy", tomlString("never"))
	kv("sandbox_mode", tomlString("danger-full-access"))
	kv("check_for_update_on_startup", "false")
	// No web from the sandbox; and the gateway drops the web_search tool
	// for providers without it.
	kv("web_search", tomlString("disabled"))
	if s := in.instructions(); s != "" {
		kv("developer_instructions", tomlString(s))
	}
	c.WriteString("\n[analytics]\nenabled = false\n")
	c.WriteString("\n[feedback]\nenabled = false\n")
	c.WriteString("\n[history]\npersistence = \"none\"\n")
	// Plugins make Codex reach github.com (git ls-remote of its plugin
	// marketplace, api.github.com) and chatgpt.com at start.
	c.WriteString("\n[features]\nplugins = false\n")
	c.WriteString("\n[model_providers.corral]\n")
	kv("name", tomlString("Corral"))
	kv("base_url", tomlString(in.BaseURL))
	kv("env_key", tomlString("OPENAI_API_KEY"))
	kv("wire_api", tomlString("responses"))
	if in.MCPURL != "" {
		// The delegation tools (codex mcp add --url --bearer-token-env-var
		// writes the same). A call may wait for a whole child run. Approved
		// beforehand: codex exec has nobody to ask, and cancels a call that
		// needs approval ("user cancelled MCP tool call").
		fmt.Fprintf(&c, "\n[mcp_servers.%s]\n", mcpServer)
		kv("url", tomlString(in.MCPURL))
		kv("bearer_token_env_var", tomlString(MCPTokenEnv))
		kv("tool_timeout_sec", strconv.FormatInt(int64(math.Ceil(in.MCPTimeout.Seconds())), 10))
		kv("default_tools_approval_mode", tomlString("approve"))
	}

	env := append(baseEnv(in),
		"CODEX_HOME="+codexHome,
		"OPENAI_API_KEY="+in.Token,
		"OPENAI_BASE_URL="+in.BaseURL,
	)
	env = append(env, in.mcpEnv()...)
	argv := []string{
		path.Join(in.ToolsDir, "bin", "codex"), "exec",
		"--json",
		"--color", "never",
		"--ephemeral",           // no session files: the trace is the record
		"--strict-config",       // a key this version does not know fails the start, not silently
		"--skip-git-repo-check", // the staged tree need not be a repository
		"--dangerously-bypass-approvals-and-sandbox",
		"--", in.Task, // after --, a task starting with "-" is not an option
	}
	return Invocation{
		Argv:  argv,
		Env:   env,
		Files: map[string][]byte{path.Join(codexHome, "config.toml"): []byte(c.String())},
	}, nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// codexParser reads `codex exec --json`: thread.started, turn.started,
// item.started / item.updated / item.completed {item: {type, ...}},
// turn.completed {usage}, turn.failed {error}, error {message}. Only
// completed items enter the transcript; the final answer is the last
// agent_message.
type codexParser struct {
	answer string
	failed string
}

func newCodexParser() parser { return &codexParser{} }

type codexEvent struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Usage *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
	Item *struct {
		ID               string          `json:"id"`
		Type             string          `json:"type"`
		Text             string          `json:"text"`
		Message          string          `json:"message"`
		Command          string          `json:"command"`
		AggregatedOutput string          `json:"aggregated_output"`
		ExitCode         *int            `json:"exit_code"`
		Status           string          `json:"status"`
		Changes          json.RawMessage `json:"changes"`
		Server           string          `json:"server"`
		Tool             string          `json:"tool"`
		Arguments        json.RawMessage `json:"arguments"`
		Result           json.RawMessage `json:"result"`
		Query            string          `json:"query"`
		Items            json.RawMessage `json:"items"`
	} `json:"item"`
}

func (p *codexParser) line(b []byte, emit func(Event)) {
	var ev codexEvent
	if json.Unmarshal(b, &ev) != nil {
		return
	}
	switch ev.Type {
	case "turn.completed":
		e := Event{Kind: EventModel}
		if ev.Usage != nil {
			e.InputTokens, e.OutputTokens = ev.Usage.InputTokens, ev.Usage.OutputTokens
		}
		emit(e)
	case "turn.failed":
		p.failed = "the turn failed"
		if ev.Error != nil && ev.Error.Message != "" {
			p.failed = providerMessage(ev.Error.Message)
		}
		emit(Event{Kind: EventError, Text: p.failed})
	case "error":
		// A stream error Codex may retry: the run fails only on turn.failed.
		emit(Event{Kind: EventError, Text: providerMessage(ev.Message)})
	case "item.completed":
		if ev.Item != nil {
			p.item(ev, emit)
		}
	}
}

func (p *codexParser) item(ev codexEvent, emit func(Event)) {
	it := ev.Item
	switch it.Type {
	case "agent_message":
		p.answer = it.Text
		emit(Event{Kind: EventMessage, ID: it.ID, Text: it.Text})
	case "reasoning":
		emit(Event{Kind: EventReasoning, ID: it.ID, Text: it.Text})
	case "command_execution":
		emit(Event{Kind: EventToolCall, ID: it.ID, Name: "command", Args: argsJSON(map[string]string{"command": it.Command})})
		failed := it.Status == "failed" || it.Status == "declined" || (it.ExitCode != nil && *it.ExitCode != 0)
		emit(Event{Kind: EventToolResult, ID: it.ID, Name: "command", Text: it.AggregatedOutput, IsError: failed})
	case "file_change":
		emit(Event{Kind: EventToolCall, ID: it.ID, Name: "file_change", Args: string(it.Changes)})
		emit(Event{Kind: EventToolResult, ID: it.ID, Name: "file_change", Text: it.Status, IsError: it.Status == "failed"})
	case "mcp_tool_call":
		name := it.Server + "." + it.Tool
		emit(Event{Kind: EventToolCall, ID: it.ID, Name: name, Args: string(it.Arguments)})
		emit(Event{Kind: EventToolResult, ID: it.ID, Name: name, Text: string(it.Result), IsError: it.Status == "failed"})
	case "web_search":
		emit(Event{Kind: EventToolCall, ID: it.ID, Name: "web_search", Args: argsJSON(map[string]string{"query": it.Query})})
	case "todo_list":
		emit(Event{Kind: EventToolCall, ID: it.ID, Name: "todo_list", Args: string(it.Items)})
	case "error":
		emit(Event{Kind: EventError, ID: it.ID, Text: it.Message})
	default:
		// An item type this version does not know: kept, by its type.
		emit(Event{Kind: EventToolCall, ID: it.ID, Name: it.Type})
	}
}

// providerMessage is the message of an OpenAI-style error body, which
// Codex reports as it came ({"error": {"message": ...}}), or s itself.
func providerMessage(s string) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(s), &body) == nil && body.Error.Message != "" {
		return body.Error.Message
	}
	return s
}

func (p *codexParser) final() (string, error) {
	if p.failed != "" {
		return p.answer, failed(Codex, p.failed)
	}
	if p.answer == "" {
		return "", failed(Codex, "")
	}
	return p.answer, nil
}
