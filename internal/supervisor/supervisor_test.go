package supervisor_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"

	"corral/internal/kerneltest"
	"corral/internal/poll"
	"corral/internal/sandbox"
	"corral/internal/supervisor"
)

func TestMain(m *testing.M) {
	supervisor.Dispatch()
	if addr := os.Getenv(dialEnv); addr != "" {
		dial(addr) // a copy of this binary, inside a session
	}
	os.Exit(m.Run())
}

// dialEnv makes the test binary, run inside a session, dial its value,
// say hello and print what it hears back.
const dialEnv = "SUPERVISOR_TEST_DIAL"

func dial(addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(1)
	}
	fmt.Fprintln(c, "hello from inside")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Println("read:", err)
		os.Exit(1)
	}
	fmt.Print("heard: ", line)
	os.Exit(0)
}

func needSessions(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "sessions need root (cgroups)")
	}
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "%v", err)
	}
}

// workspace is a directory the sandbox user (nobody) may write.
func workspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != "/tmp" && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir
}

var env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}

func spawn(t *testing.T, grace time.Duration) (string, *supervisor.Client) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sess")
	c, err := supervisor.Spawn(dir, supervisor.Config{
		Session: sandbox.SessionSpec{Workspace: workspace(t), Mode: sandbox.ReadWrite},
		Grace:   grace,
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := supervisor.Dial(dir); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c.End(ctx)
		}
	})
	return dir, c
}

// result waits for a command's end and returns its whole output.
func result(t *testing.T, c *supervisor.Client, id string) (string, supervisor.Exit) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	for {
		b, ex, err := c.Read(id, int64(out.Len()), 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		if ex != nil {
			return out.String(), *ex
		}
		if len(b) == 0 {
			if err := c.Wait(ctx, id, int64(out.Len())); err != nil {
				t.Fatalf("waiting for %s: %v", id, err)
			}
		}
	}
}

func exec(t *testing.T, c *supervisor.Client, id, script string) {
	t.Helper()
	if err := c.Exec(context.Background(), supervisor.Exec{ID: id, Argv: []string{"sh", "-c", script}, Env: env}); err != nil {
		t.Fatalf("exec %s: %v", id, err)
	}
}

// alive reports whether any host process has cmdline word w.
func alive(t *testing.T, w string) bool {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), w) {
			return true
		}
	}
	return false
}

