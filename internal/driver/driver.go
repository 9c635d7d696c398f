// Package driver knows the agent CLIs Corral can run in a run's sandbox
// instead of its own loop: Codex, Claude Code and OpenCode. For each it
// builds the whole invocation (argv, environment, config files) that starts
// the CLI non-interactively on a task, its own sandbox, approvals,
// telemetry and update checks off, its model traffic pointed only at the
// in-sandbox gateway with the run's token as its one credential; and it
// reads the CLI's machine-readable output back into a final answer and a
// transcript for the trace.
//
// The package is pure: it starts nothing and touches no sandbox or store.
// Installed is its one look at the disk, at the tools directory that
// `make tools` (scripts/install-tools.sh) fills from the pins in tools/.
package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"corral"
)

// The drivers, as an agent names them (the same strings as the root
// package's Driver constants).
const (
	Builtin    = corral.DriverBuiltin
	Codex      = corral.DriverCodex
	ClaudeCode = corral.DriverClaudeCode
	OpenCode   = corral.DriverOpenCode
)

// Where sessions see the tools directory (read-only) and the staged tree.
const (
	ToolsMount     = "/opt/corral/tools"
	WorkspaceMount = corral.WorkspaceDir
)

// Bounds of what Parse keeps for the trace: a CLI may print megabytes of
// tool output, and a trace event is a small record of what happened.
const (
	MaxText   = 4 << 10 // bytes of one event's Text or Args
	MaxEvents = 1000    // events of one transcript; a last one says the rest was left out
)

// Input is what a driver needs to start its CLI in a session. Every path
// is as seen inside the session.
type Input struct {
	Task         string // the person's message
	Instructions string // the agent's instructions, added to the CLI's own
	BaseURL      string // the gateway: "http://127.0.0.1:PORT/v1"
	Token        string // the run's token: the CLI's only credential
	Model        string
	ToolsDir     string // where the tools are: ToolsMount
	// Home is a private writable directory for HOME and the CLI's config
	// and state, never under Workspace (config must not become part of the
	// change set).
	Home string
	// Workspace is the staged tree, the CLI's working directory; ""
	// means WorkspaceMount. Home must not be inside it, and OpenCode is
	// pointed at its AGENTS.md.
	Workspace string
	ReadOnly  bool // the workspace is read-only (policy)
	// MCPURL is the gateway's MCP server of the delegation tools (streamable
	// HTTP), "http://127.0.0.1:PORT/mcp"; "" registers none. The CLI sends
	// Token to it as a bearer token, read from MCPTokenEnv: the token is in
	// no argv and no file.
	MCPURL string
	// MCPTimeout is how long one call of an MCP tool may take: a delegate
	// call waits for a whole child run, so the run's own time. Required
	// with MCPURL.
	MCPTimeout time.Duration
}

// MCPTokenEnv is the variable that holds the run's token for the MCP
// server. Not the CLIs' own key variables: Claude Code leaves its
// ANTHROPIC_API_KEY out of what it expands in an MCP server's headers.
const MCPTokenEnv = "CORRAL_MCP_TOKEN"

// mcpServer is the name the MCP server is registered under: the CLIs name
// its tools after it (mcp__corral__delegate).
const mcpServer = "corral"

// Invocation is how to start a CLI. The runner writes Files, then starts
// Argv with exactly Env in the workspace, Stdin on a pipe closed once it
// is written: Codex and OpenCode read a piped stdin to its end before
// they start.
type Invocation struct {
	Argv []string
	// Stdin is what the CLI reads on its stdin: OpenCode's task, which
	// its argument parser would change (a word like 20 becomes a number).
	Stdin []byte
	// Env is the whole environment: nothing is inherited.
	Env []string
	// Files are config files to write before the start: absolute paths
	// under Home, mode 0600, their directories created.
	Files map[string][]byte
	// MinMemory is the memory limit the CLI needs (bytes): the session's
	// should be at least this.
	MinMemory int64
}

