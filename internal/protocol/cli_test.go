package protocol

import (
	"bytes"
	"context"
	"corral/internal/toolstest"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRealCLIs is the real proof: each agent CLI, as installed from npm,
// runs a task against a gateway made of this package (Parse* and Relay
// behind an httptest server) over a scripted provider that speaks only
// Chat Completions. The provider first answers with two parallel shell
// tool calls that each write a file, their arguments split across chunks,
// then with a text. The
// CLI must run the tool, send its result back, and end on the text; the
// usage the gateway relayed must be what the provider reported.
//
// It needs the CLIs: CORRAL_CLI_DIR names the directory they were installed
// into (npm install --prefix DIR @openai/codex@0.169.0 opencode-ai@1.18.33
// @anthropic-ai/claude-code@2.1.328); the test skips without it. The CLIs
// run outside any sandbox, in temporary directories, with only the
// environment given here (no key of the machine's reaches them).
func TestRealCLIs(t *testing.T) {
	dir := cliDir(t)
	for _, tc := range cliCases() {
		t.Run(tc.name, func(t *testing.T) {
			bin := cliBin(t, dir, tc.bin)
			p := &scriptedProvider{tool: tc.tool, args: []map[string]any{tc.args(proofCommands[0]), tc.args(proofCommands[1])}}
			up := httptest.NewServer(p)
			defer up.Close()
			g := &testGateway{upstream: up.URL}
			gw := httptest.NewServer(g.handler())
			defer gw.Close()

			home, work := t.TempDir(), t.TempDir()
			cmd := tc.run(bin, gw.URL, home, work)
			cmd.Dir = work
			cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+home, "CORRAL_TOKEN="+cliToken)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := runFor(cmd, 4*time.Minute); err != nil {
				t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s\ngateway calls: %v", tc.name, err, tail(stdout.String()), tail(stderr.String()), g.log())
			}
			for file, want := range map[string]string{"proof.txt": "corral was here", "proof2.txt": "and here"} {
				got, err := os.ReadFile(filepath.Join(work, file))
				if err != nil || strings.TrimSpace(string(got)) != want {
					t.Errorf("%s = %q, %v; want both parallel calls to have run", file, got, err)
				}
			}
			if !strings.Contains(stdout.String(), finalText) {
				t.Errorf("the CLI's output does not end on the provider's text %q:\n%s", finalText, tail(stdout.String()))
			}
			reported, relayed := p.total(), g.total()
			if reported.Input == 0 || relayed != reported {
				t.Errorf("usage relayed = %+v, the provider reported %+v", relayed, reported)
			}
			if !p.sawToolResult() {
				t.Error("the provider never got the tool's result back")
			}
			for _, a := range g.auths() {
				if !strings.Contains(a, cliToken) {
					t.Errorf("a call carried %q, not the token the CLI was given", a)
				}
			}
			t.Logf("%s: gateway calls %v", tc.name, g.log())
		})
	}
}

// cliCase is one CLI: its binary, its shell tool and how to start it on
// a task against a gateway at base.
type cliCase struct {
	name string
	bin  string
	tool string // the CLI's shell tool, and its arguments
	args func(cmd string) map[string]any
	run  func(bin, base, home, work string) *exec.Cmd
}

