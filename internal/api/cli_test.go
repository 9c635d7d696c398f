package api_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/api"
	"corral/internal/driver"
	"corral/internal/modeltest"
	"corral/internal/toolstest"
)

// needTools skips a test of the agent CLIs where make tools has not
// installed them; with CORRAL_REQUIRE_TOOLS=1 (CI) it fails instead.
func needTools(t *testing.T, name string) {
	t.Helper()
	needSandbox(t)
	toolstest.Need(t, driver.Installed(toolstest.Dir(), name))
}

// slow skips one of the slowest tests under -short (the inner loop:
// make unit-short); make test and CI run it.
func slow(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: skipped under -short (make test runs it)")
	}
}

// cliCase is one agent CLI: the shell tool it offers the model, and the
// arguments that run a command with it.
type cliCase struct {
	driver string
	tool   string
	args   func(cmd string) map[string]string
}

var cliCases = []cliCase{
	{corral.DriverCodex, "exec_command", func(cmd string) map[string]string { return map[string]string{"cmd": cmd} }},
	{corral.DriverClaudeCode, "Bash", func(cmd string) map[string]string {
		return map[string]string{"command": cmd, "description": "Write the proof"}
	}},
	{corral.DriverOpenCode, "bash", func(cmd string) map[string]string {
		return map[string]string{"command": cmd, "description": "Write the proof"}
	}},
}

// The proof the scripted model asks each CLI to make: a file written by a
// shell command, and what the command finds of the provider's key and of
// the network from inside the run.
const (
	proofContent = "corral was here\n"
	cliFinal     = "The proof is written."
	// probe looks for the provider's key in the run's environment, files
	// and processes (the pattern is put together at run time, so the
	// command's own text does not hold it), and tries the network: only
	// the gateway's port answers.
	probe = `printf 'corral was here\n' > proof.txt; ` +
		`k=$(printf '%s%s' 'sk-test-0123456789' 'abcdef-SECRET'); ` +
		`if cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -qF "$k" || grep -rqsF "$k" /tmp /workspace /opt/corral 2>/dev/null; then echo key=found; else echo key=absent; fi; ` +
		`for a in 127.0.0.1/41300 1.1.1.1/80 127.0.0.1/80; do if bash -c "exec 3<>/dev/tcp/$a" 2>/dev/null; then echo "net $a open"; else echo "net $a closed"; fi; done; ` +
		`echo "token=${OPENAI_API_KEY:-$ANTHROPIC_API_KEY}"; echo probed`
)

