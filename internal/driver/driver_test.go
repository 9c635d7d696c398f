package driver

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"corral"
)

func TestValid(t *testing.T) {
	cases := []struct {
		name string
		code string
	}{
		{"builtin", ""},
		{"codex", ""},
		{"claude-code", ""},
		{"opencode", ""},
		{"", corral.EINVALID},
		{"terminal", corral.EINVALID}, // a kind of run, not an agent's driver
		{"Codex", corral.EINVALID},
		{"claude", corral.EINVALID},
	}
	for _, tc := range cases {
		if got := corral.ErrorCode(Valid(tc.name)); got != tc.code {
			t.Errorf("Valid(%q) = %q, want %q", tc.name, got, tc.code)
		}
	}
	// The refusal names the valid ones, and they are the root package's.
	msg := Valid("nope").(*corral.Error).Message
	for _, n := range corral.AgentDrivers {
		if !strings.Contains(msg, n) {
			t.Errorf("Valid(\"nope\") = %q: does not name %q", msg, n)
		}
	}
	// Every driver an agent may have is known here, and no other.
	if got, want := strings.Join(Names(), ","), strings.Join(corral.AgentDrivers, ","); got != want {
		t.Errorf("Names() = %s, want corral.AgentDrivers %s", got, want)
	}
	if len(clis) != len(corral.AgentDrivers)-1 {
		t.Errorf("%d CLIs known, corral.AgentDrivers has %d besides builtin", len(clis), len(corral.AgentDrivers)-1)
	}
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func goodInput() Input {
	return Input{
		Task:      "fix the bug",
		BaseURL:   "http://127.0.0.1:4000/v1",
		Token:     "tok-123",
		Model:     "gpt-test",
		ToolsDir:  ToolsMount,
		Home:      "/tmp/corral-home",
		Workspace: "/workspace",
	}
}

func TestBuildRefuses(t *testing.T) {
	cases := []struct {
		name   string
		driver string
		change func(*Input)
	}{
		{"builtin runs no CLI", Builtin, func(*Input) {}},
		{"unknown driver", "aider", func(*Input) {}},
		{"empty task", Codex, func(in *Input) { in.Task = "" }},
		{"blank task", OpenCode, func(in *Input) { in.Task = " \n\t " }},
		{"NUL in the task", ClaudeCode, func(in *Input) { in.Task = "a\x00b" }},
		{"NUL in the instructions", Codex, func(in *Input) { in.Instructions = "a\x00b" }},
		{"base URL without /v1", Codex, func(in *Input) { in.BaseURL = "http://127.0.0.1:4000" }},
		{"base URL not http", ClaudeCode, func(in *Input) { in.BaseURL = "ftp://127.0.0.1/v1" }},
		{"base URL with a query", OpenCode, func(in *Input) { in.BaseURL = "http://127.0.0.1:4000/v1?x=1" }},
		{"base URL without host", Codex, func(in *Input) { in.BaseURL = "http:///v1" }},
		{"empty token", Codex, func(in *Input) { in.Token = "" }},
		{"token with a newline", ClaudeCode, func(in *Input) { in.Token = "a\nb" }},
		{"token with a quote", OpenCode, func(in *Input) { in.Token = `a"b` }},
		{"empty model", Codex, func(in *Input) { in.Model = "" }},
		{"model with a newline", OpenCode, func(in *Input) { in.Model = "a\nb" }},
		{"relative HOME", Codex, func(in *Input) { in.Home = "home" }},
		{"HOME is /", ClaudeCode, func(in *Input) { in.Home = "/" }},
		{"unclean HOME", OpenCode, func(in *Input) { in.Home = "/tmp/../home" }},
		{"HOME is the workspace", Codex, func(in *Input) { in.Home = "/workspace" }},
		{"HOME in the workspace", OpenCode, func(in *Input) { in.Home = "/workspace/.home" }},
		{"HOME in the default workspace", Codex, func(in *Input) { in.Workspace, in.Home = "", "/workspace/h" }},
		{"relative workspace", ClaudeCode, func(in *Input) { in.Workspace = "ws" }},
		{"relative tools directory", ClaudeCode, func(in *Input) { in.ToolsDir = "build/tools" }},
		{"MCP URL not http", Codex, func(in *Input) { in.MCPURL, in.MCPTimeout = "unix:///gw.sock", time.Minute }},
		{"MCP URL without host", ClaudeCode, func(in *Input) { in.MCPURL, in.MCPTimeout = "http:///mcp", time.Minute }},
		{"MCP URL with a user", OpenCode, func(in *Input) { in.MCPURL, in.MCPTimeout = "http://u:p@127.0.0.1:4000/mcp", time.Minute }},
		{"MCP without a call timeout", Codex, func(in *Input) { in.MCPURL = "http://127.0.0.1:4000/mcp" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := goodInput()
			tc.change(&in)
			if _, err := Build(tc.driver, in); corral.ErrorCode(err) != corral.EINVALID {
				t.Errorf("Build(%s, %+v) = %v, want %s", tc.driver, in, err, corral.EINVALID)
			}
		})
	}
}

// A HOME beside the workspace whose name starts like it is not inside it.
func TestBuildHomeBesideWorkspace(t *testing.T) {
	in := goodInput()
	in.Home = "/workspace-home"
	if _, err := Build(Codex, in); err != nil {
		t.Errorf("Build with HOME %s beside /workspace = %v", in.Home, err)
	}
}

func envMap(t *testing.T, env []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			t.Errorf("environment entry %q is not KEY=value", kv)
		}
		if _, dup := m[k]; dup {
			t.Errorf("environment sets %s twice", k)
		}
		m[k] = v
	}
	return m
}

