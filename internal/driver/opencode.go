package driver

import (
	"encoding/json"
	"path"
	"strings"
)

// OpenCode (npm opencode-ai, a native binary) runs as `opencode run
// --format json`, printing one JSON event a line. It speaks Chat
// Completions through its bundled @ai-sdk/openai-compatible provider
// (nothing is fetched from npm for it), declared in the opencode.json
// named by OPENCODE_CONFIG.
//
// At start it installs @opencode-ai/plugin from npm into each config
// directory it can write; its global config directory is therefore put
// in the read-only tools directory (XDG_CONFIG_HOME), which makes it skip
// that. The task goes on its stdin, which it reads as it is when no
// message is given: a message in argv goes through yargs, which turns a
// word like 20 or 0x1f into a number that OpenCode then fails on
// ("G.includes is not a function"), and quotes every word holding a space.
//
// Measured for a two-turn run: a peak RSS of 480 to 620 MiB, about
// 380 MiB of it anonymous. Under a 256 MiB limit it is killed; under 384
// or 512 MiB it finishes, slowed by reclaim (7 to 9 s instead of 5), and
// the issue saw it stall at 512 MiB on a real task.
const openCodeMinMemory = 1536 * mib

// Under the tools directory (scripts/install-tools.sh makes them):
// OpenCode's XDG_CONFIG_HOME, and the directory put first on its PATH,
// which holds rg.
const (
	openCodeConfigHome = "opencode/config"
	openCodePath       = "path"
)

func buildOpenCode(in Input) (Invocation, error) {
	const provider = "corral"
	cfgPath := path.Join(in.Home, "opencode.json")
	files := map[string][]byte{}

	permission := map[string]string{
		"*":                  "allow",
		"edit":               "allow",
		"bash":               "allow",
		"external_directory": "allow",
		"webfetch":           "deny", // no web from the sandbox
		"websearch":          "deny",
	}
	if in.ReadOnly {
		permission["edit"] = "deny"
	}
	cfg := map[string]any{
		"autoupdate":        false,
		"share":             "disabled",
		"model":             provider + "/" + in.Model,
		"small_model":       provider + "/" + in.Model,
		"enabled_providers": []string{provider},
		"provider": map[string]any{
			provider: map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "Corral",
				"options": map[string]any{
					"baseURL": in.BaseURL,
					// Read from the environment at start: the token is in
					// no file.
					"apiKey": "{env:OPENAI_API_KEY}",
				},
				"models": map[string]any{in.Model: map[string]any{"name": in.Model}},
			},
		},
		"permission": permission,
	}
	if in.MCPURL != "" {
		// The delegation tools, allowed by permission "*". The token is read
		// from the environment at start, as the provider's key is.
		cfg["mcp"] = map[string]any{mcpServer: map[string]any{
			"type":    "remote",
			"url":     in.MCPURL,
			"enabled": true,
			"headers": map[string]string{"Authorization": "Bearer {env:" + MCPTokenEnv + "}"},
			// A refused token is Corral's answer, not a reason to try OAuth.
			"oauth": false,
			// Milliseconds, for every request to the server, tool calls
			// included (a delegate call waits for a child run).
			"timeout": in.mcpTimeoutMillis(),
		}}
	}
	// The workspace's AGENTS.md, which OpenCode reads as a project file
	// (and so not with OPENCODE_DISABLE_PROJECT_CONFIG below), named
	// here; a missing one is no error.
	instr := []string{path.Join(in.workspace(), "AGENTS.md")}
	if s := in.instructions(); s != "" {
		p := path.Join(in.Home, "corral-instructions.md")
		files[p] = []byte(s + "\n")
		instr = append(instr, p)
	}
	cfg["instructions"] = instr
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return Invocation{}, err
	}
	files[cfgPath] = append(b, '\n')

	env := baseEnv(in)
	// Its grep and glob tools run ripgrep, which the host need not have
	// (without it OpenCode fetches one from github.com): the tools
	// directory's comes first.
	env[0] = "PATH=" + path.Join(in.ToolsDir, openCodePath) + ":" + strings.TrimPrefix(env[0], "PATH=")
	env = append(env,
		"OPENCODE_CONFIG="+cfgPath,
		"XDG_CONFIG_HOME="+path.Join(in.ToolsDir, openCodeConfigHome),
		"OPENAI_API_KEY="+in.Token,
		"OPENAI_BASE_URL="+in.BaseURL,
		// models.opencode.ai: the model catalogue it fetches at start.
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_SHARE=1",
		// Not ~/.claude's prompts and skills, nor skills from elsewhere.
		"OPENCODE_DISABLE_CLAUDE_CODE=1",
		"OPENCODE_DISABLE_EXTERNAL_SKILLS=1",
		// An opencode.json in the workspace would override the provider
		// (a project config wins over OPENCODE_CONFIG): the agent's
		// configuration is Corral's.
		"OPENCODE_DISABLE_PROJECT_CONFIG=1",
		"OPENCODE_DISABLE_TERMINAL_TITLE=1",
	)
	env = append(env, in.mcpEnv()...)
	argv := []string{
		path.Join(in.ToolsDir, "bin", "opencode"), "run",
		"--format", "json",
		"--title", "Corral run", // a given title spares a model call to make one
		"--auto", // permissions not denied above are granted, never asked
	}
	// The task on stdin, read as it is: words after -- would go through
	// yargs' number parsing, and OpenCode fails on a word like 20.
	return Invocation{Argv: argv, Env: env, Files: files, Stdin: []byte(in.Task)}, nil
}

