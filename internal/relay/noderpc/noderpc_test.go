package noderpc_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/nacl/box"

	"corral"
	"corral/internal/relay/noderpc"
)

// TestErrorsCross: a *corral.Error crosses as its code and message, never
// its internal cause; any other error as EINTERNAL, its text in the
// node's log only.
func TestErrorsCross(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantCode    string
		wantMessage string
		logged      bool // the internal detail is in the node's log
	}{
		{"corral error", &corral.Error{Code: corral.ENOTFOUND, Message: "no session s1", Err: errors.New("stat /data/sessions/s1")},
			corral.ENOTFOUND, "no session s1", false},
		{"wrapped corral error", fmt.Errorf("session s1 at /data/sessions: %w", corral.Errorf(corral.ECONFLICT, "busy")),
			corral.ECONFLICT, "busy", false},
		{"plain error", errors.New("open /data/sessions/s1/state: permission denied"),
			corral.EINTERNAL, "the sandbox node failed", true},
		{"internal corral error", corral.Internal("session", errors.New("read /data/sessions/s1/state: I/O error")),
			corral.EINTERNAL, "internal error", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, &fake{session: func(context.Context, string) (corral.SessionState, error) {
				return corral.SessionState{}, tt.err
			}})
			_, err := srv.client().Session(acting, "s1")
			var e *corral.Error
			if !errors.As(err, &e) || e.Code != tt.wantCode || e.Message != tt.wantMessage {
				t.Fatalf("Session = %#v, want %s %q", err, tt.wantCode, tt.wantMessage)
			}
			if e.Err != nil || strings.Contains(err.Error(), "/data") {
				t.Errorf("the error carries the node's internals: %v", err)
			}
			if got := strings.Contains(srv.log.String(), "/data/sessions"); got != tt.logged {
				t.Errorf("node's log has the detail: %v, want %v; log:\n%s", got, tt.logged, srv.log)
			}
		})
	}
}

// TestAPanicEndsOnlyItsCall: a node call that panics ends its own stream
// (EUNAVAIL for its caller), is logged, and the node serves on.
func TestAPanicEndsOnlyItsCall(t *testing.T) {
	srv := serve(t, &fake{session: func(_ context.Context, id string) (corral.SessionState, error) {
		if id == "s-panics" {
			panic("a bug in the node")
		}
		return corral.SessionState{ID: id}, nil
	}})
	c := srv.client()
	if _, err := c.Session(acting, "s-panics"); corral.ErrorCode(err) != corral.EUNAVAIL {
		t.Fatalf("the call that panicked: %v, want EUNAVAIL", err)
	}
	if st, err := c.Session(acting, "s1"); err != nil || st.ID != "s1" {
		t.Fatalf("the next call: %+v, %v", st, err)
	}
	if !strings.Contains(srv.log.String(), "a bug in the node") {
		t.Errorf("the panic is not in the node's log:\n%s", srv.log)
	}
}

// TestResultsCross: what a call returns arrives as it was, nil slices as
// nil, and a result that comes with an error (an apply's conflicts) with
// it.
func TestResultsCross(t *testing.T) {
	state := corral.SessionState{ID: "s1", Violation: corral.ViolationDisk, Abandoned: true}
	conflicts := corral.ApplyResult{Conflicts: map[string]string{"notes.txt": "changed since the run saw it"}}
	srv := serve(t, &fake{
		session: func(_ context.Context, id string) (corral.SessionState, error) { return state, nil },
		apply: func(_ context.Context, req corral.ApplyRequest) (corral.ApplyResult, error) {
			if len(req.Entries) != 1 || req.Entries[0].Path != "notes.txt" || req.Commit == nil || req.Commit.Author.Name != "Ann" {
				return corral.ApplyResult{}, corral.Errorf(corral.EINVALID, "the request did not cross: %+v", req)
			}
			return conflicts, corral.Errorf(corral.ECONFLICT, "nothing was applied")
		},
		output: func(context.Context) (corral.CommandOutput, error) {
			return corral.CommandOutput{Exit: &corral.CommandExit{Code: 137, Signal: "KILL", Output: 12}}, nil
		},
	})
	c := srv.client()
	ctx := acting
	if got, err := c.Session(ctx, "s1"); err != nil || got != state {
		t.Errorf("Session = %+v, %v; want %+v", got, err, state)
	}
	res, err := c.Apply(ctx, corral.ApplyRequest{AgentID: "a", StageID: "s", ID: "c",
		Entries: []corral.ChangeEntry{{Path: "notes.txt", Op: "modify"}}, Commit: &corral.CommitSpec{Author: corral.Identity{Name: "Ann"}}})
	if corral.ErrorCode(err) != corral.ECONFLICT || !reflect.DeepEqual(res, conflicts) {
		t.Errorf("Apply = %+v, %v; want %+v and ECONFLICT", res, err, conflicts)
	}
	out, err := c.Output(ctx, "s1", "c1", 0, false)
	if err != nil || out.Data != nil || out.Exit == nil || *out.Exit != (corral.CommandExit{Code: 137, Signal: "KILL", Output: 12}) {
		t.Errorf("Output = %+v (exit %+v), %v", out, out.Exit, err)
	}
}

