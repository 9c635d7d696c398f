package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestExecWorkspaceKeepsItsOwner: a workspace no sandbox user could reach
// (under a 0700 directory) and owned by someone else is handed over as an
// idmapped mount; what the command makes belongs to the directory's owner.
func TestExecWorkspaceKeepsItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "running commands in the sandbox needs root (cgroups)")
	}
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "%v", err)
	}
	tests := []struct {
		name     string
		uid, gid int
	}{
		{"root's", 0, 0},
		{"another user's", 1234, 1234},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hidden := t.TempDir()
			if err := os.Chmod(hidden, 0o700); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(hidden, "project")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, tt.uid, tt.gid); err != nil {
				t.Fatal(err)
			}
			exec := func(mode, script string) (int, string) {
				var out, errOut bytes.Buffer
				code := run(context.Background(), []string{"exec", "--workspace", dir, "--fs", mode, "--", "sh", "-c", script}, strings.NewReader(""), &out, &errOut, noenv)
				return code, out.String() + errOut.String()
			}
			if code, out := exec("read-write", "echo x > f; mkdir d"); code != 0 {
				t.Fatalf("corral exec --fs read-write = %d, %q", code, out)
			}
			want := fmt.Sprintf("%d:%d", tt.uid, tt.gid)
			for _, name := range []string{"f", "d"} {
				fi, err := os.Lstat(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				st := fi.Sys().(*syscall.Stat_t)
				if got := fmt.Sprintf("%d:%d", st.Uid, st.Gid); got != want {
					t.Errorf("%s is %s on the host, want %s like the workspace", name, got, want)
				}
			}
			if code, out := exec("read-only", "cat f; ls -d d; (echo y > g) 2>/dev/null || echo refused"); code != 0 || out != "x\nd\nrefused\n" {
				t.Errorf("corral exec --fs read-only = %d, %q; want the files read and the write refused", code, out)
			}
		})
	}
}