// TestAgentCLIs: each real agent CLI (Codex, Claude Code, OpenCode, as make
// tools installed them) runs an agent end to end inside Corral's sandbox,
// through Corral's gateway, against a provider that speaks only Chat
// Completions. The model asks for a shell command; the CLI runs it in the
// sandbox and sends its output back; the model ends on a text. Then: the
// file is in the change set with its hash, the run's tokens are what the
// provider reported, the trace verifies and holds no token, the provider's
// key was nowhere inside the run and the network was closed.
func TestAgentCLIs(t *testing.T) {
	for _, tc := range cliCases {
		t.Run(tc.driver, func(t *testing.T) {
			needTools(t, tc.driver)
			e := newEnv(t, envOptions{})
			owner := e.signup("owner@example.com", "Owner")
			id := owner.createAgent("cli-" + tc.driver)
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": tc.driver}).want(http.StatusOK)

			var mu sync.Mutex
			var toolOutput string
			e.answer(func(r modeltest.Request) modeltest.Reply {
				if res := r.LastToolResults(); len(res) > 0 {
					mu.Lock()
					toolOutput = res[len(res)-1].Content
					mu.Unlock()
					return modeltest.Text(cliFinal)
				}
				if !contains(r.Tools, tc.tool) {
					// A side request of the CLI's (a title): no tools.
					return modeltest.Text("Proof")
				}
				args, _ := json.Marshal(tc.args(probe))
				return modeltest.Calls(modeltest.ToolCall{ID: "call_1", Name: tc.tool, Arguments: string(args)})
			})
			run := owner.send(id, "Write the proof file.")
			done := owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
			events := owner.trace(run.ID)
			if done.Status != "completed" {
				t.Fatalf("run %s: %s (%s)\ntrace: %s", run.ID, done.Status, done.Reason, brief(events))
			}
			verify(t, run.ID, events)

			mu.Lock()
			out := toolOutput
			mu.Unlock()
			// The gateway's port is open (so the probe can tell), nothing
			// else is.
			for _, want := range []string{"key=absent", "net 127.0.0.1/41300 open", "net 1.1.1.1/80 closed", "net 127.0.0.1/80 closed", "probed"} {
				if !strings.Contains(out, want) {
					t.Errorf("the command's output the model got back lacks %q: %q", want, out)
				}
			}
			// The run's token, as the CLI held it, is refused now that the
			// run has ended, on its own session's connection as on another's.
			_, tok, _ := strings.Cut(out, "token=")
			tok, _, _ = strings.Cut(tok, "\n")
			if !strings.HasPrefix(tok, "crt_") {
				t.Fatalf("the CLI's key was %q, not a run token", tok)
			}
			for _, session := range []string{run.ID, "run_other"} {
				if status := gatewayCall(t, e, session, tok); status != http.StatusUnauthorized {
					t.Errorf("the ended run's token on session %s: %d, want 401", session, status)
				}
			}
			// The change set: proof.txt, measured by Corral.
			if done.ChangeSetID == nil {
				t.Fatal("the run has no change set")
			}
			var cs api.ChangeSetView
			owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
			sum := sha256.Sum256([]byte(proofContent))
			found := false
			for _, en := range cs.Entries {
				if en.Path == "proof.txt" {
					found = en.Op == "create" && en.NewSHA256 == hex.EncodeToString(sum[:])
				}
			}
			if !found {
				t.Errorf("change set entries = %+v, want proof.txt created with the proof's hash", cs.Entries)
			}
			// Tokens: what the provider reported, call by call.
			reqs := e.model.Requests()
			want := corral.Tokens{Input: int64(len(reqs)) * modeltest.DefaultInputTokens, Output: int64(len(reqs)) * modeltest.DefaultOutputTokens}
			if done.Tokens.Input != want.Input || done.Tokens.Output != want.Output || len(reqs) < 2 {
				t.Errorf("run tokens = %+v after %d provider calls, want %+v", done.Tokens, len(reqs), want)
			}
			usage := 0
			for _, ev := range events {
				if ev.Type == "usage" {
					usage++
				}
			}
			if usage != len(reqs) {
				t.Errorf("%d usage events for %d provider calls", usage, len(reqs))
			}
			for _, r := range reqs {
				if r.Authorization != "Bearer "+testModelKey {
					t.Errorf("the provider got Authorization %q, not Corral's key", r.Authorization)
				}
			}
			b, _ := json.Marshal(events)
			if strings.Contains(string(b), tok) || strings.Contains(string(b), testModelKey) {
				t.Error("the trace holds the run's token or the provider's key")
			}
			if !strings.Contains(string(b), "crt_[redacted]") {
				t.Error("the trace does not show the token the CLI printed as redacted")
			}
			// The CLI's answer is the run's, in the thread.
			if !strings.Contains(lastAssistant(t, owner, id), cliFinal) {
				t.Errorf("the thread does not end on the CLI's answer")
			}
		})
	}
}

// brief is a trace in one line per event, for a failure's message.
func brief(events []api.TraceView) string {
	var b strings.Builder
	for _, e := range events {
		d, _ := json.Marshal(e.Data)
		if len(d) > 300 {
			d = append(d[:300], "…"...)
		}
		fmt.Fprintf(&b, "\n  %d %s %s", e.Seq, e.Type, d)
	}
	return b.String()
}

// lastAssistant is the content of the agent's newest assistant message.
func lastAssistant(t *testing.T, c *client, agentID string) string {
	t.Helper()
	var l api.List[api.MessageView]
	c.do("GET", "/api/agents/"+agentID+"/messages", nil).want(http.StatusOK).decode(&l)
	for i := len(l.Items) - 1; i >= 0; i-- {
		if l.Items[i].Role == "assistant" {
			return l.Items[i].Content
		}
	}
	return ""
}

