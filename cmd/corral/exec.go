package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"corral"
	"corral/internal/sandbox"
	"corral/internal/supervisor"
)

// envList is a repeatable KEY=value flag.
type envList []string

func (e *envList) String() string     { return strings.Join(*e, ",") }
func (e *envList) Set(v string) error { *e = append(*e, v); return nil }

// defaultEnv is the whole environment of a sandboxed command unless --env
// adds to it: nothing is inherited from the caller.
var defaultEnv = corral.SessionEnv(corral.WorkspaceDir)

// execCommand runs one command in the sandbox and returns its exit status.
func execCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workspace := fs.String("workspace", "", "directory bound at /workspace (required); what the command writes there belongs to the directory's owner")
	mode := fs.String("fs", sandbox.ReadOnly, "read-only or read-write")
	memory := fs.Int64("memory", 0, "memory limit in bytes (0: default)")
	pids := fs.Int64("pids", 0, "process limit (0: default)")
	cpu := fs.Int64("cpu", 0, "CPU time limit in milliseconds (0: default)")
	timeout := fs.Duration("timeout", 0, "wall-clock limit, e.g. 30s (0: default)")
	output := fs.Int64("output", 0, "output limit in bytes (0: default)")
	tmp := fs.Int64("tmp", 0, "size of /tmp in bytes (0: default)")
	asJSON := fs.Bool("json", false, `print {"exit_code","violation","duration_ms"} last on stdout`)
	var env envList
	fs.Var(&env, "env", "KEY=value for the command's environment (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if fs.NArg() == 0 {
		return 2, fmt.Errorf("%w: corral exec --workspace DIR [flags] -- CMD [ARGS...]", errUsage)
	}
	if *workspace == "" {
		return 2, fmt.Errorf("%w: --workspace is required", errUsage)
	}
	spec := sandbox.Spec{
		Workspace: *workspace,
		Mode:      *mode,
		Env:       append(append([]string{}, defaultEnv...), env...),
		Command:   fs.Args(),
		Limits: sandbox.Limits{
			Memory: *memory, Pids: *pids, CPU: time.Duration(*cpu) * time.Millisecond,
			Wall: *timeout, Output: *output, Tmp: *tmp,
		},
	}
	s, err := sandbox.Start(sandbox.Config{}, spec, stdin, stdout, stderr)
	if err != nil {
		return 1, err
	}
	select {
	case <-ctx.Done(): // SIGINT or SIGTERM: stop gracefully, then kill
		s.Stop(5 * time.Second)
	case <-s.Done():
	}
	res, err := s.Wait()
	if err != nil {
		return 1, err
	}
	if *asJSON {
		json.NewEncoder(stdout).Encode(struct {
			ExitCode   int              `json:"exit_code"`
			Violation  corral.Violation `json:"violation"`
			DurationMS int64            `json:"duration_ms"`
		}{res.ExitCode, res.Violation, res.Duration.Milliseconds()})
	} else if res.Violation != "" {
		fmt.Fprintf(stderr, "corral exec: the %s limit ended the command\n", res.Violation)
	}
	return res.ExitCode, nil
}

// maybeInit turns this process into a sandbox's init or a session's
// supervisor when asked to.
func maybeInit() { supervisor.Dispatch() }