func TestBuild(t *testing.T) {
	t.Setenv("CORRAL_CANARY", "inherited")
	in := goodInput()
	in.Instructions = "Be brief.\nAlways \"quote\"."
	cases := []struct {
		driver string
		bin    string
		want   map[string]string // environment entries
		files  []string          // under HOME
	}{
		{Codex, "codex", map[string]string{
			"CODEX_HOME": in.Home + "/.codex", "OPENAI_API_KEY": in.Token, "OPENAI_BASE_URL": in.BaseURL,
		}, []string{".codex/config.toml", ".tmp/README"}},
		{ClaudeCode, "claude", map[string]string{
			"ANTHROPIC_BASE_URL": "http://127.0.0.1:4000", "ANTHROPIC_API_KEY": in.Token, "ANTHROPIC_MODEL": in.Model,
			"ANTHROPIC_DEFAULT_HAIKU_MODEL": in.Model, "CLAUDE_CONFIG_DIR": in.Home + "/.claude",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
		}, []string{".tmp/README"}},
		{OpenCode, "opencode", map[string]string{
			"OPENCODE_CONFIG": in.Home + "/opencode.json", "OPENAI_API_KEY": in.Token,
			"XDG_CONFIG_HOME": ToolsMount + "/opencode/config", "OPENCODE_DISABLE_MODELS_FETCH": "1",
			"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
			"PATH": ToolsMount + "/path:/usr/local/bin:/usr/bin:/bin",
		}, []string{"opencode.json", "corral-instructions.md", ".tmp/README"}},
	}
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			inv, err := Build(tc.driver, in)
			if err != nil {
				t.Fatalf("Build = %v", err)
			}
			if want := ToolsMount + "/bin/" + tc.bin; inv.Argv[0] != want {
				t.Errorf("Argv[0] = %q, want %q", inv.Argv[0], want)
			}
			env := envMap(t, inv.Env)
			for k, v := range tc.want {
				if env[k] != v {
					t.Errorf("%s = %q, want %q", k, env[k], v)
				}
			}
			if env["TMPDIR"] != in.Home+"/.tmp" {
				t.Errorf("TMPDIR = %q, want %q: in HOME", env["TMPDIR"], in.Home+"/.tmp")
			}
			for _, k := range []string{"PATH", "HOME", "TERM", "NO_COLOR"} {
				if env[k] == "" {
					t.Errorf("%s is not set", k)
				}
			}
			if env["HOME"] != in.Home {
				t.Errorf("HOME = %q, want %q", env["HOME"], in.Home)
			}
			if _, ok := env["CORRAL_CANARY"]; ok {
				t.Errorf("the environment inherited CORRAL_CANARY from the server's")
			}
			var names []string
			for p, b := range inv.Files {
				rel, err := filepath.Rel(in.Home, p)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("file %s is not under HOME %s", p, in.Home)
				}
				names = append(names, rel)
				if bytes.Contains(b, []byte(in.Token)) {
					t.Errorf("file %s holds the token", p)
				}
			}
			if strings.Join(sorted(names), ",") != strings.Join(sorted(tc.files), ",") {
				t.Errorf("files %v, want %v", names, tc.files)
			}
			if inv.MinMemory < 512*mib {
				t.Errorf("MinMemory = %d MiB, want at least the sandbox's default 512", inv.MinMemory/mib)
			}
		})
	}
}

