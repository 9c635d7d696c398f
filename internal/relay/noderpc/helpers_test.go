package noderpc_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"corral"
	"corral/internal/poll"
	"corral/internal/relay/noderpc"
	"corral/internal/supervisor"
)

// TestMain lets the test binary act as sessions' supervisors and the
// sandbox's init, for the tests against node.Local.
func TestMain(m *testing.M) {
	supervisor.Dispatch()
	os.Exit(m.Run())
}

// patience bounds every wait of these tests: a liveness bound, never a
// timing assertion.
const patience = 2 * time.Minute

// logBuf is the server's log, for tests of what it says and what not.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// server is a Serve of a node on loopback TCP: each call is one
// connection.
type server struct {
	addr string
	log  *logBuf
	stop func() // closes the listener and waits for Serve to return
}

// serve serves n until the test ends, and checks that Serve then
// returns: no call it answered is left running.
func serve(t testing.TB, n noderpc.Node) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, ln, n)
}

func serveOn(t testing.TB, ln net.Listener, n noderpc.Node) *server {
	t.Helper()
	s := &server{addr: ln.Addr().String(), log: &logBuf{}}
	done := make(chan error, 1)
	go func() {
		done <- noderpc.Serve(ln, n, slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}()
	s.stop = sync.OnceFunc(func() {
		ln.Close()
		select {
		case <-done:
		case <-time.After(patience):
			t.Error("Serve did not return after its listener closed")
		}
	})
	t.Cleanup(s.stop)
	return s
}

func (s *server) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", s.addr)
}

func (s *server) client() *noderpc.Client { return noderpc.NewClient(s.dial) }

// socketBuffer is the size of both socket buffers of the connections of
// smallBuffers: fixed, where Linux would grow them (to 32 MiB here).
const socketBuffer = 128 << 10

func setBuffers(c net.Conn) {
	tc := c.(*net.TCPConn)
	tc.SetReadBuffer(socketBuffer)
	tc.SetWriteBuffer(socketBuffer)
}

// smallBuffers is a listener whose connections have fixed socket
// buffers: what the kernel holds of a stream is then known.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		setBuffers(c)
	}
	return c, err
}

// fake is a node whose answers the test gives; a method it was given no
// answer for panics (the test did not expect the call).
type fake struct {
	noderpc.Node

	session  func(ctx context.Context, id string) (corral.SessionState, error)
	output   func(ctx context.Context) (corral.CommandOutput, error)
	apply    func(ctx context.Context, req corral.ApplyRequest) (corral.ApplyResult, error)
	write    func(ctx context.Context, w corral.FileWrite) (corral.CommitResult, error)
	archive  func(ctx context.Context, w io.Writer) error
	imports  func(ctx context.Context, body io.Reader) (corral.ImportResult, error)
	clone    func(ctx context.Context, spec corral.CloneSpec, progress func(int)) (corral.CloneResult, error)
	push     func(ctx context.Context, auth *corral.GitAuth) (corral.PushResult, error)
	terminal func(ctx context.Context) (corral.Terminal, error)
}

func (f *fake) Session(ctx context.Context, id string) (corral.SessionState, error) {
	return f.session(ctx, id)
}

func (f *fake) Output(ctx context.Context, _, _ string, _ int64, _ bool) (corral.CommandOutput, error) {
	return f.output(ctx)
}

func (f *fake) Apply(ctx context.Context, req corral.ApplyRequest) (corral.ApplyResult, error) {
	return f.apply(ctx, req)
}

func (f *fake) WriteFile(ctx context.Context, w corral.FileWrite) (corral.CommitResult, error) {
	return f.write(ctx, w)
}

func (f *fake) Archive(ctx context.Context, _ corral.FileScope, w io.Writer) error {
	return f.archive(ctx, w)
}

func (f *fake) Import(ctx context.Context, _, _ string, body io.Reader, _ *corral.CommitSpec) (corral.ImportResult, error) {
	return f.imports(ctx, body)
}

func (f *fake) Clone(ctx context.Context, _ string, spec corral.CloneSpec, progress func(int)) (corral.CloneResult, error) {
	return f.clone(ctx, spec, progress)
}

func (f *fake) Push(ctx context.Context, _, _, _ string, auth *corral.GitAuth) (corral.PushResult, error) {
	return f.push(ctx, auth)
}

func (f *fake) Terminal(ctx context.Context, _ string, _, _ int) (corral.Terminal, error) {
	return f.terminal(ctx)
}

// waitFor polls cond until it holds; the test fails when it never does.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Within(t, patience, what, cond)
}

// settle waits until v stops changing and returns its value: how far a
// producer got before it blocked. A producer that never blocks is
// caught too: it stops at its end, far past any bound.
func settle(t *testing.T, v *atomic.Int64) int64 {
	t.Helper()
	deadline := time.Now().Add(patience)
	last, same := v.Load(), 0
	for same < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("the producer never stopped (%d bytes)", last)
		}
		time.Sleep(10 * time.Millisecond)
		if now := v.Load(); now == last {
			same++
		} else {
			last, same = now, 0
		}
	}
	return last
}

// inFlight counts the calls of a node that are running now.
type inFlight struct{ n atomic.Int64 }

func (f *inFlight) enter() func() {
	f.n.Add(1)
	return func() { f.n.Add(-1) }
}

// acting is the context of the tests' calls: made for an editor, so the
// node lets through the calls that act in a sandbox (see TestActorReplayed
// for those that are not).
var acting = corral.WithActor(context.Background(), corral.Actor{UserID: "usr_t", AgentID: "agt_t", Level: corral.LevelEditor})