// gatewayCall calls GET /v1/models on the env's gateway socket as a
// supervisor joining session would, with token, and returns the status.
func gatewayCall(t *testing.T, e *env, session, token string) int {
	t.Helper()
	dir, err := os.Open(e.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	// Through the directory's descriptor: the path may be longer than a
	// socket address holds.
	c, err := net.Dial("unix", fmt.Sprintf("/proc/self/fd/%d/gateway.sock", dir.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(patience))
	fmt.Fprintf(c, "%sGET /v1/models HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", corral.GatewayPreamble(session), token)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAgentCLIPausesAtItsBudget: an agent CLI's call past the agent's
// budget is refused with the protocol's quota error (Codex stops on it
// at once), the run pauses when the CLI has ended, and raising the budget
// starts the CLI again on the same staged tree, which ends the run.
func TestAgentCLIPausesAtItsBudget(t *testing.T) {
	needTools(t, corral.DriverCodex)
	// A call reserves its request's bytes (Codex's are about 40 KB) and
	// the output cap; the first spends 500,000 of 1,200,000, and what is
	// left cannot hold the second's ceiling.
	e := newEnv(t, envOptions{maxOutput: 1_000_000})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("thrifty-cli")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": corral.DriverCodex, "budget": map[string]int{"tokens": 1_200_000}}).want(http.StatusOK)
	e.answer(func(r modeltest.Request) modeltest.Reply {
		if len(r.LastToolResults()) > 0 {
			return modeltest.Text(cliFinal)
		}
		if strings.Contains(r.Last().Content, "resumed") {
			// The resumed CLI finds its first call's file, and finishes.
			args, _ := json.Marshal(map[string]string{"cmd": "cat one.txt && printf 'two\\n' > two.txt"})
			return modeltest.Calls(modeltest.ToolCall{ID: "call_2", Name: "exec_command", Arguments: string(args)})
		}
		args, _ := json.Marshal(map[string]string{"cmd": "printf 'one\\n' > one.txt"})
		r1 := modeltest.Calls(modeltest.ToolCall{ID: "call_1", Name: "exec_command", Arguments: string(args)})
		r1.Usage = &modeltest.Usage{Input: modeltest.DefaultInputTokens, Output: 500_000}
		return r1
	})
	run := owner.send(id, "Write two files.")
	paused := owner.waitRun(run.ID, "paused", "completed", "errored")
	if paused.Status != "paused" || len(e.model.Requests()) != 1 {
		t.Fatalf("run = %s (%s) after %d provider calls, want paused after 1\ntrace: %s", paused.Status, paused.Reason,
			len(e.model.Requests()), brief(owner.trace(run.ID)))
	}
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"budget": map[string]int{"tokens": 100_000_000}}).want(http.StatusOK)
	done := owner.waitRun(run.ID, "completed", "errored", "paused")
	events := owner.trace(run.ID)
	if done.Status != "completed" {
		t.Fatalf("after the raise: %s (%s)\ntrace: %s", done.Status, done.Reason, brief(events))
	}
	verify(t, run.ID, events)
	got := strings.Join(types(events), " ")
	if !strings.Contains(got, "paused resumed") {
		t.Errorf("trace = %s, want a pause then a resume", got)
	}
	var cs api.ChangeSetView
	owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
	paths := map[string]bool{}
	for _, en := range cs.Entries {
		paths[en.Path] = true
	}
	if !paths["one.txt"] || !paths["two.txt"] {
		t.Errorf("change set = %+v, want one.txt (before the pause) and two.txt (after)", cs.Entries)
	}
	// Every provider call is on the run: the one before the pause and
	// those after.
	reqs := int64(len(e.model.Requests()))
	if done.Tokens.Input != reqs*modeltest.DefaultInputTokens {
		t.Errorf("tokens = %+v after %d calls", done.Tokens, reqs)
	}
}

// TestAgentCLIStopAndKill: stop and kill reach an agent CLI in the middle
// of its work (a shell command it started that sleeps): the run ends as
// asked, and nothing of it is left running.
func TestAgentCLIStopAndKill(t *testing.T) {
	needTools(t, corral.DriverCodex)
	for _, how := range []struct{ path, status string }{{"stop", "cancelled"}, {"kill", "killed"}} {
		t.Run(how.path, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			owner := e.signup("owner@example.com", "Owner")
			id := owner.createAgent("busy-cli")
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": corral.DriverCodex}).want(http.StatusOK)
			marker := "sleep 4251"
			if how.path == "kill" {
				marker = "sleep 4252"
			}
			e.answer(func(r modeltest.Request) modeltest.Reply {
				if len(r.LastToolResults()) > 0 {
					return modeltest.Text(cliFinal)
				}
				args, _ := json.Marshal(map[string]any{"cmd": marker, "yield_time_ms": 600000})
				return modeltest.Calls(modeltest.ToolCall{ID: "call_1", Name: "exec_command", Arguments: string(args)})
			})
			run := owner.send(id, "Wait a long time.")
			waitFor(t, "the CLI's "+marker, func() bool { return len(processesWith(marker)) > 0 })
			owner.do("POST", "/api/runs/"+run.ID+"/"+how.path, nil).want(http.StatusAccepted)
			done := owner.waitRun(run.ID, "cancelled", "killed", "completed", "errored")
			if done.Status != how.status {
				t.Fatalf("after %s: %s (%s)", how.path, done.Status, done.Reason)
			}
			waitFor(t, "nothing of the run left", func() bool { return len(processesWith(marker)) == 0 && len(processesWith("codex exec")) == 0 })
			verify(t, run.ID, owner.trace(run.ID))
		})
	}
}