// TestBuildMCP: with an MCP server, each CLI registers it as "corral"
// (streamable HTTP, the run's token as bearer read from CORRAL_MCP_TOKEN,
// a call's timeout the run's time, its tools allowed without asking), in
// the config keys its pinned version reads; the token is in no argv and no
// file. Without one, nothing of it is there.
func TestBuildMCP(t *testing.T) {
	const url = "http://127.0.0.1:4000/mcp"
	cases := []struct {
		driver string
		check  func(t *testing.T, in Input, inv Invocation)
	}{
		{Codex, func(t *testing.T, in Input, inv Invocation) {
			cfg := string(inv.Files[in.Home+"/.codex/config.toml"])
			want := "[mcp_servers.corral]\nurl = \"" + url + "\"\nbearer_token_env_var = \"CORRAL_MCP_TOKEN\"\n" +
				"tool_timeout_sec = 1800\ndefault_tools_approval_mode = \"approve\"\n"
			if !strings.Contains(cfg, want) {
				t.Errorf("config.toml lacks\n%s\nin\n%s", want, cfg)
			}
		}},
		{ClaudeCode, func(t *testing.T, in Input, inv Invocation) {
			p := in.Home + "/corral-mcp.json"
			if !strings.Contains(strings.Join(inv.Argv, "\x00"), "--mcp-config\x00"+p+"\x00--strict-mcp-config") {
				t.Errorf("argv %q does not name %s alone", inv.Argv, p)
			}
			want := `{"mcpServers":{"corral":{"alwaysLoad":true,"headers":{"Authorization":"Bearer ${CORRAL_MCP_TOKEN}"},"timeout":1800000,"type":"http","url":"` + url + `"}}}`
			var cfg any
			if err := json.Unmarshal(inv.Files[p], &cfg); err != nil || jsonOf(cfg) != want {
				t.Errorf("%s = %s (%v), want %s", p, inv.Files[p], err, want)
			}
			if env := envMap(t, inv.Env); env["MCP_TOOL_TIMEOUT"] != "1800000" {
				t.Errorf("MCP_TOOL_TIMEOUT = %q, want the run's 1800000 ms", env["MCP_TOOL_TIMEOUT"])
			}
		}},
		{OpenCode, func(t *testing.T, in Input, inv Invocation) {
			var cfg struct{ MCP json.RawMessage }
			if err := json.Unmarshal(inv.Files[in.Home+"/opencode.json"], &cfg); err != nil {
				t.Fatal(err)
			}
			want := `{"corral":{"enabled":true,"headers":{"Authorization":"Bearer {env:CORRAL_MCP_TOKEN}"},"oauth":false,"timeout":1800000,"type":"remote","url":"` + url + `"}}`
			var got any
			if err := json.Unmarshal(cfg.MCP, &got); err != nil || jsonOf(got) != want {
				t.Errorf("opencode.json mcp = %s, want %s", cfg.MCP, want)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			in := goodInput()
			in.Token = "crt_secret-token"
			plain, err := Build(tc.driver, in)
			if err != nil {
				t.Fatal(err)
			}
			in.MCPURL, in.MCPTimeout = url, 30*time.Minute
			inv, err := Build(tc.driver, in)
			if err != nil {
				t.Fatalf("Build = %v", err)
			}
			tc.check(t, in, inv)
			if env := envMap(t, inv.Env); env[MCPTokenEnv] != in.Token {
				t.Errorf("%s = %q, want the run's token", MCPTokenEnv, env[MCPTokenEnv])
			}
			if strings.Contains(strings.Join(inv.Argv, " "), in.Token) {
				t.Errorf("argv %q holds the token", inv.Argv)
			}
			for p, b := range inv.Files {
				if bytes.Contains(b, []byte(in.Token)) {
					t.Errorf("file %s holds the token", p)
				}
			}
			// Without a server: none of it.
			if env := envMap(t, plain.Env); env[MCPTokenEnv] != "" || env["MCP_TOOL_TIMEOUT"] != "" {
				t.Errorf("without an MCP server, the environment has %s or MCP_TOOL_TIMEOUT", MCPTokenEnv)
			}
			for p, b := range plain.Files {
				if bytes.Contains(b, []byte("mcp")) || strings.Contains(p, "mcp") {
					t.Errorf("without an MCP server, file %s registers one:\n%s", p, b)
				}
			}
			if strings.Contains(strings.Join(plain.Argv, " "), "mcp") {
				t.Errorf("without an MCP server, argv %q registers one", plain.Argv)
			}
		})
	}
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// The task reaches the CLI exactly, whatever it starts with or holds: a
// task starting with "-" is never read as an option.
func TestBuildPassesTheTaskExactly(t *testing.T) {
	tasks := []string{
		"-v",
		"--help me",
		"two  spaces, a trailing one ",
		" leading space",
		"lines\nand\ttabs",
		`quotes "double" 'single' \back`,
		"résumé ✓",
		"the canary lasts 20 minutes, 0x1f or 1e5 or -3.5",
	}
	for _, task := range tasks {
		for _, d := range []string{Codex, ClaudeCode, OpenCode} {
			in := goodInput()
			in.Task = task
			inv, err := Build(d, in)
			if err != nil {
				t.Fatalf("Build(%s, %q) = %v", d, task, err)
			}
			if d == OpenCode {
				// On stdin: OpenCode's argument parser would make a word
				// like 20 a number, and fail on it.
				if got := string(inv.Stdin); got != task || indexOf(inv.Argv, "--") >= 0 {
					t.Errorf("opencode: task %q reaches the CLI as stdin %q, argv %q", task, got, inv.Argv)
				}
				continue
			}
			i := indexOf(inv.Argv, "--")
			if i < 0 {
				t.Fatalf("%s: no -- before the task in %q", d, inv.Argv)
			}
			after := inv.Argv[i+1:]
			got := strings.Join(after, " ")
			if len(after) != 1 {
				t.Errorf("%s: task %q is %d arguments, want 1", d, task, len(after))
			}
			if got != task {
				t.Errorf("%s: task %q reaches the CLI as %q", d, task, got)
			}
		}
	}
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

func TestCodexConfig(t *testing.T) {
	in := goodInput()
	in.Instructions = "Line one.\nSay \"hi\" \\ bye."
	in.ReadOnly = true
	inv, err := Build(Codex, in)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(inv.Files[in.Home+"/.codex/config.toml"])
	for _, want := range []string{
		`model = "gpt-test"`,
		`model_provider = "corral"`,
		`approval_policy = "never"`,
		`check_for_update_on_startup = false`,
		`web_search = "disabled"`,
		`developer_instructions = "Line one.\nSay \"hi\" \\ bye.\n\n` + readOnlyNote + `"`,
		"[analytics]\nenabled = false",
		"[feedback]\nenabled = false",
		"[features]\nplugins = false",
		"[model_providers.corral]",
		`base_url = "http://127.0.0.1:4000/v1"`,
		`env_key = "OPENAI_API_KEY"`,
		`wire_api = "responses"`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config.toml lacks %q:\n%s", want, cfg)
		}
	}
}

func TestTOMLString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", `"plain"`},
		{`a"b`, `"a\"b"`},
		{`a\b`, `"a\\b"`},
		{"a\nb\tc\rd", `"a\nb\tc\rd"`},
		{"bell\x07del\x7f", `"bell\u0007del\u007F"`},
		{"ünïcode ✓", `"ünïcode ✓"`},
	}
	for _, tc := range cases {
		if got := tomlString(tc.in); got != tc.want {
			t.Errorf("tomlString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestOpenCodeConfig(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		in := goodInput()
		in.ReadOnly = readOnly
		inv, err := Build(OpenCode, in)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Model        string   `json:"model"`
			SmallModel   string   `json:"small_model"`
			Enabled      []string `json:"enabled_providers"`
			Autoupdate   bool     `json:"autoupdate"`
			Share        string   `json:"share"`
			Instructions []string `json:"instructions"`
			Permission   map[string]string
			Provider     map[string]struct {
				NPM     string                     `json:"npm"`
				Options map[string]string          `json:"options"`
				Models  map[string]json.RawMessage `json:"models"`
			}
		}
		if err := json.Unmarshal(inv.Files[in.Home+"/opencode.json"], &cfg); err != nil {
			t.Fatalf("opencode.json: %v", err)
		}
		p := cfg.Provider["corral"]
		switch {
		case cfg.Model != "corral/gpt-test" || cfg.SmallModel != cfg.Model:
			t.Errorf("model %q, small_model %q", cfg.Model, cfg.SmallModel)
		case len(cfg.Enabled) != 1 || cfg.Enabled[0] != "corral":
			t.Errorf("enabled_providers = %v", cfg.Enabled)
		case cfg.Autoupdate || cfg.Share != "disabled":
			t.Errorf("autoupdate %v, share %q", cfg.Autoupdate, cfg.Share)
		case p.NPM != "@ai-sdk/openai-compatible" || p.Options["baseURL"] != in.BaseURL || p.Options["apiKey"] != "{env:OPENAI_API_KEY}":
			t.Errorf("provider = %+v", p)
		case p.Models["gpt-test"] == nil:
			t.Errorf("provider models = %v", p.Models)
		case cfg.Permission["webfetch"] != "deny":
			t.Errorf("permission = %v: webfetch must be denied", cfg.Permission)
		}
		wantEdit := map[bool]string{false: "allow", true: "deny"}[readOnly]
		if cfg.Permission["edit"] != wantEdit {
			t.Errorf("read-only %v: permission.edit = %q, want %q", readOnly, cfg.Permission["edit"], wantEdit)
		}
		if len(cfg.Instructions) == 0 || cfg.Instructions[0] != "/workspace/AGENTS.md" {
			t.Errorf("instructions %v do not begin with the workspace's AGENTS.md", cfg.Instructions)
		}
		if readOnly {
			if len(cfg.Instructions) != 2 || !strings.Contains(string(inv.Files[cfg.Instructions[1]]), readOnlyNote) {
				t.Errorf("read-only: instructions %v do not lead to the note", cfg.Instructions)
			}
		} else if len(cfg.Instructions) != 1 {
			t.Errorf("no instructions given, yet instructions = %v", cfg.Instructions)
		}
	}
}

func TestClaudeReadOnly(t *testing.T) {
	in := goodInput()
	in.ReadOnly = true
	inv, err := Build(ClaudeCode, in)
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Join(inv.Argv, "\x00")
	for _, want := range []string{"--disallowedTools\x00Edit,Write,NotebookEdit", "--append-system-prompt\x00" + readOnlyNote} {
		if !strings.Contains(argv, want) {
			t.Errorf("argv %q lacks %q", inv.Argv, want)
		}
	}
}

// The CLIs' own output, recorded from the real CLIs (go test -record).
func TestParseRecorded(t *testing.T) {
	cases := []struct {
		driver string
		tool   string // the scripted shell command's tool name
	}{
		{Codex, "command"},
		{ClaudeCode, "Bash"},
		{OpenCode, "bash"},
	}
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", tc.driver+".stdout.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			final, transcript, err := Parse(tc.driver, out)
			if err != nil || final != "done" {
				t.Errorf("Parse = %q, %v; want \"done\"", final, err)
			}
			var call, result *Event
			for i, e := range transcript {
				switch e.Kind {
				case EventToolCall:
					call = &transcript[i]
				case EventToolResult:
					result = &transcript[i]
				}
			}
			switch {
			case call == nil || result == nil:
				t.Fatalf("no tool call and result in %+v", transcript)
			case call.Name != tc.tool || !strings.Contains(call.Args, "echo hi >"):
				t.Errorf("tool call = %+v, want %s running echo hi", *call, tc.tool)
			case result.ID != call.ID || result.Name != call.Name || result.IsError:
				t.Errorf("tool result %+v does not answer the call %+v, or failed", *result, *call)
			}
			last := transcript[len(transcript)-1]
			if last.Kind != EventModel || last.InputTokens == 0 {
				t.Errorf("last event %+v, want the model turn with its tokens", last)
			}
		})
	}
}