// TestProtocolRefusals: what a client has no business sending is
// answered with an error, not served: an unknown method, a malformed
// header or arguments, a line longer than the relay carries.
func TestProtocolRefusals(t *testing.T) {
	srv := serve(t, &fake{})
	tests := []struct {
		name     string
		send     []byte
		wantCode string
	}{
		{"unknown method", []byte(`{"m":"Format","a":{}}` + "\n"), corral.EINVALID},
		{"malformed header", []byte("GET / HTTP/1.1\n"), corral.EINVALID},
		{"malformed arguments", []byte(`{"m":"Session","a":"s1"}` + "\n"), corral.EINVALID},
		{"line too long", bytes.Repeat([]byte("x"), noderpc.MaxLine+1), corral.ETOOLARGE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go conn.Write(tt.send) // the server may stop reading before the end
			conn.SetReadDeadline(time.Now().Add(patience))
			line, err := bufio.NewReader(conn).ReadBytes('\n')
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			var a struct {
				E *struct{ Code, Message string } `json:"e"`
			}
			if err := json.Unmarshal(line, &a); err != nil || a.E == nil || a.E.Code != tt.wantCode {
				t.Fatalf("answer %q, want the error %s", line, tt.wantCode)
			}
		})
	}
}

// TestClientRefusesOversizeCalls: a call larger than the relay carries
// never leaves the client.
func TestClientRefusesOversizeCalls(t *testing.T) {
	var called atomic.Bool
	srv := serve(t, &fake{write: func(context.Context, corral.FileWrite) (corral.CommitResult, error) {
		called.Store(true)
		return corral.CommitResult{}, nil
	}})
	c := srv.client()
	ctx := acting
	// 8 MiB, base64'd by encoding/json, fits...
	if _, err := c.WriteFile(ctx, corral.FileWrite{AgentID: "a", Path: "f", Content: make([]byte, corral.MaxFile)}); err != nil || !called.Load() {
		t.Fatalf("WriteFile of MaxFile bytes: %v (served: %v)", err, called.Load())
	}
	called.Store(false)
	// ... and 13 MiB does not.
	_, err := c.WriteFile(ctx, corral.FileWrite{AgentID: "a", Path: "f", Content: make([]byte, 13<<20)})
	if corral.ErrorCode(err) != corral.ETOOLARGE || called.Load() {
		t.Fatalf("WriteFile of 13 MiB: %v (served: %v), want ETOOLARGE, unserved", err, called.Load())
	}
}

// TestBrokenStreams: a stream that breaks before the answer is EUNAVAIL,
// an answer that is not one is EINTERNAL; neither is taken for a result.
func TestBrokenStreams(t *testing.T) {
	tests := []struct {
		name     string
		answer   func(c *net.TCPConn)
		wantCode string
	}{
		{"closed before answering", func(c *net.TCPConn) {}, corral.EUNAVAIL},
		{"half an answer", func(c *net.TCPConn) { io.WriteString(c, `{"r":{"ID":"s1","Runn`) }, corral.EUNAVAIL},
		{"reset", func(c *net.TCPConn) { c.SetLinger(0) }, corral.EUNAVAIL},
		{"not an answer", func(c *net.TCPConn) { io.WriteString(c, "hello\n") }, corral.EINTERNAL},
		{"an empty answer", func(c *net.TCPConn) { io.WriteString(c, "{}\n") }, corral.EINTERNAL},
		{"a result of another type", func(c *net.TCPConn) { io.WriteString(c, `{"r":[1,2]}`+"\n") }, corral.EINTERNAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				bufio.NewReader(c).ReadBytes('\n') // the header
				tt.answer(c.(*net.TCPConn))
				c.Close()
			}()
			client := noderpc.NewClient(func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", ln.Addr().String())
			})
			st, err := client.Session(acting, "s1")
			if corral.ErrorCode(err) != tt.wantCode {
				t.Fatalf("Session = %+v, %v; want %s", st, err, tt.wantCode)
			}
		})
	}
}