// TestAgentCLIReattached: the server stops while an agent CLI's command
// runs (the runner closes, as for a restart; the session and its
// supervisor go on); a new runner re-attaches the run, the CLI's next
// model call is authorized by the new runner with the token the CLI
// already holds, and the run completes with the command's file.
func TestAgentCLIReattached(t *testing.T) {
	needTools(t, corral.DriverCodex)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("reattached-cli")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": corral.DriverCodex}).want(http.StatusOK)
	const marker = "sleep 4253"
	// The command waits, inside the sandbox, for a file the test puts in
	// the staged tree once the server is back.
	cmd := "while [ ! -e go ]; do " + marker + " 2>/dev/null & sleep 0.05; kill $! 2>/dev/null; done; printf 'after\n' > after.txt"
	e.answer(func(r modeltest.Request) modeltest.Reply {
		if len(r.LastToolResults()) > 0 {
			return modeltest.Text(cliFinal)
		}
		args, _ := json.Marshal(map[string]any{"cmd": cmd, "yield_time_ms": 600000})
		// Text with the call: a step the CLI reports before the restart.
		return modeltest.Reply{Content: "I will wait for go.", ToolCalls: []modeltest.ToolCall{{ID: "call_1", Name: "exec_command", Arguments: string(args)}}}
	})
	run := owner.send(id, "Wait for go, then write after.txt.")
	waitFor(t, "the CLI's command", func() bool { return len(processesWith("while [ ! -e go ]")) > 0 })

	waitFor(t, "a step of the CLI's in the trace", func() bool {
		for _, ev := range owner.trace(run.ID) {
			if ev.Type == "transcript" {
				return true
			}
		}
		return false
	})
	// The server stops; the CLI goes on in its session.
	if n, back := e.restart(); n != 0 || back != 1 {
		t.Fatalf("the restart reconciled %d runs and re-attached %d; want 0, 1", n, back)
	}
	stored, err := e.db.Run(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Through the overlay's mount, as the run sees its tree.
	if err := os.WriteFile(filepath.Join(e.dataDir, "stages", stored.StageID, "tree", "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "reconciled")
	events := owner.trace(run.ID)
	if done.Status != "completed" {
		t.Fatalf("re-attached run: %s (%s)\ntrace: %s", done.Status, done.Reason, brief(events))
	}
	verify(t, run.ID, events)
	if !strings.Contains(strings.Join(types(events), " "), "reattached") {
		t.Errorf("trace = %v, want a reattached event", types(events))
	}
	// The CLI's steps before the restart are not recorded twice (its
	// output is read from the start again).
	seen := map[string]bool{}
	steps := 0
	for _, ev := range events {
		if ev.Type != "transcript" {
			continue
		}
		steps++
		d, _ := json.Marshal(ev.Data)
		if seen[string(d)] {
			t.Errorf("transcript step recorded twice: %s", d)
		}
		seen[string(d)] = true
	}
	if steps == 0 {
		t.Error("no transcript step recorded")
	}
	var cs api.ChangeSetView
	owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
	if len(cs.Entries) == 0 || cs.Entries[0].Path != "after.txt" {
		t.Errorf("change set = %+v, want after.txt", cs.Entries)
	}
}

// TestAgentCLIMemoryViolation: an agent's own memory limit stands for its
// CLI (OpenCode needs several hundred MiB): crossing it ends the run with
// the memory violation, named.
func TestAgentCLIMemoryViolation(t *testing.T) {
	needTools(t, corral.DriverOpenCode)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("small-cli")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": corral.DriverOpenCode,
		"limits": map[string]int64{"memory_bytes": 96 << 20}}).want(http.StatusOK)
	e.answer(func(r modeltest.Request) modeltest.Reply { return modeltest.Text(cliFinal) })
	run := owner.send(id, "Say hello.")
	done := owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled")
	if done.Status != "errored" || done.Violation == nil || *done.Violation != string(corral.ViolationMemory) || !strings.Contains(done.Reason, "memory") {
		t.Fatalf("run = %s, violation %v (%s); want errored with the memory violation", done.Status, done.Violation, done.Reason)
	}
	verify(t, run.ID, owner.trace(run.ID))
}

// TestAgentCLIsNative: with a provider that speaks the CLI's protocol
// itself (CORRAL_MODEL_NATIVE), Codex's Responses calls and Claude Code's
// Messages calls go through as they are, with Corral's key, and are
// metered from the provider's own usage events.
func TestAgentCLIsNative(t *testing.T) {
	for _, tc := range cliCases[:2] { // codex (responses), claude-code (messages)
		t.Run(tc.driver, func(t *testing.T) {
			needTools(t, tc.driver)
			e := newEnv(t, envOptions{native: true})
			owner := e.signup("owner@example.com", "Owner")
			id := owner.createAgent("native-" + tc.driver)
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": tc.driver}).want(http.StatusOK)
			e.answer(func(r modeltest.Request) modeltest.Reply {
				if len(r.LastToolResults()) > 0 {
					return modeltest.Text(cliFinal)
				}
				if !contains(r.Tools, tc.tool) {
					return modeltest.Text("Proof")
				}
				args, _ := json.Marshal(tc.args(`printf 'corral was here\n' > proof.txt`))
				return modeltest.Calls(modeltest.ToolCall{ID: "call_1", Name: tc.tool, Arguments: string(args)})
			})
			run := owner.send(id, "Write the proof file.")
			done := owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
			events := owner.trace(run.ID)
			if done.Status != "completed" {
				t.Fatalf("run: %s (%s)\ntrace: %s", done.Status, done.Reason, brief(events))
			}
			verify(t, run.ID, events)
			want := "responses"
			if tc.driver == corral.DriverClaudeCode {
				want = "messages"
			}
			e.native.mu.Lock()
			hits, keys := e.native.hits[want], append([]string(nil), e.native.keys...)
			e.native.mu.Unlock()
			if hits == 0 {
				t.Fatalf("the provider took no %s call as it was: %v", want, e.native.hits)
			}
			for _, k := range keys {
				if k != testModelKey {
					t.Errorf("a call reached the provider with key %q, not Corral's", k)
				}
			}
			reqs := int64(len(e.model.Requests()))
			if done.Tokens.Input != reqs*modeltest.DefaultInputTokens || done.Tokens.Output != reqs*modeltest.DefaultOutputTokens {
				t.Errorf("run tokens = %+v after %d provider calls", done.Tokens, reqs)
			}
			var cs api.ChangeSetView
			owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
			if len(cs.Entries) != 1 || cs.Entries[0].Path != "proof.txt" {
				t.Errorf("change set = %+v", cs.Entries)
			}
			for _, ev := range events {
				if ev.Type == "usage" && strings.Contains(string(mustJSON(ev.Data)), `"estimated"`) {
					t.Errorf("a natively passed call was estimated: %s", mustJSON(ev.Data))
				}
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