func cliCases() []cliCase {
	return []cliCase{
		{"codex", "codex", "exec_command",
			func(cmd string) map[string]any { return map[string]any{"cmd": cmd} },
			func(bin, base, home, work string) *exec.Cmd {
				c := exec.Command(bin, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
					"-c", "model_provider=corral",
					"-c", fmt.Sprintf(`model_providers.corral={name="corral",base_url="%s/v1",env_key="CORRAL_TOKEN",wire_api="responses"}`, base),
					"-c", "model=corral-test-model", task)
				c.Env = append(c.Env, "CODEX_HOME="+home)
				return c
			}},
		{"claude-code", "claude", "Bash",
			func(cmd string) map[string]any {
				return map[string]any{"command": cmd, "description": "Write the proof"}
			},
			func(bin, base, home, work string) *exec.Cmd {
				c := exec.Command(bin, "-p", task, "--output-format", "stream-json", "--verbose",
					"--dangerously-skip-permissions", "--model", "corral-test-model")
				c.Env = append(c.Env, "ANTHROPIC_BASE_URL="+base, "ANTHROPIC_API_KEY="+cliToken,
					// As root Claude Code skips its permission prompts only
					// when told it is in a sandbox.
					"IS_SANDBOX=1", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
				return c
			}},
		{"opencode", "opencode", "bash",
			func(cmd string) map[string]any {
				return map[string]any{"command": cmd, "description": "Write the proof"}
			},
			func(bin, base, home, work string) *exec.Cmd {
				cfg := filepath.Join(home, "opencode.json")
				os.WriteFile(cfg, []byte(`{"$schema":"https://opencode.ai/config.json",
"provider":{"corral":{"npm":"@ai-sdk/openai-compatible","name":"Corral","options":{"baseURL":"`+base+`/v1","apiKey":"{env:CORRAL_TOKEN}"},
"models":{"corral-test-model":{"name":"corral-test-model"}}}},
"model":"corral/corral-test-model","share":"disabled","autoupdate":false}`), 0o644)
				c := exec.Command(bin, "run", task)
				c.Env = append(c.Env, "OPENCODE_CONFIG="+cfg, "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1")
				return c
			}},
	}
}

const (
	task      = "Write 'corral was here' into proof.txt and 'and here' into proof2.txt, then say you are done."
	finalText = "The proof is written."
	cliToken  = "corral-run-token-for-the-test"
)

func cliDir(t *testing.T) string {
	dir := os.Getenv("CORRAL_CLI_DIR")
	if dir == "" {
		dir = toolstest.Dir() // make tools', which make test sets
	}
	if dir == "" {
		toolstest.Skip(t, "neither CORRAL_CLI_DIR nor %s names the directory the agent CLIs are installed in", toolstest.DirEnv)
	}
	return dir
}

func cliBin(t *testing.T, dir, name string) string {
	bin := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not installed in CORRAL_CLI_DIR: %v", name, err)
	}
	return bin
}

// TestRealCLIsRefused: the gateway's own errors, through WriteError, make
// each real CLI stop as it should: a spent budget or a bad token at once
// (OpenCode's title call makes its two), never retrying for minutes.
func TestRealCLIsRefused(t *testing.T) {
	dir := cliDir(t)
	scenarios := []struct {
		name     string
		status   int
		maxCalls map[string]int
	}{
		// Codex stops at once on its quota error (WriteError's 402 for
		// Responses); the others on 402 itself.
		{"budget spent", http.StatusPaymentRequired, map[string]int{"codex": 1, "claude-code": 1, "opencode": 2}},
		// Codex retries a 401 five times, quickly; Claude Code would ten
		// times over minutes but for X-Should-Retry.
		{"bad token", http.StatusUnauthorized, map[string]int{"codex": 6, "claude-code": 1, "opencode": 2}},
	}
	for _, sc := range scenarios {
		for _, tc := range cliCases() {
			t.Run(sc.name+"/"+tc.name, func(t *testing.T) {
				bin := cliBin(t, dir, tc.bin)
				g := &testGateway{refuse: sc.status}
				gw := httptest.NewServer(g.handler())
				defer gw.Close()
				home, work := t.TempDir(), t.TempDir()
				cmd := tc.run(bin, gw.URL, home, work)
				cmd.Dir = work
				cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+home, "CORRAL_TOKEN="+cliToken)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := runFor(cmd, 2*time.Minute)
				if err == nil {
					t.Errorf("the CLI succeeded although every call was refused")
				}
				if err != nil && strings.Contains(err.Error(), "still running") {
					t.Fatalf("the CLI did not stop: %v; gateway calls %v", err, g.log())
				}
				if n := len(g.log()); n == 0 || n > sc.maxCalls[tc.name] {
					t.Errorf("the CLI called %d times, want 1 to %d: %v", n, sc.maxCalls[tc.name], g.log())
				}
				says := lastLines(stdout.String()+stderr.String(), 2)
				var result struct {
					Result string `json:"result"`
				}
				if json.Unmarshal([]byte(lastLines(stdout.String(), 1)), &result) == nil && result.Result != "" {
					says = result.Result // Claude Code's stream-json
				}
				t.Logf("%s: %d calls; says: %s", tc.name, len(g.log()), says)
			})
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

var proofCommands = [2]string{"echo 'corral was here' > proof.txt", "echo 'and here' > proof2.txt"}

func runFor(cmd *exec.Cmd, d time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("still running after %v", d)
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// testGateway is the gateway as the lead wires it, less tokens and budgets:
// parse, forward the Chat body, relay, meter.
type testGateway struct {
	upstream string
	refuse   int // when set, every model call is refused with this status

	mu     sync.Mutex
	usage  Usage
	calls  []string
	header []string
}

func (g *testGateway) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", g.serve(Chat, ParseChat))
	mux.HandleFunc("POST /v1/responses", g.serve(Responses, ParseResponses))
	mux.HandleFunc("POST /v1/messages", g.serve(Messages, ParseMessages))
	mux.HandleFunc("POST /v1/messages/count_tokens", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		out, err := CountTokens(b)
		if err != nil {
			WriteError(w, Messages, http.StatusBadRequest, err.Error())
			return
		}
		g.note("count_tokens", "")
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(Models(Chat, []string{"corral-test-model"}))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		g.note(r.Method+" "+r.URL.Path+" (not served)", "")
		WriteError(w, Chat, http.StatusNotFound, "no such endpoint")
	})
	return mux
}

func (g *testGateway) serve(p Protocol, parse func([]byte) (Call, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
		if g.refuse != 0 {
			g.note(fmt.Sprintf("%s refused %d", p, g.refuse), auth)
			msg := fmt.Sprintf("Corral refused the call (%d %s)", g.refuse, http.StatusText(g.refuse))
			if g.refuse == http.StatusPaymentRequired {
				WriteBudget(w, p, msg)
			} else {
				WriteError(w, p, g.refuse, msg)
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		call, err := parse(b)
		if err != nil {
			g.note(p.String()+" refused: "+err.Error(), auth)
			WriteError(w, p, http.StatusBadRequest, err.Error())
			return
		}
		// The provider's answer must outlive the client, for the usage.
		ctx := context.WithoutCancel(r.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.upstream+"/v1/chat/completions", bytes.NewReader(call.Chat))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			WriteError(w, p, http.StatusBadGateway, "the model provider could not be reached")
			return
		}
		res := Relay(r.Context(), w, resp, call)
		g.mu.Lock()
		g.usage.Input += res.Usage.Input
		g.usage.Output += res.Usage.Output
		g.usage.Estimated = g.usage.Estimated || res.Usage.Estimated
		g.mu.Unlock()
		g.note(fmt.Sprintf("%s stream=%v status=%d usage=%+v dropped=%v err=%v", p, call.Stream, res.Status, res.Usage, call.Dropped, res.Err), auth)
	}
}

func (g *testGateway) note(s, auth string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, s)
	if auth != "" {
		g.header = append(g.header, auth)
	}
}

func (g *testGateway) log() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

func (g *testGateway) auths() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.header...)
}

