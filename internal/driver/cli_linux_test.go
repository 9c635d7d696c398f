package driver

import (
	"bytes"
	"context"
	"corral/internal/toolstest"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"corral"
)

// The real CLIs, from the tools directory, against a scripted provider on
// 127.0.0.1 that speaks each one's protocol: a first turn that asks for a
// shell command writing a file, a second that answers "done". Outside any
// sandbox: this checks what the drivers build and parse, the sandbox's own
// tests check the sandbox.
//
// Run `make tools` first; without the CLIs the tests skip, unless
// CORRAL_REQUIRE_TOOLS=1 (CI) makes that a failure. -record rewrites the
// samples in testdata/ (requests with the token replaced, and each CLI's
// stdout, which the Parse tests read).

var record = flag.Bool("record", false, "rewrite testdata/ from the real CLIs")

const testToken = "corral-test-token-5f2a9c"

func toolsDir(t *testing.T) string {
	t.Helper()
	if d := toolstest.Dir(); d != "" {
		return d
	}
	d, err := filepath.Abs("../../build/tools")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func requireInstalled(t *testing.T, dir, name string) {
	t.Helper()
	toolstest.Need(t, Installed(dir, name))
}

// A fakeProtocol is one CLI's wire protocol as the fake provider scripts
// it: a first turn that calls tools, and, once their results are in the
// request, a turn that answers "done".
type fakeProtocol struct {
	paths    []string // what the CLI may call
	authOK   func(h http.Header) bool
	answer   func(w http.ResponseWriter, path string, body []byte)
	filename string   // what the scripted command writes
	tools    []string // the tools the scripted turn calls, each to succeed
	// projectDoc is the project instructions file the CLI reads from the
	// workspace (AGENTS.md, CLAUDE.md).
	projectDoc string
}

// projectRule is what the workspace's project file says: it must reach the
// model.
const projectRule = "Project rule: answer in English."

type recorded struct {
	Method string            `json:"method"`
	Path   string            `json:"path"`
	Query  string            `json:"query,omitempty"`
	Header map[string]string `json:"headers"`
	Body   json.RawMessage   `json:"body"`
	authOK bool
}

type fakeProvider struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

// newFakeProvider serves p on ln.
func newFakeProvider(t *testing.T, ln net.Listener, p fakeProtocol) *fakeProvider {
	f := &fakeProvider{}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := map[string]string{}
		for k, v := range r.Header {
			h[k] = strings.Join(v, ", ")
		}
		rec := recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: h, Body: json.RawMessage("null"), authOK: p.authOK(r.Header)}
		if json.Valid(body) && len(body) > 0 {
			rec.Body = body
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		known := false
		for _, pp := range p.paths {
			known = known || r.URL.Path == pp
		}
		switch {
		case !known:
			http.NotFound(w, r)
		case !rec.authOK:
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
		default:
			p.answer(w, r.URL.Path, body)
		}
	}))
	f.Listener.Close()
	f.Listener = ln
	f.Start()
	t.Cleanup(f.Close)
	return f
}

func (f *fakeProvider) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	for _, e := range events {
		io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
}

func event(name string, data any) string {
	return "event: " + name + "\ndata: " + jsonOf(data) + "\n\n"
}

func bearer(h http.Header) bool { return h.Get("Authorization") == "Bearer "+testToken }