func TestCommandsShareTheSession(t *testing.T) {
	needSessions(t)
	_, c := spawn(t, time.Minute)
	// A background process started by one command is there for the next.
	exec(t, c, "c1", "sleep 4242.5 >/dev/null 2>&1 & echo $! > /tmp/bg; echo started")
	out, ex := result(t, c, "c1")
	if out != "started\n" || ex.Code != 0 {
		t.Fatalf("c1: %q %+v", out, ex)
	}
	exec(t, c, "c2", "kill -0 $(cat /tmp/bg) && echo alive; echo err >&2; exit 3")
	out, ex = result(t, c, "c2")
	if out != "alive\nerr\n" || ex.Code != 3 {
		t.Fatalf("c2: %q %+v", out, ex)
	}
	if !alive(t, "4242.5") {
		t.Fatal("the background process is not running on the host")
	}
	// The same id again is the same command: not run twice.
	exec(t, c, "c2", "echo again")
	if out, _ := result(t, c, "c2"); out != "alive\nerr\n" {
		t.Fatalf("c2 re-sent: %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.End(ctx); err != nil {
		t.Fatal(err)
	}
	if alive(t, "4242.5") {
		t.Fatal("the background process outlived its session")
	}
}

func TestCommandLimits(t *testing.T) {
	needSessions(t)
	_, c := spawn(t, time.Minute)
	if err := c.Exec(context.Background(), supervisor.Exec{ID: "slow", Argv: []string{"sh", "-c", "echo a; sleep 30"}, Env: env, Timeout: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	out, ex := result(t, c, "slow")
	if out != "a\n" || ex.Violation != sandbox.ViolationTimeout || ex.Signal != "SIGKILL" {
		t.Fatalf("timeout: %q %+v", out, ex)
	}
	if err := c.Exec(context.Background(), supervisor.Exec{ID: "loud", Argv: []string{"sh", "-c", "yes"}, Env: env, OutputMax: 1000}); err != nil {
		t.Fatal(err)
	}
	out, ex = result(t, c, "loud")
	if ex.Violation != sandbox.ViolationOutput || !strings.HasPrefix(out, "y\ny\n") || !strings.Contains(out, "output limit of 1000 bytes") || len(out) > 1200 {
		t.Fatalf("output cap: %d bytes %+v", len(out), ex)
	}
	// The session outlives its commands' limits.
	exec(t, c, "after", "echo still here")
	if out, ex := result(t, c, "after"); out != "still here\n" || ex.Code != 0 {
		t.Fatalf("after: %q %+v", out, ex)
	}
	// Stdin, and a command that is not there.
	if err := c.Exec(context.Background(), supervisor.Exec{ID: "in", Argv: []string{"cat"}, Env: env, Stdin: []byte("to stdin")}); err != nil {
		t.Fatal(err)
	}
	if out, _ := result(t, c, "in"); out != "to stdin" {
		t.Fatalf("stdin: %q", out)
	}
	if err := c.Exec(context.Background(), supervisor.Exec{ID: "none", Argv: []string{"no-such-command"}, Env: env}); err != nil {
		t.Fatal(err)
	}
	if out, ex := result(t, c, "none"); ex.Code != 127 || !strings.Contains(out, "not found") {
		t.Fatalf("missing command: %q %+v", out, ex)
	}
	if err := c.Exec(context.Background(), supervisor.Exec{ID: "../x", Argv: []string{"true"}, Env: env}); err == nil {
		t.Fatal("a command id with a slash was accepted")
	}
}

// TestReattach: the server goes away while a command runs and writes; a
// new connection reads the whole output and the exit, and the command ran
// once.
func TestReattach(t *testing.T) {
	needSessions(t)
	dir, c := spawn(t, time.Minute)
	exec(t, c, "long", "for i in 1 2 3; do echo line $i; sleep 0.2; done; echo done > /workspace/f; exit 7")
	c.Close() // the server dies
	<-c.Gone()
	// Away for longer than the command: it ends while no one listens.
	poll.Within(t, 30*time.Second, "the command to end while the server is away", func() bool {
		_, ex, err := supervisor.Read(dir, "long", 0, 1<<20)
		return err != nil || ex != nil
	})
	c2, err := supervisor.Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c2.Status(context.Background()); err != nil || st.State != supervisor.StateRunning {
		t.Fatalf("status after re-attach = %+v, %v; want running", st, err)
	}
	out, ex := result(t, c2, "long")
	if out != "line 1\nline 2\nline 3\n" || ex.Code != 7 {
		t.Fatalf("after re-attach: %q %+v", out, ex)
	}
}

func TestGracePeriod(t *testing.T) {
	needSessions(t)
	dir, c := spawn(t, 300*time.Millisecond)
	exec(t, c, "bg", "sleep 4343.5 >/dev/null 2>&1 &")
	result(t, c, "bg")
	c.Close()
	var st supervisor.State
	var err error
	abandoned := func() bool {
		st, err = supervisor.ReadState(dir)
		return err == nil && st.State == supervisor.StateAbandoned
	}
	if !poll.Eventually(30*time.Second, abandoned) {
		t.Fatalf("the session was not abandoned: %+v %v", st, err)
	}
	if _, err := supervisor.Dial(dir); err == nil {
		t.Fatal("the abandoned session's supervisor still answers")
	}
	if alive(t, "4343.5") {
		t.Fatal("a process of the abandoned session is still running")
	}
}

// screen reads a terminal until its output holds want.
func screen(t *testing.T, term *supervisor.Terminal, got *strings.Builder, want string) {
	t.Helper()
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), want) {
		n, err := term.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("reading the terminal for %q: %v; so far %q", want, err, got.String())
		}
	}
}