func (g *testGateway) total() Usage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.usage
}

// scriptedProvider speaks Chat Completions only. A request whose last
// message is a tool's result gets the final text; one with tools gets two
// calls of the CLI's shell tool; one without tools (a title) gets a short
// text.
type scriptedProvider struct {
	tool string
	args []map[string]any // one call each

	mu       sync.Mutex
	usage    Usage
	toolSeen bool
}

func (p *scriptedProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &req); err != nil || len(req.Messages) == 0 {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"bad request: %v","type":"invalid_request_error"}}`, err)
		return
	}
	hasTool := false
	for _, t := range req.Tools {
		hasTool = hasTool || t.Function.Name == p.tool
	}
	last := req.Messages[len(req.Messages)-1].Role
	usage := Usage{Input: int64(len(b)/5 + 1), Output: 9}
	p.mu.Lock()
	p.usage.Input += usage.Input
	p.usage.Output += usage.Output
	if last == "tool" {
		p.toolSeen = true
	}
	p.mu.Unlock()

	var deltas []map[string]any
	finish := "stop"
	switch {
	case last == "tool":
		deltas = []map[string]any{{"role": "assistant", "content": "The proof "}, {"content": "is written."}}
	case hasTool:
		// Two calls in parallel, each one's arguments in three pieces.
		deltas = []map[string]any{{"role": "assistant", "content": "I will write them."}}
		for i, args := range p.args {
			b, _ := json.Marshal(args)
			a := string(b)
			third := len(a) / 3
			deltas = append(deltas,
				map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_proof%d", i), "type": "function", "function": map[string]any{"name": p.tool, "arguments": a[:third]}}}},
				map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": a[third : 2*third]}}}},
				map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": a[2*third:]}}}})
		}
		finish = "tool_calls"
	default:
		deltas = []map[string]any{{"role": "assistant", "content": "Proof"}}
	}
	u := map[string]any{"prompt_tokens": usage.Input, "completion_tokens": usage.Output, "total_tokens": usage.Input + usage.Output}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": ""}
		for _, d := range deltas {
			if c, ok := d["content"].(string); ok {
				msg["content"] = msg["content"].(string) + c
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-s", "object": "chat.completion", "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}}, "usage": u})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	for _, d := range deltas {
		send(map[string]any{"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": nil}}})
	}
	send(map[string]any{"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "scripted",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}})
	send(map[string]any{"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "scripted", "choices": []any{}, "usage": u})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (p *scriptedProvider) total() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usage
}

func (p *scriptedProvider) sawToolResult() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.toolSeen
}
