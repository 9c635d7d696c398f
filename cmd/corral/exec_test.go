package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/kerneltest"
	"corral/internal/sandbox"
)

func TestExecCommand(t *testing.T) {
	usage := []struct {
		name string
		args []string
		want string
	}{
		{"no workspace", []string{"exec", "--", "true"}, "--workspace is required"},
		{"no command", []string{"exec", "--workspace", t.TempDir()}, "CMD"},
		{"bad mode", []string{"exec", "--workspace", t.TempDir(), "--fs", "rw", "--", "true"}, "mode"},
	}
	for _, tt := range usage {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tt.args, strings.NewReader(""), &out, &errOut, noenv)
		if code == 0 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%s: corral %q = %d, stderr %q; want failure mentioning %q", tt.name, tt.args, code, errOut.String(), tt.want)
		}
	}

	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "running commands in the sandbox needs root (cgroups)")
	}
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "%v", err)
	}
	dir := t.TempDir()
	for p := dir; p != "/tmp" && p != "/"; p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	tests := []struct {
		name      string
		flags     []string
		script    string
		code      int
		out       string
		violation string
	}{
		{"exit status", nil, "echo hello; exit 3", 3, "hello", ""},
		{"environment", []string{"--env", "GREETING=hi"}, "echo $GREETING $HOME", 0, "hi /workspace", ""},
		{"read-only by default", nil, "touch /workspace/x 2>/dev/null || echo refused", 0, "refused", ""},
		{"timeout", []string{"--timeout", "300ms"}, "sleep 30", 137, "", "timeout"},
		{"output", []string{"--output", "100"}, "yes", 137, "output limit of 100 bytes", "output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"exec", "--workspace", dir, "--json"}, tt.flags...), "--", "/bin/sh", "-c", tt.script)
			var out, errOut bytes.Buffer
			code := run(context.Background(), args, strings.NewReader(""), &out, &errOut, noenv)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			var res struct {
				ExitCode   int    `json:"exit_code"`
				Violation  string `json:"violation"`
				DurationMS int64  `json:"duration_ms"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
				t.Fatalf("last line %q is not the JSON result: %v (stderr %s)", lines[len(lines)-1], err, errOut.String())
			}
			if code != tt.code || res.ExitCode != tt.code || res.Violation != tt.violation || !strings.Contains(out.String(), tt.out) {
				t.Fatalf("corral exec %s = %d, %+v, stdout %q; want %d, violation %q, stdout with %q", tt.script, code, res, out.String(), tt.code, tt.violation, tt.out)
			}
		})
	}
}