func TestParseFailures(t *testing.T) {
	cases := []struct {
		name   string
		driver string
		out    string
		code   string
		words  string // in the error
		final  string
	}{
		{"codex provider error", Codex, "recorded:codex.error.stdout.jsonl", corral.EUNAVAIL, "the agent's token budget is spent", ""},
		{"claude provider error", ClaudeCode, "recorded:claude-code.error.stdout.jsonl", corral.EUNAVAIL, "the agent's token budget is spent", ""},
		{"opencode provider error", OpenCode, "recorded:opencode.error.stdout.jsonl", corral.EUNAVAIL, "the agent's token budget is spent", ""},
		{"codex nothing", Codex, "", corral.EUNAVAIL, "ended without an answer", ""},
		{"claude nothing", ClaudeCode, "", corral.EUNAVAIL, "ended without an answer", ""},
		{"opencode nothing", OpenCode, "", corral.EUNAVAIL, "ended without an answer", ""},
		{"codex killed mid-turn", Codex, `{"type":"turn.started"}` + "\n" + `{"type":"item.completed","item":{"id":"i","type":"reasoning","text":"hm"}}`, corral.EUNAVAIL, "ended without an answer", ""},
		{"claude killed before its result", ClaudeCode, `{"type":"assistant","message":{"content":[{"type":"text","text":"half"}]}}`, corral.EUNAVAIL, "ended without an answer", "half"},
		{"claude max turns", ClaudeCode, `{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["reached max turns"]}`, corral.EUNAVAIL, "reached max turns", ""},
		{"opencode plain error", OpenCode, `{"type":"error","error":{"message":"boom"}}`, corral.EUNAVAIL, "boom", ""},
		{"garbage is skipped", Codex, "warning: not json\n{\"type\":\"item.completed\",\"item\":{\"id\":\"a\",\"type\":\"agent_message\",\"text\":\"fine\"}}\n{broken", "", "", "fine"},
		{"the last message is the answer", OpenCode, `{"type":"text","part":{"messageID":"m1","text":"first"}}` + "\n" + `{"type":"text","part":{"messageID":"m2","text":"second"}}` + "\n" + `{"type":"text","part":{"messageID":"m2","text":"third"}}`, "", "", "second\nthird"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := []byte(tc.out)
			if f, ok := strings.CutPrefix(tc.out, "recorded:"); ok {
				var err error
				if out, err = os.ReadFile(filepath.Join("testdata", f)); err != nil {
					t.Fatal(err)
				}
			}
			final, _, err := Parse(tc.driver, out)
			if code := corral.ErrorCode(err); code != tc.code || (tc.words != "" && !strings.Contains(err.Error(), tc.words)) {
				t.Errorf("Parse error = %v (%q), want %q naming %q", err, code, tc.code, tc.words)
			}
			if final != tc.final {
				t.Errorf("Parse final = %q, want %q", final, tc.final)
			}
		})
	}
	if _, _, err := Parse(Builtin, nil); corral.ErrorCode(err) != corral.EINVALID {
		t.Errorf("Parse(builtin) = %v, want %s", err, corral.EINVALID)
	}
}