// TestTerminal: a shell on a pty in the session; two viewers see the same
// screen, a late one gets the screen so far, a resize reaches the shell,
// the shell outlives a viewer and the server's connection, and shares the
// session with its commands.
func TestTerminal(t *testing.T) {
	needSessions(t)
	dir, c := spawn(t, time.Minute)
	exec(t, c, "bg", "echo from-a-command > /tmp/shared")
	result(t, c, "bg")
	term, err := c.Terminal(80, 24)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	var first strings.Builder
	if _, err := term.Write([]byte("cat /tmp/shared; stty size; tty -s && echo is-a-tty\n")); err != nil {
		t.Fatal(err)
	}
	screen(t, term, &first, "24 80")
	screen(t, term, &first, "from-a-command")
	screen(t, term, &first, "is-a-tty")

	// A second viewer, from a new connection as a restarted server would.
	c.Close()
	c2, err := supervisor.Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	late, err := c2.Terminal(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var second strings.Builder
	screen(t, late, &second, "from-a-command") // the screen so far
	if err := late.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	late.Write([]byte("stty size\n"))
	screen(t, late, &second, "30 100")
	screen(t, term, &first, "30 100") // both viewers see it
	late.Close()

	term.Write([]byte("exit 4\n"))
	buf := make([]byte, 4096)
	for {
		if _, err := term.Read(buf); err != nil {
			if err != io.EOF || term.Exit() != 4 {
				b, _ := os.ReadFile(filepath.Join(dir, "supervisor.log"))
				t.Errorf("after exit: %v, status %d\n%s", err, term.Exit(), b)
			}
			break
		}
	}
	// The next viewer gets a new shell.
	again, err := c2.Terminal(80, 24)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	var third strings.Builder
	again.Write([]byte("echo $((6*7))\n"))
	screen(t, again, &third, "42")
	if strings.Contains(third.String(), "from-a-command") {
		t.Errorf("the new shell's screen holds the old one's: %q", third.String())
	}
}

// TestGateway: a command of a session reaches the server's gateway socket
// at the session's loopback port, through the supervisor; with the
// gateway gone, the connection is refused, not held.
func TestGateway(t *testing.T) {
	needSessions(t)
	sock := filepath.Join(t.TempDir(), "gw.sock")
	gw, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan string, 1)
	go func() {
		c, err := gw.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		preamble, _ := br.ReadString('\n')
		line, _ := br.ReadString('\n')
		heard <- preamble + line
		fmt.Fprintln(c, "hello from the gateway")
	}()
	ws := workspace(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "dial"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sess")
	const addr = "127.0.0.1:41300"
	c, err := supervisor.Spawn(dir, supervisor.Config{
		Session: sandbox.SessionSpec{Workspace: ws, Mode: sandbox.ReadOnly},
		Grace:   time.Minute,
		Gateway: &supervisor.Gateway{Addr: addr, Socket: sock, Session: "run_1"},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.End(ctx)
	})
	run := func(id string) string {
		if err := c.Exec(context.Background(), supervisor.Exec{ID: id, Argv: []string{"/workspace/dial", "-test.run=^$"},
			Env: append([]string{dialEnv + "=" + addr}, env...)}); err != nil {
			t.Fatal(err)
		}
		out, _ := result(t, c, id)
		return out
	}
	if out := run("up"); out != "heard: hello from the gateway\n" {
		t.Fatalf("inside, with the gateway up: %q", out)
	}
	if got := <-heard; got != corral.GatewayPreamble("run_1")+"hello from inside\n" {
		t.Fatalf("the gateway heard %q", got)
	}
	gw.Close()
	if out := run("down"); !strings.HasPrefix(out, "read: ") {
		t.Fatalf("inside, with the gateway gone: %q, want the connection closed", out)
	}
}
