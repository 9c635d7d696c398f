package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"corral"
	"corral/internal/sanitize"
)

// The tools the model is offered. Each runs inside the agent's sandbox on
// the run's staged tree, mounted at /workspace, which is also the working
// directory: the kernel, not this code, decides what a tool may touch.
var tools = []corral.ModelTool{
	{
		Name:        "shell",
		Description: "Run a shell command (sh -c) in /workspace. There is no network. Returns the exit code and the combined output, capped.",
		Parameters:  schema(map[string]string{"command": "the command line"}, "command"),
	},
	{
		Name:        "read_file",
		Description: "Read a text file of the workspace.",
		Parameters:  schema(map[string]string{"path": "a path relative to /workspace"}, "path"),
	},
	{
		Name:        "write_file",
		Description: "Write a file of the workspace, creating its directories; replaces the file if it exists.",
		Parameters:  schema(map[string]string{"path": "a path relative to /workspace", "content": "the whole new content"}, "path", "content"),
	},
	{
		Name:        "list_files",
		Description: "List a directory of the workspace, one entry a line; directories end in /.",
		Parameters:  schema(map[string]string{"path": "a directory relative to /workspace; \".\" for the top"}, "path"),
	},
}

func schema(props map[string]string, required ...string) map[string]any {
	p := map[string]any{}
	for name, desc := range props {
		p[name] = map[string]any{"type": "string", "description": desc}
	}
	return map[string]any{"type": "object", "properties": p, "required": required, "additionalProperties": false}
}

// Caps on what goes back to the model and into the trace.
const (
	maxToolOutput  = 32 << 10 // what the model sees of one tool's output
	maxTraceOutput = 4 << 10  // what the trace keeps of it
	maxWriteBytes  = 8 << 20  // the largest file write_file accepts
)

// toolResult is how one tool call ended.
type toolResult struct {
	ExitCode  int              `json:"exit_code"`
	Output    string           `json:"output"`
	Violation corral.Violation `json:"violation,omitempty"`
	Error     string           `json:"error,omitempty"`
}

// forModel is the result as the model reads it.
func (r toolResult) forModel(name string) string {
	switch {
	case r.Error != "":
		return "error: " + r.Error
	case name == "shell":
		b, _ := json.Marshal(struct {
			ExitCode  int              `json:"exit_code"`
			Output    string           `json:"output"`
			Violation corral.Violation `json:"violation"`
		}{r.ExitCode, r.Output, r.Violation})
		return string(b)
	default:
		return r.Output
	}
}

// toolSpec is a tool call turned into one sandboxed command.
type toolSpec struct {
	argv  []string
	stdin []byte
}

// parseTool validates a call's arguments and builds its command. An error
// here is the model's mistake and goes back to it as the result.
func parseTool(call corral.ToolCall) (toolSpec, error) {
	var args struct {
		Command *string `json:"command"`
		Path    *string `json:"path"`
		Content *string `json:"content"`
	}
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
		return toolSpec{}, fmt.Errorf("the arguments are not a JSON object: %v", err)
	}
	need := func(name string, v *string) (string, error) {
		if v == nil {
			return "", fmt.Errorf("%s needs %q", call.Name, name)
		}
		if strings.IndexByte(*v, 0) >= 0 {
			return "", fmt.Errorf("%q contains a NUL byte", name)
		}
		return *v, nil
	}
	switch call.Name {
	case "shell":
		cmd, err := need("command", args.Command)
		if err != nil {
			return toolSpec{}, err
		}
		if strings.TrimSpace(cmd) == "" {
			return toolSpec{}, fmt.Errorf("the command is empty")
		}
		return toolSpec{argv: []string{"sh", "-c", cmd}}, nil
	case "read_file":
		p, err := need("path", args.Path)
		if err != nil {
			return toolSpec{}, err
		}
		if p, err = workspacePath(p, false); err != nil {
			return toolSpec{}, err
		}
		return toolSpec{argv: []string{"cat", "--", p}}, nil
	case "write_file":
		p, err := need("path", args.Path)
		if err != nil {
			return toolSpec{}, err
		}
		if args.Content == nil {
			return toolSpec{}, fmt.Errorf("write_file needs \"content\"")
		}
		content := *args.Content // goes in on stdin: any bytes may be written
		if len(content) > maxWriteBytes {
			return toolSpec{}, fmt.Errorf("the content is over %d bytes", maxWriteBytes)
		}
		if p, err = workspacePath(p, false); err != nil {
			return toolSpec{}, err
		}
		// The path is an argument, never part of the script.
		script := `d=$(dirname -- "$1") && mkdir -p -- "$d" && cat > "$1"`
		return toolSpec{argv: []string{"sh", "-c", script, "write_file", p}, stdin: []byte(content)}, nil
	case "list_files":
		p := "."
		if args.Path != nil {
			v, err := need("path", args.Path)
			if err != nil {
				return toolSpec{}, err
			}
			if p, err = workspacePath(v, true); err != nil {
				return toolSpec{}, err
			}
		}
		return toolSpec{argv: []string{"ls", "-1Ap", "--", p}}, nil
	default:
		return toolSpec{}, fmt.Errorf("there is no tool %q: use shell, read_file, write_file or list_files", call.Name)
	}
}