// TestCancelReachesTheNode: when the caller's ctx ends (a browser went
// away), the call returns, and the node's handler sees its own ctx end
// and returns too: nothing is left waiting on the node.
func TestCancelReachesTheNode(t *testing.T) {
	var running inFlight
	block := func(ctx context.Context) error {
		defer running.enter()()
		<-ctx.Done()
		return ctx.Err()
	}
	srv := serve(t, &fake{
		output: func(ctx context.Context) (corral.CommandOutput, error) { return corral.CommandOutput{}, block(ctx) },
		archive: func(ctx context.Context, w io.Writer) error {
			w.Write([]byte("the start of an archive"))
			return block(ctx)
		},
		clone: func(ctx context.Context, _ corral.CloneSpec, progress func(int)) (corral.CloneResult, error) {
			progress(10)
			return corral.CloneResult{}, block(ctx)
		},
		imports: func(ctx context.Context, body io.Reader) (corral.ImportResult, error) {
			io.Copy(io.Discard, body)
			return corral.ImportResult{}, block(ctx)
		},
	})
	c := srv.client()
	tests := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Output(wait)", func(ctx context.Context) error { _, err := c.Output(ctx, "s1", "c1", 0, true); return err }},
		{"Archive", func(ctx context.Context) error { return c.Archive(ctx, corral.FileScope{AgentID: "a"}, io.Discard) }},
		{"Clone", func(ctx context.Context) error {
			_, err := c.Clone(ctx, "a", corral.CloneSpec{URL: "https://example.com/r.git"}, func(int) {})
			return err
		}},
		{"Import, after the body", func(ctx context.Context) error {
			_, err := c.Import(ctx, "a", "application/x-tar", strings.NewReader("an archive"), nil)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(acting)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tt.call(ctx) }()
			waitFor(t, "the node to be in the call", func() bool { return running.n.Load() == 1 })
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the cancelled call returned %v, want context.Canceled", err)
				}
			case <-time.After(patience):
				t.Fatal("the cancelled call did not return")
			}
			waitFor(t, "the node's handler to return", func() bool { return running.n.Load() == 0 })
		})
	}
}

// pattern is what the producers of TestBackpressure write: chunk i is
// the byte i, so that a lost, doubled or reordered chunk shows.
func pattern(i int64, p []byte) {
	for j := range p {
		p[j] = byte(i)
	}
}

