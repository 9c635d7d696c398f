package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// server is a real `corral serve` in a child process.
type server struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:port

	mu  sync.Mutex
	log strings.Builder
	eof chan struct{} // closed when the log ends
}

// startServer runs `corral serve` on data with env added, and returns once
// it says it is serving. The test ends it if nothing else does.
func startServer(t testing.TB, data string, env ...string) *server {
	t.Helper()
	return startServerAt(t, "127.0.0.1:0", data, env...)
}

// startServerAt is startServer on a given address.
func startServerAt(t testing.TB, addr, data string, env ...string) *server {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--addr", addr, "--data", data)
	cmd.Env = append(append(os.Environ(), "CORRAL_TEST_AS_MAIN=1"), env...)
	return startServing(t, cmd)
}

// startServing starts cmd, a `corral serve`, and returns once it says it is
// serving.
func startServing(t testing.TB, cmd *exec.Cmd) *server {
	t.Helper()
	serving := regexp.MustCompile(`corral serving.* addr=(http://[0-9.]+:\d+)`)
	var base string
	s := startProcess(t, cmd, "the server never said it was serving", func(line string) bool {
		if m := serving.FindStringSubmatch(line); m != nil {
			base = m[1]
		}
		return base != ""
	})
	s.base = base
	return s
}

// startProcess starts cmd (a test binary acting as corral), and returns
// once a line of its log satisfies ready; never, and the test fails with
// never and the log. The log stays drained and kept; the test ends the
// process if nothing else does.
func startProcess(t testing.TB, cmd *exec.Cmd, never string, ready func(line string) bool) *server {
	t.Helper()
	s := &server{cmd: cmd, eof: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	seen := false
	for !seen && lines.Scan() {
		s.logLine(lines.Text())
		seen = ready(lines.Text())
	}
	if !seen {
		t.Fatalf("%s:\n%s", never, s.Log())
	}
	go func() {
		defer close(s.eof)
		for lines.Scan() { // keep the pipe drained
			s.logLine(lines.Text())
		}
	}()
	return s
}

func (s *server) logLine(line string) {
	s.mu.Lock()
	s.log.WriteString(line + "\n")
	s.mu.Unlock()
}

// Log returns what the server has logged so far.
func (s *server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// reachableTempDir is a temp dir the sandbox's user can reach (t.TempDir
// makes its parent private).
func reachableTempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		endSessions(dir) // what a failed test left running
		unmountStages(dir)
	}) // before the dir goes
	return dir
}