// responsesProtocol is the OpenAI Responses API as Codex reads it: each
// stream ends in response.completed with usage.
func responsesProtocol(file string) fakeProtocol {
	return fakeProtocol{
		paths:      []string{"/v1/responses"},
		authOK:     bearer,
		filename:   file,
		tools:      []string{"command"},
		projectDoc: "AGENTS.md",
		answer: func(w http.ResponseWriter, _ string, body []byte) {
			var req struct {
				Input []struct {
					Type string `json:"type"`
				} `json:"input"`
			}
			json.Unmarshal(body, &req)
			done := false
			for _, it := range req.Input {
				done = done || it.Type == "function_call_output"
			}
			usage := map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 3, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 13}
			var item map[string]any
			if done {
				item = map[string]any{"type": "message", "id": "msg_2", "role": "assistant", "status": "completed", "content": []any{map[string]any{"type": "output_text", "text": "done", "annotations": []any{}}}}
			} else {
				item = map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": jsonOf(map[string]any{"cmd": "echo hi > " + file})}
			}
			events := []string{
				event("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1"}}),
				event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item}),
			}
			if done {
				events = append(events, event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_2", "output_index": 0, "content_index": 0, "delta": "done"}))
			}
			events = append(events,
				event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item}),
				event("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1", "usage": usage}}),
			)
			sse(w, events...)
		},
	}
}