// TestBackpressure: a client that reads a large archive or a terminal's
// output slowly holds the node's producer up: what the node has produced
// but the client not consumed stays under a bound (the sockets' buffers
// and the fixed buffers of each end), far under what was produced; then
// every byte arrives, in order.
func TestBackpressure(t *testing.T) {
	const (
		total   = 200 << 20
		chunk   = 32 << 10
		pauseAt = 4 << 20
		// The kernel's buffers (it doubles what is asked, for its
		// bookkeeping) and this package's fixed ones, 64 KiB at most on
		// each end, with room to spare: never a function of total.
		bound = 4*2*socketBuffer + 1<<20
	)
	var produced atomic.Int64
	produce := func(ctx context.Context, write func([]byte) error) error {
		p := make([]byte, chunk)
		for i := int64(0); i < total/chunk; i++ {
			pattern(i, p)
			if err := write(p); err != nil {
				return err
			}
			produced.Add(chunk)
		}
		return nil
	}
	want := sha256.New()
	p := make([]byte, chunk)
	for i := int64(0); i < total/chunk; i++ {
		pattern(i, p)
		want.Write(p)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveOn(t, smallBuffers{ln}, &fake{
		archive: func(ctx context.Context, w io.Writer) error {
			return produce(ctx, func(p []byte) error { _, err := w.Write(p); return err })
		},
		terminal: func(ctx context.Context) (corral.Terminal, error) {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(produce(ctx, func(p []byte) error { _, err := pw.Write(p); return err })) }()
			return &pipeTerminal{r: pr}, nil
		},
	})
	c := noderpc.NewClient(func(ctx context.Context) (net.Conn, error) {
		conn, err := srv.dial(ctx)
		if err == nil {
			setBuffers(conn)
		}
		return conn, err
	})

	tests := []struct {
		name string
		// consume reads everything, calling pause once pauseAt bytes are
		// in.
		consume func(h io.Writer, pause func()) error
	}{
		{"archive", func(h io.Writer, pause func()) error {
			return c.Archive(acting, corral.FileScope{AgentID: "a"}, &pausingWriter{w: h, at: pauseAt, pause: pause})
		}},
		{"terminal", func(h io.Writer, pause func()) error {
			term, err := c.Terminal(acting, "s1", 80, 24)
			if err != nil {
				return err
			}
			defer term.Close()
			if _, err := io.CopyN(h, term, pauseAt); err != nil {
				return err
			}
			pause()
			_, err = io.Copy(h, term)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			produced.Store(0)
			got := sha256.New()
			counted := &countingWriter{w: got}
			paused, resume := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- tt.consume(counted, func() {
					close(paused)
					<-resume
				})
			}()
			select {
			case <-paused:
			case err := <-done:
				t.Fatalf("the consumer ended before it paused: %v", err)
			}
			held := settle(t, &produced) - counted.n.Load()
			t.Logf("produced but not consumed while the client did not read: %d KiB", held>>10)
			if held > bound {
				t.Errorf("the node produced %d bytes the client had not read: more than %d", held, bound)
			}
			close(resume)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := counted.n.Load(); n != total || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
				t.Fatalf("%d bytes arrived (of %d), equal to what was sent: %v", n, total, bytes.Equal(got.Sum(nil), want.Sum(nil)))
			}
		})
	}
}

// pausingWriter calls pause once at bytes have gone through it.
type pausingWriter struct {
	w      io.Writer
	n, at  int64
	pause  func()
	paused bool
}

func (p *pausingWriter) Write(b []byte) (int, error) {
	if !p.paused && p.n >= p.at {
		p.paused = true
		p.pause()
	}
	n, err := p.w.Write(b)
	p.n += int64(n)
	return n, err
}

type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// pipeTerminal is a terminal whose screen is r, that takes no input.
type pipeTerminal struct {
	r *io.PipeReader
}

func (p *pipeTerminal) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeTerminal) Write(b []byte) (int, error) { return len(b), nil }
func (p *pipeTerminal) Resize(int, int) error       { return nil }
func (p *pipeTerminal) Close() error                { return p.r.Close() }

// recordingConn keeps what a client writes.
type recordingConn struct {
	net.Conn
	mu  *sync.Mutex
	out *bytes.Buffer
}