// Tool steps of shapes the recorded runs do not show, as the real CLIs
// print them.
func TestParseToolSteps(t *testing.T) {
	cases := []struct {
		name   string
		driver string
		line   string
		want   []Event
	}{
		{"codex apply_patch", Codex,
			`{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"/workspace/p.txt","kind":"add"}],"status":"completed"}}`,
			[]Event{
				{Kind: EventToolCall, ID: "item_1", Name: "file_change", Args: `[{"path":"/workspace/p.txt","kind":"add"}]`},
				{Kind: EventToolResult, ID: "item_1", Name: "file_change", Text: "completed"},
			}},
		{"codex failing command", Codex,
			`{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}}`,
			[]Event{
				{Kind: EventToolCall, ID: "item_2", Name: "command", Args: `{"command":"false"}`},
				{Kind: EventToolResult, ID: "item_2", Name: "command", IsError: true},
			}},
		{"codex in-progress items are not steps", Codex,
			`{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"ls","status":"in_progress"}}`,
			nil},
		{"opencode failing bash", OpenCode,
			`{"type":"tool_use","part":{"type":"tool","tool":"bash","callID":"c","state":{"status":"completed","input":{"command":"false"},"output":"","metadata":{"exit":1}}}}`,
			[]Event{
				{Kind: EventToolCall, ID: "c", Name: "bash", Args: `{"command":"false"}`},
				{Kind: EventToolResult, ID: "c", Name: "bash", IsError: true},
			}},
		{"opencode refused tool", OpenCode,
			`{"type":"tool_use","part":{"type":"tool","tool":"edit","callID":"d","state":{"status":"error","input":{},"error":"permission denied"}}}`,
			[]Event{
				{Kind: EventToolCall, ID: "d", Name: "edit", Args: `{}`},
				{Kind: EventToolResult, ID: "d", Name: "edit", Text: "permission denied", IsError: true},
			}},
		{"claude tool error", ClaudeCode,
			`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"Exit code 1"}],"is_error":true}]}}`,
			[]Event{{Kind: EventToolResult, ID: "t", Text: "Exit code 1", IsError: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewParser(tc.driver)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Line([]byte(tc.line))
			if g, w := jsonOf(got), jsonOf(tc.want); g != w {
				t.Errorf("Line(%s)\n got %s\nwant %s", tc.line, g, w)
			}
		})
	}
}

// The session's commands write stdout and stderr into one log: the CLIs'
// warnings come between their events, or run into one.
func TestParseWithStderrMixedIn(t *testing.T) {
	for _, d := range []string{Codex, ClaudeCode, OpenCode} {
		out, err := os.ReadFile(filepath.Join("testdata", d+".stdout.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var mixed []string
		for i, l := range lines {
			switch i % 3 {
			case 0:
				mixed = append(mixed, "WARNING: proceeding, even though we could not create PATH aliases", l)
			case 1:
				mixed = append(mixed, "[claude-code:unrecognized_model] "+l) // no newline before the event
			default:
				mixed = append(mixed, "  "+l+"  ", "Reading additional input from stdin...")
			}
		}
		wantFinal, want, _ := Parse(d, out)
		final, got, err := Parse(d, []byte(strings.Join(mixed, "\n")))
		if err != nil || final != wantFinal || len(got) != len(want) {
			t.Errorf("%s: with stderr mixed in, Parse = %q, %d events, %v; want %q, %d events", d, final, len(got), err, wantFinal, len(want))
		}
	}
}

func TestParseBounds(t *testing.T) {
	big := strings.Repeat("é", MaxText) // 2 bytes each: cut inside one
	line, _ := json.Marshal(map[string]any{"type": "item.completed", "item": map[string]any{"id": "x", "type": "agent_message", "text": big}})
	final, transcript, err := Parse(Codex, line)
	if err != nil || final != big {
		t.Errorf("Parse = %d bytes, %v; the final answer is not cut", len(final), err)
	}
	if e := transcript[0]; len(e.Text) > MaxText || !utf8.ValidString(e.Text) || !e.Truncated {
		t.Errorf("event text %d bytes, valid UTF-8 %v, truncated %v; want at most %d, valid, truncated", len(e.Text), utf8.ValidString(e.Text), e.Truncated, MaxText)
	}

	// Output that is no UTF-8 at all is cut too, not emptied.
	raw := "\xff\xfe" + strings.Repeat("x", MaxText)
	if got, cut := boundFlag(raw, MaxText); len(got) != MaxText || !cut {
		t.Errorf("boundFlag of %d bytes of non-UTF-8 = %d bytes, cut %v; want %d", len(raw), len(got), cut, MaxText)
	}
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"}, // é is 2 bytes: not cut in two
		{"a✓b", 3, "a"},
		{"a✓b", 4, "a✓"},
	} {
		if got, _ := boundFlag(tc.s, tc.n); got != tc.want {
			t.Errorf("boundFlag(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}

	var out bytes.Buffer
	for range MaxEvents + 50 {
		out.WriteString(`{"type":"item.completed","item":{"id":"x","type":"agent_message","text":"hi"}}` + "\n")
	}
	_, transcript, _ = Parse(Codex, out.Bytes())
	if len(transcript) != MaxEvents+1 || transcript[MaxEvents].Kind != EventError {
		t.Errorf("%d events in, transcript of %d (last %+v); want %d and a last error", MaxEvents+50, len(transcript), transcript[len(transcript)-1], MaxEvents+1)
	}
}

// A tools directory as install-tools.sh leaves it, for Installed.
func fakeTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []string{"codex", "claude", "opencode"} {
		write(t, filepath.Join(dir, "bin", b), "#!/bin/sh\n", 0o755)
	}
	write(t, filepath.Join(dir, "package.json"), string(pins), 0o644)
	write(t, filepath.Join(dir, openCodeConfigHome, "opencode", ".gitignore"), "node_modules\n", 0o644)
	write(t, filepath.Join(dir, openCodePath, "rg"), "#!/bin/sh\n", 0o755)
	return dir
}

func write(t *testing.T, p, s string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
}

func TestInstalled(t *testing.T) {
	cases := []struct {
		name   string
		driver string
		change func(t *testing.T, dir string) string
		code   string
	}{
		{"all there", Codex, nil, ""},
		{"builtin needs nothing", Builtin, func(*testing.T, string) string { return "" }, ""},
		{"unknown driver", "aider", nil, corral.EINVALID},
		{"no tools directory", Codex, func(*testing.T, string) string { return "" }, corral.EUNAVAIL},
		{"missing directory", OpenCode, func(_ *testing.T, dir string) string { return filepath.Join(dir, "nope") }, corral.EUNAVAIL},
		{"missing binary", ClaudeCode, func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, "bin", "claude"))
			return dir
		}, corral.EUNAVAIL},
		{"binary not executable", Codex, func(t *testing.T, dir string) string {
			os.Chmod(filepath.Join(dir, "bin", "codex"), 0o644)
			return dir
		}, corral.EUNAVAIL},
		{"dangling link", Codex, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "bin", "codex")
			os.Remove(p)
			os.Symlink("../node_modules/nope", p)
			return dir
		}, corral.EUNAVAIL},
		{"other versions", OpenCode, func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "package.json"), strings.Replace(string(pins), "1.18.33", "1.18.32", 1), 0o644)
			return dir
		}, corral.EUNAVAIL},
		{"no ripgrep for OpenCode", OpenCode, func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, openCodePath, "rg"))
			return dir
		}, corral.EUNAVAIL},
		{"no OpenCode config directory", OpenCode, func(t *testing.T, dir string) string {
			os.RemoveAll(filepath.Join(dir, "opencode"))
			return dir
		}, corral.EUNAVAIL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeTools(t)
			if tc.change != nil {
				dir = tc.change(t, dir)
			}
			err := Installed(dir, tc.driver)
			if code := corral.ErrorCode(err); code != tc.code {
				t.Fatalf("Installed(%s, %s) = %v, want %q", dir, tc.driver, err, tc.code)
			}
			if tc.code == corral.EUNAVAIL && !strings.Contains(err.(*corral.Error).Message, "run make tools") {
				t.Errorf("Installed message %q does not say to run make tools", err.(*corral.Error).Message)
			}
		})
	}
}
