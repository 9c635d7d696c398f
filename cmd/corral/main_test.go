package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

func noenv(string) string { return "" }

func TestCommandLine(t *testing.T) {
	data := t.TempDir()
	tests := []struct {
		name        string
		args        []string
		stdin       string
		code        int
		out, errOut string // substrings expected on stdout, stderr
	}{
		{"no command", nil, "", 2, "", "usage"},
		{"unknown command", []string{"launch"}, "", 2, "", `unknown command "launch"`},
		{"version", []string{"version"}, "", 0, "corral ", ""},
		{"unknown role", []string{"serve", "--role", "everything", "--data", data}, "", 1, "", `unknown role "everything"`},
		{"empty role", []string{"serve", "--role", "", "--data", data}, "", 1, "", `unknown role ""`},
		{"sandbox without control", []string{"serve", "--role", "sandbox", "--data", data}, "", 2, "", "--role sandbox needs --control"},
		{"sandbox with a bad control", []string{"serve", "--role", "sandbox", "--control", "ftp://x", "--data", data}, "", 2, "", "--control must be control's http or https URL"},
		{"unknown signup mode", []string{"serve", "--signup", "sometimes", "--addr", "127.0.0.1:0", "--data", data}, "", 1, "", `unknown signup mode "sometimes"`},
		{"create without password", []string{"user", "create", "--data", data, "--email", "a@example.com", "--name", "A"}, "", 1, "", "password on stdin"},
		{"create admin", []string{"user", "create", "--data", data, "--email", "Admin@Example.com", "--name", "Admin", "--admin"}, "s3cret-enough\n", 0, "<admin@example.com> admin=true", ""},
		{"create second", []string{"user", "create", "--data", data, "--email", "b@example.com", "--name", "B"}, "another-secret\n", 0, "<b@example.com> admin=false", ""},
		{"duplicate", []string{"user", "create", "--data", data, "--email", "b@example.com", "--name", "B"}, "another-secret\n", 1, "", "already"},
		{"short password", []string{"user", "create", "--data", data, "--email", "c@example.com", "--name", "C"}, "short\n", 1, "", "password"},
		{"disable", []string{"user", "disable", "--data", data, "--email", "b@example.com"}, "", 0, "disabled=true", ""},
		{"enable", []string{"user", "enable", "--data", data, "--email", "b@example.com"}, "", 0, "disabled=false", ""},
		{"disable unknown", []string{"user", "disable", "--data", data, "--email", "zed@example.com"}, "", 1, "", "not found"},
		{"user without verb", []string{"user"}, "", 2, "", "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(tt.stdin), &out, &errOut, noenv)
			if code != tt.code || !strings.Contains(out.String(), tt.out) || !strings.Contains(errOut.String(), tt.errOut) {
				t.Fatalf("corral %q = %d\nstdout: %s\nstderr: %s\nwant %d, stdout with %q, stderr with %q",
					tt.args, code, out.String(), errOut.String(), tt.code, tt.out, tt.errOut)
			}
		})
	}
}

// TestServeAndShutDown starts the real server, signs in the account made by
// `user create`, and checks that cancelling (what SIGINT/SIGTERM do) stops
// it cleanly.
func TestServeAndShutDown(t *testing.T) {
	data := t.TempDir()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"user", "create", "--data", data, "--email", "a@example.com", "--name", "A"}, strings.NewReader("pass-word-1\n"), &out, &errOut, noenv); code != 0 {
		t.Fatalf("user create = %d: %s", code, errOut.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, serveConfig{Addr: "127.0.0.1:0", Data: data, Role: "all", Signup: "closed", ChangeTTL: time.Hour}, slog.New(slog.DiscardHandler), ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("server stopped before serving: %v", err)
	}
	res, err := http.Post("http://"+addr+"/api/auth/login", "application/json", strings.NewReader(`{"email":"a@example.com","password":"pass-word-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("login = %d, want 200", res.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := http.Get("http://" + addr + "/api/me"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}