func (r recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.out.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// TestCredentials: a clone's or a push's credential reaches the node's
// call as it was; it crosses once, sealed to the call's own key, never in
// the clear nor through encoding/json, and is in no error and no log
// line, even when the node's error quotes it; the node's copy is wiped
// after the call. A clone's progress arrives.
func TestCredentials(t *testing.T) {
	const username, secret = "x-access-token", "ghp_s3cr3tT0ken"
	check := func(auth *corral.GitAuth) error {
		if auth == nil || auth.Username != username || string(auth.Secret) != secret {
			return corral.Errorf(corral.EINVALID, "the credential did not cross: %+v", auth)
		}
		return nil
	}
	var progress []int
	tests := []struct {
		name string
		node func(kept *[]byte) *fake
		call func(c *noderpc.Client, auth *corral.GitAuth) error
		// The node's error quotes the credential: in a *corral.Error's
		// message and cause, or in a plain error's text.
		wantCode string
	}{
		{"clone", func(kept *[]byte) *fake {
			return &fake{clone: func(_ context.Context, spec corral.CloneSpec, p func(int)) (corral.CloneResult, error) {
				if err := check(spec.Auth); err != nil {
					return corral.CloneResult{}, err
				}
				*kept = spec.Auth.Secret
				for _, pc := range []int{10, 50, 100} {
					p(pc)
				}
				return corral.CloneResult{}, &corral.Error{Code: corral.EFORBIDDEN, Message: "the remote refused " + secret,
					Err: errors.New("git said: bad credential " + secret)}
			}}
		}, func(c *noderpc.Client, auth *corral.GitAuth) error {
			_, err := c.Clone(acting, "a", corral.CloneSpec{URL: "https://example.com/r.git", Auth: auth},
				func(p int) { progress = append(progress, p) })
			return err
		}, corral.EFORBIDDEN},
		{"push", func(kept *[]byte) *fake {
			return &fake{push: func(_ context.Context, auth *corral.GitAuth) (corral.PushResult, error) {
				if err := check(auth); err != nil {
					return corral.PushResult{}, err
				}
				*kept = auth.Secret
				return corral.PushResult{}, errors.New("git push https://" + username + ":" + secret + "@example.com failed")
			}}
		}, func(c *noderpc.Client, auth *corral.GitAuth) error {
			_, err := c.Push(acting, "a", "https://example.com/r.git", "main", auth)
			return err
		}, corral.EINTERNAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kept []byte
			srv := serve(t, tt.node(&kept))
			var mu sync.Mutex
			var wire bytes.Buffer
			c := noderpc.NewClient(func(ctx context.Context) (net.Conn, error) {
				conn, err := srv.dial(ctx)
				if err != nil {
					return nil, err
				}
				return recordingConn{conn, &mu, &wire}, nil
			})
			err := tt.call(c, &corral.GitAuth{Username: username, Secret: []byte(secret)})
			srv.stop() // every call it served has returned
			if corral.ErrorCode(err) != tt.wantCode {
				t.Fatalf("error %v, want %s", err, tt.wantCode)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes the credential: %v", err)
			}
			if strings.Contains(srv.log.String(), secret) {
				t.Errorf("the node's log has the credential:\n%s", srv.log)
			}
			mu.Lock()
			defer mu.Unlock()
			if bytes.Contains(wire.Bytes(), []byte(secret)) {
				t.Error("the credential crossed in the clear")
			}
			sealed := []byte{'s', 0, 0, 0, byte(len(secret) + box.AnonymousOverhead)}
			if n := bytes.Count(wire.Bytes(), sealed); n != 1 {
				t.Errorf("%d sealed credentials crossed, want one", n)
			}
			if bytes.Contains(wire.Bytes(), []byte(base64.StdEncoding.EncodeToString([]byte(secret))[:12])) {
				t.Error("the credential crossed base64'd: through encoding/json")
			}
			if kept == nil || bytes.Count(kept, []byte{0}) != len(kept) {
				t.Errorf("the node's copy of the credential is %q after the call, want it wiped", kept)
			}
		})
	}
	if !reflect.DeepEqual(progress, []int{10, 50, 100}) {
		t.Errorf("clone progress %v, want [10 50 100]", progress)
	}

	// No credential: none crosses, and the node's call gets nil.
	srv := serve(t, &fake{push: func(_ context.Context, auth *corral.GitAuth) (corral.PushResult, error) {
		if auth != nil {
			return corral.PushResult{}, corral.Errorf(corral.EINVALID, "a credential appeared: %+v", auth)
		}
		return corral.PushResult{Branch: "main", Head: "abc", Commits: 2}, nil
	}})
	if res, err := srv.client().Push(acting, "a", "https://example.com/r.git", "main", nil); err != nil || res.Commits != 2 {
		t.Fatalf("Push without a credential = %+v, %v", res, err)
	}
}