// Event is one step of a CLI's work as it reported it, for the trace
// (type "transcript"). Text and Args are bounded by MaxText.
type Event struct {
	// Kind: EventModel (a model turn ended), EventMessage (text the agent
	// wrote), EventReasoning, EventToolCall, EventToolResult, EventError.
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`   // links a tool result to its call
	Name string `json:"name,omitempty"` // the tool's name
	Text string `json:"text,omitempty"` // the message, the tool's output, the error
	Args string `json:"args,omitempty"` // the tool call's arguments (JSON as the CLI gave them)
	// IsError: a tool result that failed (non-zero exit, refused).
	IsError bool `json:"is_error,omitempty"`
	// Tokens the CLI reported for a model turn. Metering is the gateway's;
	// these are what the CLI believed it used.
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
	Truncated    bool  `json:"truncated,omitempty"` // Text or Args was cut at MaxText
}

// Event kinds.
const (
	EventModel      = "model"
	EventMessage    = "message"
	EventReasoning  = "reasoning"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	EventError      = "error"
)

// A cli is one driver's knowledge of its CLI.
type cli struct {
	bin       string // under ToolsDir/bin
	build     func(in Input) (Invocation, error)
	parser    func() parser
	minMemory int64
}

// parser reads a CLI's output one line at a time, so the runner can follow
// a run as it goes and Parse can read it whole.
type parser interface {
	line(b []byte, emit func(Event))
	final() (string, error)
}

const mib = 1 << 20

var clis = map[string]cli{
	Codex:      {bin: "codex", build: buildCodex, parser: newCodexParser, minMemory: codexMinMemory},
	ClaudeCode: {bin: "claude", build: buildClaude, parser: newClaudeParser, minMemory: claudeMinMemory},
	OpenCode:   {bin: "opencode", build: buildOpenCode, parser: newOpenCodeParser, minMemory: openCodeMinMemory},
}

// Names are the valid driver names, in the root package's order.
func Names() []string {
	var names []string
	for _, n := range corral.AgentDrivers {
		if _, ok := clis[n]; ok || n == Builtin {
			names = append(names, n)
		}
	}
	return names
}

// Valid checks a driver name (EINVALID naming the valid ones).
func Valid(name string) error {
	if name == Builtin {
		return nil
	}
	if _, ok := clis[name]; ok {
		return nil
	}
	return corral.Errorf(corral.EINVALID, "driver %q is not one of %s", bound(name, 64), strings.Join(Names(), ", "))
}

// IsCLI tells whether name is a driver that runs an agent CLI (not the
// built-in loop).
func IsCLI(name string) bool {
	_, ok := clis[name]
	return ok
}

func lookup(name string) (cli, error) {
	if err := Valid(name); err != nil {
		return cli{}, err
	}
	c, ok := clis[name]
	if !ok {
		return cli{}, corral.Errorf(corral.EINVALID, "driver %q runs Corral's own loop, not a CLI", name)
	}
	return c, nil
}

// Build returns how to start the CLI of driver name on in.Task.
func Build(name string, in Input) (Invocation, error) {
	c, err := lookup(name)
	if err != nil {
		return Invocation{}, err
	}
	if err := in.check(); err != nil {
		return Invocation{}, err
	}
	inv, err := c.build(in)
	if err != nil {
		return Invocation{}, err
	}
	if inv.Files == nil {
		inv.Files = map[string][]byte{}
	}
	p, b := in.tmpDirFile()
	inv.Files[p] = b
	inv.MinMemory = c.minMemory
	for p := range inv.Files {
		if !under(p, in.Home) {
			// A driver bug, not the caller's: config goes under Home only.
			return Invocation{}, corral.Internal("driver.Build", fmt.Errorf("%s: config file %s is not under HOME %s", name, p, in.Home))
		}
	}
	return inv, nil
}

func (in Input) check() error {
	if strings.TrimSpace(in.Task) == "" {
		return corral.Errorf(corral.EINVALID, "the task is empty")
	}
	if strings.ContainsRune(in.Task, 0) || strings.ContainsRune(in.Instructions, 0) {
		return corral.Errorf(corral.EINVALID, "the task or the instructions hold a NUL byte")
	}
	u, err := url.Parse(in.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || !strings.HasSuffix(u.Path, "/v1") {
		return corral.Errorf(corral.EINVALID, "the gateway's base URL %q is not an http(s) URL ending in /v1", bound(in.BaseURL, 200))
	}
	if in.Token == "" || strings.ContainsAny(in.Token, " \t\r\n\x00\"'\\") {
		// It goes into an environment variable and a request header.
		return corral.Errorf(corral.EINVALID, "the run's token is empty or holds spaces, quotes or control characters")
	}
	if in.Model == "" {
		// The CLIs would each pick a model of their own vendor's.
		return corral.Errorf(corral.EINVALID, "the model is empty: the server's default model must be resolved before a CLI starts")
	}
	if strings.ContainsAny(in.Model, "\x00\r\n") {
		return corral.Errorf(corral.EINVALID, "the model holds control characters")
	}
	for _, p := range []struct{ what, path string }{{"tools directory", in.ToolsDir}, {"HOME", in.Home}} {
		if !path.IsAbs(p.path) || path.Clean(p.path) != p.path || p.path == "/" {
			return corral.Errorf(corral.EINVALID, "the %s %q is not a clean absolute path", p.what, p.path)
		}
	}
	if in.MCPURL != "" {
		u, err := url.Parse(in.MCPURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return corral.Errorf(corral.EINVALID, "the MCP server's URL %q is not an http(s) URL", bound(in.MCPURL, 200))
		}
		if in.MCPTimeout < time.Second {
			return corral.Errorf(corral.EINVALID, "the MCP server's call timeout %s is under a second", in.MCPTimeout)
		}
	}
	if w := in.Workspace; w != "" && (!path.IsAbs(w) || path.Clean(w) != w) {
		return corral.Errorf(corral.EINVALID, "the workspace %q is not a clean absolute path", w)
	}
	if under(in.Home, in.workspace()) {
		return corral.Errorf(corral.EINVALID, "HOME %q is inside the workspace %q: the CLI's config would become part of the change set", in.Home, in.workspace())
	}
	return nil
}

func (in Input) workspace() string {
	if in.Workspace == "" {
		return WorkspaceMount
	}
	return in.Workspace
}

// under tells whether p is dir or below it (both clean and absolute).
func under(p, dir string) bool {
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// baseEnv is what every CLI gets: a session's environment (corral.SessionEnv)
// with its private HOME and temporary directory, and a plain
// non-interactive terminal.
func baseEnv(in Input) []string {
	return append(corral.SessionEnv(in.Home),
		"TMPDIR="+in.tmpDir(),
		"TERM=dumb",
		"NO_COLOR=1",
	)
}

// mcpEnv is the environment the MCP server's token is read from: nothing
// without one.
func (in Input) mcpEnv() []string {
	if in.MCPURL == "" {
		return nil
	}
	return []string{MCPTokenEnv + "=" + in.Token}
}

// mcpTimeoutMillis is MCPTimeout as the CLIs that count in milliseconds
// take it.
func (in Input) mcpTimeoutMillis() int64 { return in.MCPTimeout.Milliseconds() }

// tmpDir is the CLIs' TMPDIR, in HOME: what they leave there (OpenCode
// unpacks a 5 MiB library on every start, Claude Code keeps task output)
// goes with HOME; and Codex refuses to put its helper commands (the
// apply_patch a shell command may call) under the temporary directory,
// which HOME in /tmp would otherwise be.
func (in Input) tmpDir() string { return path.Join(in.Home, ".tmp") }

// tmpDirFile makes the runner create tmpDir: Files holds files only.
func (in Input) tmpDirFile() (string, []byte) {
	return path.Join(in.tmpDir(), "README"), []byte("The agent CLI's temporary files (TMPDIR).\n")
}

// readOnlyNote is added to the instructions of a run whose workspace is
// read-only: the sandbox refuses writes anyway, and a CLI told so does not
// spend turns on them.
const readOnlyNote = "The workspace is read-only in this run: do not try to change, create or delete files; answer from reading it."

// instructions returns the text a driver adds to its CLI's own system
// prompt: the agent's instructions and, for a read-only run, the note.
func (in Input) instructions() string {
	var parts []string
	if s := strings.TrimSpace(in.Instructions); s != "" {
		parts = append(parts, s)
	}
	if in.ReadOnly {
		parts = append(parts, readOnlyNote)
	}
	return strings.Join(parts, "\n\n")
}

// Parse reads a CLI's whole stdout: its final answer and its transcript.
// A run the CLI itself reported as failed, or that ended without an
// answer, is an EUNAVAIL error carrying the CLI's own words; the
// transcript is returned either way.
func Parse(name string, stdout []byte) (final string, transcript []Event, err error) {
	p, err := NewParser(name)
	if err != nil {
		return "", nil, err
	}
	for len(stdout) > 0 {
		line := stdout
		if i := bytes.IndexByte(stdout, '\n'); i >= 0 {
			line, stdout = stdout[:i], stdout[i+1:]
		} else {
			stdout = nil
		}
		transcript = append(transcript, p.Line(line)...)
	}
	final, err = p.Final()
	return final, transcript, err
}

// Parser reads a CLI's stdout line by line, for a runner that records the
// transcript as the run goes. It is not safe for concurrent use.
type Parser struct {
	p      parser
	events int
}

// NewParser returns a Parser for driver name's output.
func NewParser(name string) (*Parser, error) {
	c, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return &Parser{p: c.parser()}, nil
}

// Line reads one line of output (without its newline) and returns the
// transcript events it holds. Lines that are not the CLI's JSON events
// (its stderr, when it shares the stream) are skipped. After MaxEvents
// events, one last event says the rest was left out, and no more follow.
func (p *Parser) Line(b []byte) []Event {
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		// The CLI's stderr may share the stream (the session's commands
		// write both to one log): a warning without its newline can run
		// into the next event.
		i := bytes.IndexByte(b, '{')
		if i <= 0 || !json.Valid(b[i:]) {
			return nil
		}
		b = b[i:]
	}
	var out []Event
	p.p.line(b, func(e Event) {
		switch {
		case p.events < MaxEvents:
			out = append(out, e.bounded())
		case p.events == MaxEvents:
			out = append(out, Event{Kind: EventError, Text: fmt.Sprintf("the transcript passed %d events: the rest is left out", MaxEvents)})
		}
		p.events++
	})
	return out
}

// Final is the CLI's final answer once its output has ended (see Parse
// for the errors).
func (p *Parser) Final() (string, error) {
	return p.p.final()
}

// failed is the error of a run the CLI reported as failed.
func failed(name, msg string) error {
	if msg = strings.TrimSpace(msg); msg == "" {
		return corral.Errorf(corral.EUNAVAIL, "%s ended without an answer", name)
	}
	return corral.Errorf(corral.EUNAVAIL, "%s failed: %s", name, bound(msg, 1000))
}

// argsJSON encodes a tool call's arguments as the CLI would show them
// (no HTML escaping of <, > and &).
func argsJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (e Event) bounded() Event {
	var cut bool
	e.Text, cut = boundFlag(e.Text, MaxText)
	e.Truncated = e.Truncated || cut
	e.Args, cut = boundFlag(e.Args, MaxText)
	e.Truncated = e.Truncated || cut
	return e
}

func bound(s string, n int) string {
	s, _ = boundFlag(s, n)
	return s
}

// boundFlag cuts s to at most n bytes, not inside a character (bytes that
// are no UTF-8 at all, as a tool's output may hold, are cut anywhere).
func boundFlag(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := n
	for cut > 0 && cut > n-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if !utf8.RuneStart(s[cut]) {
		cut = n
	}
	return s[:cut], true
}