// openCodeParser reads `opencode run --format json`: step_start, text
// {part.text}, reasoning, tool_use {part: {tool, callID, state: {status,
// input, output, error}}}, step_finish {part: {reason, tokens}}, error
// {error}. The final answer is the text of the last step that wrote any.
type openCodeParser struct {
	texts   []string // of the current message
	msgID   string
	answer  string
	failure string
}

func newOpenCodeParser() parser { return &openCodeParser{} }

type openCodeEvent struct {
	Type  string          `json:"type"`
	Error json.RawMessage `json:"error"`
	Part  *struct {
		MessageID string `json:"messageID"`
		Type      string `json:"type"`
		Text      string `json:"text"`
		Tool      string `json:"tool"`
		CallID    string `json:"callID"`
		Reason    string `json:"reason"`
		State     *struct {
			Status   string          `json:"status"`
			Input    json.RawMessage `json:"input"`
			Output   string          `json:"output"`
			Error    string          `json:"error"`
			Metadata struct {
				Exit *int `json:"exit"` // bash's exit status
			} `json:"metadata"`
		} `json:"state"`
		Tokens *struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
		} `json:"tokens"`
	} `json:"part"`
}

func (p *openCodeParser) line(b []byte, emit func(Event)) {
	var ev openCodeEvent
	if json.Unmarshal(b, &ev) != nil {
		return
	}
	if ev.Type == "error" {
		p.failure = openCodeError(ev.Error)
		emit(Event{Kind: EventError, Text: p.failure})
		return
	}
	pt := ev.Part
	if pt == nil {
		return
	}
	switch ev.Type {
	case "text":
		if pt.MessageID != p.msgID {
			p.msgID, p.texts = pt.MessageID, nil
		}
		p.texts = append(p.texts, pt.Text)
		p.answer = strings.Join(p.texts, "\n")
		emit(Event{Kind: EventMessage, ID: pt.MessageID, Text: pt.Text})
	case "reasoning":
		emit(Event{Kind: EventReasoning, ID: pt.MessageID, Text: pt.Text})
	case "tool_use":
		if pt.State == nil {
			return
		}
		st := pt.State
		emit(Event{Kind: EventToolCall, ID: pt.CallID, Name: pt.Tool, Args: string(st.Input)})
		if st.Status == "error" {
			emit(Event{Kind: EventToolResult, ID: pt.CallID, Name: pt.Tool, Text: st.Error, IsError: true})
		} else {
			failed := st.Metadata.Exit != nil && *st.Metadata.Exit != 0
			emit(Event{Kind: EventToolResult, ID: pt.CallID, Name: pt.Tool, Text: st.Output, IsError: failed})
		}
	case "step_finish":
		e := Event{Kind: EventModel, Text: pt.Reason}
		if pt.Tokens != nil {
			e.InputTokens, e.OutputTokens = pt.Tokens.Input, pt.Tokens.Output
		}
		emit(e)
	}
}

// openCodeError reads an error event's error: {name, data: {message}} or
// anything else, kept as JSON.
func openCodeError(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil {
		msg := e.Data.Message
		if msg == "" {
			msg = e.Message
		}
		switch {
		case msg != "" && e.Name != "":
			return e.Name + ": " + msg
		case msg != "":
			return msg
		case e.Name != "":
			return e.Name
		}
	}
	return string(raw)
}

func (p *openCodeParser) final() (string, error) {
	if p.failure != "" {
		return p.answer, failed(OpenCode, p.failure)
	}
	if p.answer == "" {
		return "", failed(OpenCode, "")
	}
	return p.answer, nil
}