// countingReader is a body of 256 MiB that counts what was read of it.
type countingReader struct{ n atomic.Int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n.Load() >= 256<<20 {
		return 0, io.EOF
	}
	clear(p)
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// TestImport: a body crosses whole; a node that answers before the
// body's end (it refused the archive on its first bytes) is not sent the
// rest, and the call does not hang on it.
func TestImport(t *testing.T) {
	srv := serve(t, &fake{imports: func(_ context.Context, body io.Reader) (corral.ImportResult, error) {
		head := make([]byte, 4)
		if _, err := io.ReadFull(body, head); err != nil {
			return corral.ImportResult{}, err
		}
		if string(head) != "tar:" {
			return corral.ImportResult{}, corral.Errorf(corral.EINVALID, "not an archive")
		}
		h := sha256.New()
		n, err := io.Copy(h, body)
		return corral.ImportResult{Bytes: n, Commit: corral.CommitResult{SHA: fmt.Sprintf("%x", h.Sum(nil))}}, err
	}})
	c := srv.client()
	ctx := acting

	whole := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16+7)
	res, err := c.Import(ctx, "a", "application/x-tar", io.MultiReader(strings.NewReader("tar:"), bytes.NewReader(whole)), nil)
	if want := fmt.Sprintf("%x", sha256.Sum256(whole)); err != nil || res.Bytes != int64(len(whole)) || res.Commit.SHA != want {
		t.Fatalf("Import = %+v, %v; want %d bytes, hash %s", res, err, len(whole), want)
	}

	endless := &countingReader{} // as good as endless
	_, err = c.Import(ctx, "a", "application/x-tar", endless, nil)
	if corral.ErrorCode(err) != corral.EINVALID {
		t.Fatalf("Import of no archive = %v, want EINVALID", err)
	}
	if n := endless.n.Load(); n > 16<<20 {
		t.Errorf("the client read %d bytes of a body the node had refused", n)
	}

	// A body that fails: the node's Import fails too (nothing lands), and
	// the caller gets the body's error.
	broken := io.MultiReader(strings.NewReader("tar:"), &failingReader{corral.Errorf(corral.ETOOLARGE, "the upload is too large")})
	if _, err := c.Import(ctx, "a", "application/x-tar", broken, nil); corral.ErrorCode(err) != corral.ETOOLARGE {
		t.Fatalf("Import of a failing body = %v, want its ETOOLARGE", err)
	}
}

type failingReader struct{ err error }

func (f *failingReader) Read([]byte) (int, error) { return 0, f.err }

// TestDownloadsFrameTheirRefusal: a call answered with frames (Archive,
// ExportWorkspace) that the node refuses outright still answers in
// frames: an end frame, then the error line, which is what the client
// reads; never a bare line where a frame belongs.
func TestDownloadsFrameTheirRefusal(t *testing.T) {
	srv := serve(t, &fake{})
	for _, method := range []string{"Archive", "ExportWorkspace"} {
		conn, err := srv.dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(patience))
		fmt.Fprintf(conn, `{"m":%q,"a":"not the arguments"}`+"\n", method)
		br := bufio.NewReader(conn)
		head := make([]byte, 5)
		if _, err := io.ReadFull(br, head); err != nil || !bytes.Equal(head, []byte{'x', 0, 0, 0, 0}) {
			t.Fatalf("%s refused: first %q, %v; want an end frame", method, head, err)
		}
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, `"code":"invalid_input"`) {
			t.Fatalf("%s refused: then %q, %v; want the error line", method, line, err)
		}
		conn.Close()
	}
}

// TestAnswersInFlightBounded: a node that answers every call with a line
// as long as a line may be, and never ends it, cannot make control hold
// more than MaxHeld for it: past that, a call is refused (413) while the
// others wait, instead of control's memory growing with each call.
func TestAnswersInFlightBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				bufio.NewReader(c).ReadBytes('\n') // the header
				io.WriteString(c, `{"r":"`)
				for range noderpc.MaxLine>>20 - 1 {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
				<-done // and never a newline
			}()
		}
	}()
	client := noderpc.NewClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	})
	// Five calls of 15 MiB each pass 64 MiB: one at least is refused.
	calls := noderpc.MaxHeld/(noderpc.MaxLine-1<<20) + 1
	ctx, cancel := context.WithCancel(acting)
	defer cancel()
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := client.Session(ctx, "s1")
			errs <- err
		}()
	}
	select {
	case err := <-errs:
		if corral.ErrorCode(err) != corral.ETOOLARGE || !strings.Contains(corral.ErrorMessage(err), "in flight") {
			t.Fatalf("the first call to end = %v, want refused for the answers in flight", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no call was refused: control holds every answer in flight")
	}
	cancel()
	for range calls - 1 {
		select {
		case <-errs:
		case <-time.After(time.Minute):
			t.Fatal("a call did not end with its context")
		}
	}
}