// workspacePath checks that p names something inside /workspace and
// returns it relative, as the sandbox's working directory is /workspace.
// The sandbox is what really confines a path (no ".." or link leaves the
// mount); this check gives the model a clear answer instead.
func workspacePath(p string, dirOK bool) (string, error) {
	p = strings.TrimPrefix(p, "/workspace/")
	if p == "/workspace" || p == "" {
		p = "."
	}
	if path.IsAbs(p) {
		return "", fmt.Errorf("path %q is outside the workspace: use a path relative to /workspace", p)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q leaves the workspace", p)
	}
	if clean == "." && !dirOK {
		return "", fmt.Errorf("path %q is the workspace itself, not a file", p)
	}
	if clean != "." {
		// The one path validator, as for a person's upload: a name the
		// files API refuses is refused here too (and the manifest
		// protects one a shell command makes anyway).
		n, err := sanitize.Path(clean)
		if err != nil {
			return "", fmt.Errorf("%s", corral.ErrorMessage(err))
		}
		clean = n
	}
	if strings.HasPrefix(clean, "-") {
		clean = "./" + clean
	}
	return clean, nil
}

// capText cuts s to at most n bytes on a rune boundary, saying so.
func capText(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[... %d more bytes not shown]", len(s)-cut), true
}

// commandTimeout bounds one tool command's wall time (the run's own time
// left bounds it too).
const commandTimeout = 10 * time.Minute

// outputMax is the output one tool command may write.
func outputMax(l corral.Limits) int64 {
	if l.OutputBytes > 0 {
		return l.OutputBytes
	}
	return corral.DefaultOutputBytes
}

// sessionSpec is a run's sandbox: the agent's limits bound the whole run
// (every command together), and it lasts a little past the run's own time,
// which ends the run first.
func sessionSpec(run corral.Run, agent corral.Agent, timeout time.Duration) corral.SessionSpec {
	spec := corral.SessionSpec{
		ID:       run.ID,
		StageID:  run.StageID,
		ReadOnly: agent.Policy.FS == corral.FSReadOnly,
		CPU:      time.Duration(agent.Limits.CPUMillis) * time.Millisecond,
		Memory:   agent.Limits.MemoryBytes,
		Pids:     agent.Limits.Pids,
		Wall:     timeout + time.Minute,
	}
	if spec.CPU == 0 {
		// One core for the whole run's time.
		spec.CPU = timeout
	}
	// The agent's defaults, given here rather than left to the node's
	// sandbox: what the API shows as the default is what a run gets.
	if spec.Memory == 0 {
		spec.Memory = corral.DefaultMemoryBytes
	}
	if spec.Pids == 0 {
		spec.Pids = corral.DefaultPids
	}
	return spec
}

// output collects a tool's stdout and stderr together; the sandbox copies
// each from its own goroutine. The first maxToolOutput bytes are also
// handed to live, as they come, for watchers.
type output struct {
	mu    sync.Mutex
	buf   bytes.Buffer // the head the model, watchers and the trace may see
	total int64        // and how much the command wrote in all
	live  func(offset int, text string)
}

// outputKept is what is kept of a command's output: what the model sees,
// and enough to end it on a whole character. The rest is counted, not
// kept: a command may write far more than anyone is shown, and the
// server must not hold it.
const outputKept = maxToolOutput + utf8.UTFMax

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := o.buf.Len(); o.live != nil && n < maxToolOutput {
		o.live(n, string(p[:min(len(p), maxToolOutput-n)]))
	}
	o.total += int64(len(p))
	if room := outputKept - o.buf.Len(); room > 0 {
		o.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// text is the output as the model reads it: at most n bytes (n at most
// maxToolOutput), cut on a character, and how much more there was.
func (o *output) text(n int) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.buf.Bytes()
	if o.total <= int64(n) {
		return string(b), false
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + fmt.Sprintf("\n[... %d more bytes not shown]", o.total-int64(cut)), true
}

// head is what watchers may see of the output so far.
func (o *output) head() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.buf.Bytes()
	return string(b[:min(len(b), maxToolOutput)])
}
