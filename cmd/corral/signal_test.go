package main

import (
	"bufio"
	"corral/internal/pgtest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestMain lets the test binary act as the corral binary, so the signal
// test can run the real main in a child process.
func TestMain(m *testing.M) {
	maybeInit()
	if os.Getenv("CORRAL_TEST_AS_MAIN") == "1" {
		if path := os.Getenv("CORRAL_TEST_HEAPDUMP"); path != "" {
			dumpHeapOnSignal(path)
		}
		main()
		return
	}
	// A PostgreSQL server for the tests of a shared store, started when
	// one first asks for a database.
	os.Exit(pgtest.Main(m))
}

func TestSignalsShutDownGracefully(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir())
			cmd.Env = append(os.Environ(), "CORRAL_TEST_AS_MAIN=1")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() }) // never leave a server behind
			lines := bufio.NewScanner(stderr)
			var log strings.Builder
			serving := regexp.MustCompile(`corral serving.* addr=http://127\.0\.0\.1:\d+`)
			for lines.Scan() {
				log.WriteString(lines.Text() + "\n")
				if serving.MatchString(lines.Text()) {
					break
				}
			}
			if !serving.MatchString(log.String()) {
				t.Fatalf("the server never said it was serving:\n%s", log.String())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for lines.Scan() {
				log.WriteString(lines.Text() + "\n")
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("corral serve after %v: %v\n%s", sig, err, log.String())
			}
			if !strings.Contains(log.String(), "msg=stopped") {
				t.Fatalf("no clean stop in the log:\n%s", log.String())
			}
		})
	}
}
