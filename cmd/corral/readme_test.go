package main

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEWalkthrough runs the README's curl walkthrough, as written,
// against the real binary, and checks each step's answer in order.
func TestREADMEWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walkthrough needs %s (make test installs it)", tool)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Walkthrough with curl.*?```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no walkthrough block")
	}
	script := string(m[1])
	if !strings.Contains(script, "API=http://127.0.0.1:8080/api") {
		t.Fatal("walkthrough no longer sets API: update this test")
	}

	server := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir())
	server.Env = append(os.Environ(), "CORRAL_TEST_AS_MAIN=1")
	stderr, err := server.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	lines := bufio.NewScanner(stderr)
	serving := regexp.MustCompile(`corral serving.* addr=(http://127\.0\.0\.1:\d+)`)
	var base string
	for base == "" && lines.Scan() {
		if m := serving.FindStringSubmatch(lines.Text()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatal("the server never said it was serving")
	}
	go func() {
		for lines.Scan() { // keep the pipe drained
		}
	}()

	script = strings.Replace(script, "API=http://127.0.0.1:8080/api", "API="+base+"/api", 1)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s", err, out)
	}
	// Each step's answer, in order.
	want := []string{
		`"admin":true`, `"admin":false`,
		`"code":"not_found","message":"agent not found"`,
		`"access": "viewer"`,
		`"code":"forbidden"`,
		`"code":"not_found","message":"agent not found"`,
		`"runner"`,
		`"name": "Bob"`,
		`"content": "please review main.go"`,
		`"code":"not_found","message":"agent not found"`,
		`"reviewer"`,
		"204",
		`"code":"unauthenticated"`,
	}
	rest := string(out)
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("walkthrough output lacks %s after the earlier steps:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
}