// messagesProtocol is Anthropic Messages as Claude Code reads it.
func messagesProtocol(file string) fakeProtocol {
	return fakeProtocol{
		paths:      []string{"/v1/messages", "/v1/messages/count_tokens"},
		authOK:     func(h http.Header) bool { return h.Get("X-Api-Key") == testToken },
		filename:   file,
		tools:      []string{"Bash"},
		projectDoc: "CLAUDE.md",
		answer: func(w http.ResponseWriter, path string, body []byte) {
			var req struct {
				Stream   bool `json:"stream"`
				Messages []struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			json.Unmarshal(body, &req)
			if strings.HasSuffix(path, "/count_tokens") {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"input_tokens":10}`)
				return
			}
			done := false
			for _, m := range req.Messages {
				done = done || (m.Role == "user" && bytes.Contains(m.Content, []byte(`"tool_result"`)))
			}
			if !req.Stream {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, jsonOf(map[string]any{"id": "msg_0", "type": "message", "role": "assistant", "model": "test-model", "content": []any{map[string]any{"type": "text", "text": "done"}}, "stop_reason": "end_turn", "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}))
				return
			}
			start := event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "test-model", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 0}}})
			stop := "end_turn"
			var block []string
			if done {
				block = []string{
					event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
					event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}}),
				}
			} else {
				stop = "tool_use"
				args := jsonOf(map[string]any{"command": "echo hi > " + file, "description": "Write a file"})
				block = []string{
					event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{}}}),
					// The arguments split across two deltas, as providers send them.
					event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": args[:10]}}),
					event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": args[10:]}}),
				}
			}
			events := append([]string{start}, block...)
			events = append(events,
				event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
				event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 3}}),
				event("message_stop", map[string]any{"type": "message_stop"}),
			)
			sse(w, events...)
		},
	}
}

// chatProtocol is Chat Completions as OpenCode reads it, usage in a last
// chunk (stream_options.include_usage).
func chatProtocol(file string) fakeProtocol {
	return fakeProtocol{
		paths:    []string{"/v1/chat/completions"},
		authOK:   bearer,
		filename: file,
		tools:    []string{"bash", "grep"},
		// Not read by default with OPENCODE_DISABLE_PROJECT_CONFIG: named
		// in its config.
		projectDoc: "AGENTS.md",
		answer: func(w http.ResponseWriter, _ string, body []byte) {
			var req struct {
				Stream   bool `json:"stream"`
				Messages []struct {
					Role string `json:"role"`
				} `json:"messages"`
			}
			json.Unmarshal(body, &req)
			done := false
			for _, m := range req.Messages {
				done = done || m.Role == "tool"
			}
			if !req.Stream {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, jsonOf(map[string]any{"id": "c0", "object": "chat.completion", "created": 1, "model": "test-model", "choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "done"}, "finish_reason": "stop"}}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}))
				return
			}
			chunk := func(delta map[string]any, finish any) string {
				return "data: " + jsonOf(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "test-model", "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}) + "\n\n"
			}
			var events []string
			if done {
				events = []string{chunk(map[string]any{"role": "assistant", "content": ""}, nil), chunk(map[string]any{"content": "done"}, nil), chunk(map[string]any{}, "stop")}
			} else {
				args := jsonOf(map[string]any{"command": "echo hi > " + file, "description": "Write a file"})
				// Two calls in one turn: the shell, and grep (which runs
				// ripgrep: the tools directory's, or one OpenCode would
				// fetch).
				events = []string{
					chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function", "function": map[string]any{"name": "bash", "arguments": ""}}}}, nil),
					chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[:10]}}}}, nil),
					chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[10:]}}}}, nil),
					chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 1, "id": "call_2", "type": "function", "function": map[string]any{"name": "grep", "arguments": jsonOf(map[string]any{"pattern": "no-such-text"})}}}}, nil),
					chunk(map[string]any{}, "tool_calls"),
				}
			}
			events = append(events,
				"data: "+jsonOf(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "test-model", "choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})+"\n\n",
				"data: [DONE]\n\n")
			sse(w, events...)
		},
	}
}

// agentUID is the sandbox's user: a test running as root runs the CLI as
// it, as sessions do (and so OpenCode finds its config directory
// unwritable, and Claude Code is not run as root).
const agentUID = 1000

func TestRealCLIs(t *testing.T) {
	tools := toolsDir(t)
	cases := []struct {
		driver   string
		protocol fakeProtocol
	}{
		{Codex, responsesProtocol("made-by-codex.txt")},
		{ClaudeCode, messagesProtocol("made-by-claude.txt")},
		{OpenCode, chatProtocol("made-by-opencode.txt")},
	}
	for _, tc := range cases {
		for _, readOnly := range []bool{false, true} {
			name := tc.driver
			if readOnly {
				name += "/read-only"
			}
			t.Run(name, func(t *testing.T) { testRealCLI(t, tools, tc.driver, tc.protocol, readOnly) })
		}
	}
}

// testTask starts with a dash (not an option), holds a double space, a
// newline and quotes: it must reach the model as it is.
const testTask = "-v  is not a flag here.\nWrite \"hi\" into a file, then say done."

// cliRun is one run of a real CLI against a fake provider.
type cliRun struct {
	in        Input
	inv       Invocation
	stdout    []byte
	stderr    []byte
	err       error // of the process
	reqs      []recorded
	lookups   []string
	isolated  bool // lookups were recorded
	workspace string
}

// runCLI runs driver's CLI from tools on testTask against protocol, in
// its own network namespace when it can, as the agent's user when root.
func runCLI(t *testing.T, tools, driver string, protocol fakeProtocol, readOnly bool) cliRun {
	t.Helper()
	requireInstalled(t, tools, driver)
	netns := newIsolatedNet(t)
	var ln net.Listener
	var err error
	netns.do(func() { ln, err = net.Listen("tcp", "127.0.0.1:0") })
	if err != nil {
		t.Fatal(err)
	}
	srv := newFakeProvider(t, ln, protocol)

	base := t.TempDir()
	workspace, home := filepath.Join(base, "workspace"), filepath.Join(base, "home")
	for _, d := range []string{workspace, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if protocol.projectDoc != "" {
		if err := os.WriteFile(filepath.Join(workspace, protocol.projectDoc), []byte(projectRule+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := Input{
		Task:         testTask,
		Instructions: "You are a careful engineer.",
		ReadOnly:     readOnly,
		BaseURL:      srv.URL + "/v1",
		Token:        testToken,
		Model:        "test-model",
		ToolsDir:     tools,
		Home:         home,
		Workspace:    workspace,
	}
	inv, err := Build(driver, in)
	if err != nil {
		t.Fatalf("Build(%s) = %v", driver, err)
	}
	for p, b := range inv.Files {
		if bytes.Contains(b, []byte(testToken)) {
			t.Errorf("config file %s holds the token: it belongs in the environment only", p)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, inv.Argv[0], inv.Argv[1:]...)
	cmd.Dir = workspace
	cmd.Env = inv.Env
	cmd.Stdin = bytes.NewReader(inv.Stdin) // a pipe closed once written, as the runner's
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	if os.Geteuid() == 0 {
		asAgent(t, base)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: agentUID, Gid: agentUID}}
	}
	netns.do(func() { err = cmd.Run() })
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && cmd.ProcessState != nil {
		t.Logf("%s: exit %d, peak RSS %d MiB (MinMemory %d MiB)", driver, cmd.ProcessState.ExitCode(), ru.Maxrss>>10, inv.MinMemory/mib)
	}
	files, size := du(home)
	t.Logf("%s: HOME holds %d files, %d KiB after the run", driver, files, size>>10)
	r := cliRun{in: in, inv: inv, stdout: stdout.Bytes(), stderr: stderr.Bytes(), err: err, reqs: srv.requests(), workspace: workspace}
	if netns.dns != nil {
		r.isolated, r.lookups = true, netns.dns.lookups()
	}
	return r
}

func (r cliRun) String() string {
	return fmt.Sprintf("stderr:\n%s\nstdout:\n%s", bound(string(r.stderr), 8000), bound(string(r.stdout), 8000))
}

// checkTraffic: the CLI called only protocol's paths, with the run's token,
// and looked up no name (each would be a place it tried to reach).
func (r cliRun) checkTraffic(t *testing.T, protocol fakeProtocol) {
	t.Helper()
	if r.isolated {
		if len(r.lookups) > 0 {
			t.Errorf("the CLI looked up %v: it tried to reach more than the gateway", r.lookups)
		}
	} else {
		t.Log("the CLI's own lookups were not checked (no network namespace)")
	}
	if len(r.reqs) == 0 {
		t.Errorf("the provider saw no request")
	}
	for _, q := range r.reqs {
		allowed := false
		for _, p := range protocol.paths {
			allowed = allowed || q.Path == p
		}
		if !allowed || q.Method != http.MethodPost {
			t.Errorf("the CLI called %s %s; it may call only POST %v", q.Method, q.Path, protocol.paths)
		}
		if !q.authOK {
			t.Errorf("%s %s came without the run's token as its key: headers %v", q.Method, q.Path, redactHeaders(q.Header))
		}
	}
}

func testRealCLI(t *testing.T, tools, driver string, protocol fakeProtocol, readOnly bool) {
	r := runCLI(t, tools, driver, protocol, readOnly)
	if r.err != nil {
		t.Fatalf("%s: %v\n%s", driver, r.err, r)
	}
	r.checkTraffic(t, protocol)

	final, transcript, err := Parse(driver, r.stdout)
	if err != nil || final != "done" {
		t.Errorf("Parse = %q, %v; want \"done\"\n%s", final, err, r)
	}
	kinds := map[string]int{}
	results := map[string]Event{}
	for _, e := range transcript {
		kinds[e.Kind]++
		if e.Kind == EventToolResult {
			results[e.Name] = e
		}
	}
	for _, k := range []string{EventToolCall, EventToolResult, EventMessage, EventModel} {
		if kinds[k] == 0 {
			t.Errorf("transcript has no %s event: %+v", k, transcript)
		}
	}
	for _, tool := range protocol.tools {
		if e, ok := results[tool]; !ok || e.IsError {
			t.Errorf("tool %s: result %+v (found %v); want one that did not fail", tool, e, ok)
		}
	}

	// The command the model asked for ran in the workspace, and nothing
	// else landed there: the config is under HOME.
	got, err := os.ReadFile(filepath.Join(r.workspace, protocol.filename))
	if err != nil || string(got) != "hi\n" {
		t.Errorf("%s = %q, %v; want \"hi\\n\"", protocol.filename, got, err)
	}
	if got, want := dirNames(t, r.workspace), sorted([]string{protocol.filename, protocol.projectDoc}); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("workspace holds %v; want only %v", got, want)
	}

	if len(r.reqs) < 2 {
		t.Errorf("the provider saw %d requests; want a tool turn and an answer turn", len(r.reqs))
	}
	// The task, the agent's instructions, the project's and, read-only,
	// the note reach the model as they are.
	if len(r.reqs) > 0 {
		want := []string{testTask, r.in.Instructions, projectRule}
		if readOnly {
			want = append(want, readOnlyNote)
		}
		for _, w := range want {
			if !bytes.Contains(r.reqs[0].Body, jsonText(w)) {
				t.Errorf("the first request does not hold %q", w)
			}
		}
	}
	if *record && !readOnly {
		writeSamples(t, driver, r.reqs, r.stdout)
	}
}

// A provider error (what the gateway answers when the budget is spent)
// reaches Parse as the CLI's failure, in the provider's words.
func TestRealCLIsReportProviderErrors(t *testing.T) {
	tools := toolsDir(t)
	const words = "the agent's token budget is spent"
	openAIError := func(w http.ResponseWriter, _ string, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, jsonOf(map[string]any{"error": map[string]any{"message": words, "type": "invalid_request_error", "code": "budget_exhausted"}}))
	}
	cases := []struct {
		driver   string
		protocol fakeProtocol
	}{
		{Codex, fakeProtocol{paths: []string{"/v1/responses"}, authOK: bearer, answer: openAIError}},
		{ClaudeCode, fakeProtocol{paths: []string{"/v1/messages", "/v1/messages/count_tokens"}, authOK: func(h http.Header) bool { return h.Get("X-Api-Key") == testToken },
			answer: func(w http.ResponseWriter, _ string, _ []byte) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, jsonOf(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": words}}))
			}}},
		{OpenCode, fakeProtocol{paths: []string{"/v1/chat/completions"}, authOK: bearer, answer: openAIError}},
	}
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			r := runCLI(t, tools, tc.driver, tc.protocol, false)
			r.checkTraffic(t, tc.protocol)
			final, _, err := Parse(tc.driver, r.stdout)
			if code := corral.ErrorCode(err); code != corral.EUNAVAIL || !strings.Contains(err.Error(), words) {
				t.Errorf("Parse = %q, %v (%s); want %s naming %q\nexit: %v\n%s", final, err, code, corral.EUNAVAIL, words, r.err, r)
			}
			t.Logf("%s: exit %v; Parse: %v", tc.driver, r.err, err)
			if *record {
				out := bytes.ReplaceAll(r.stdout, []byte(testToken), []byte("TOKEN"))
				if err := os.WriteFile(filepath.Join("testdata", tc.driver+".error.stdout.jsonl"), out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimSuffix(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte(`"`))[1:]
}

// asAgent lets the agent's user into the test's directories.
func asAgent(t *testing.T, base string) {
	t.Helper()
	for d := base; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.Walk(base, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, agentUID, agentUID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// du counts the files under dir and their bytes.
func du(dir string) (files int, bytes int64) {
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			files++
			bytes += fi.Size()
		}
		return nil
	})
	return files, bytes
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func redactHeaders(h map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = strings.ReplaceAll(v, testToken, "TOKEN")
	}
	return out
}

// writeSamples keeps the first model request of each distinct path (the
// token replaced) and the CLI's stdout in testdata/.
func writeSamples(t *testing.T, driver string, reqs []recorded, stdout []byte) {
	t.Helper()
	seen := map[string]bool{}
	for i, r := range reqs {
		if seen[r.Path] && i != len(reqs)-1 {
			continue
		}
		seen[r.Path] = true
		name := fmt.Sprintf("%s.request%d.json", driver, i+1)
		r.Header = redactHeaders(r.Header)
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(testToken), []byte("TOKEN"))
		if err := os.WriteFile(filepath.Join("testdata", name), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := bytes.ReplaceAll(stdout, []byte(testToken), []byte("TOKEN"))
	if err := os.WriteFile(filepath.Join("testdata", driver+".stdout.jsonl"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}
