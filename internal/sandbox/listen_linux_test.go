package sandbox

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral"
)

// The "dial" test child connects to DIAL_ADDR, says hello and prints what
// it hears back, or the error.
func init() {
	testChildren["dial"] = func() {
		c, err := net.Dial("tcp", os.Getenv("DIAL_ADDR"))
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(1)
		}
		defer c.Close()
		fmt.Fprintln(c, "hello from inside")
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			fmt.Println("read:", err)
			os.Exit(1)
		}
		fmt.Print("heard: ", line)
	}
}

// TestSessionListen: a listener made with Listen is on the session's own
// loopback: a command of the session reaches the caller through it, the
// host's loopback does not have it, and nothing but loopback is accepted.
func TestSessionListen(t *testing.T) {
	needSandbox(t)
	ws := workspace(t, false)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, exe, filepath.Join(ws, "dial"), 0o755)
	s, err := StartSession(Config{}, SessionSpec{Workspace: ws, Mode: ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer s.End()

	for _, addr := range []string{"0.0.0.0:0", "10.0.0.1:80", "localhost:80", "no port"} {
		if _, err := s.Listen(addr); corral.ErrorCode(err) != corral.EINVALID {
			t.Errorf("Listen(%q) = %v, want EINVALID", addr, err)
		}
	}
	ln, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	// The port is the session's: on the host's loopback nothing listens
	// there (the listener above would answer if it were the host's).
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("the host reached %s: the listener is on the host's network", addr)
	}
	heard := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			heard <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		heard <- line
		fmt.Fprintln(c, "hello from outside")
	}()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	p, err := s.Exec(Command{Argv: []string{"/workspace/dial", "-test.run=^$"},
		Env: append([]string{childEnv + "=dial", "DIAL_ADDR=" + addr}, testEnv...)}, null, out, out)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	b, _ := os.ReadFile(out.Name())
	if code, _ := p.Exit(); code != 0 || !strings.Contains(string(b), "heard: hello from outside") {
		t.Fatalf("the command inside: exit %d, %q", code, b)
	}
	if got := <-heard; got != "hello from inside\n" {
		t.Fatalf("outside heard %q", got)
	}

	s.End()
	<-s.Done()
	if _, err := s.Listen("127.0.0.1:0"); corral.ErrorCode(err) != corral.EUNAVAIL {
		t.Fatalf("Listen after the session ended = %v, want EUNAVAIL", err)
	}
}
