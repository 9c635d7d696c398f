package noderpc_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"corral"
	"corral/internal/nodetest"
	"corral/internal/relay"
	"corral/internal/relay/noderpc"
)

// TestOverTheRelay: the calls that lean on the stream's semantics (its
// end as cancellation, its flow control as backpressure, frames both ways)
// work over the relay's yamux streams as over TCP: the node dials
// control, serves on its end, and control's client opens a stream per
// call.
func TestOverTheRelay(t *testing.T) {
	const window = 256 << 10
	cfg := relay.Config{Window: window}
	sessions := make(chan *relay.Session, 1)
	auth := func(r *http.Request) (string, error) {
		if r.Header.Get("Authorization") != "Bearer node" {
			return "", corral.Errorf(corral.EUNAUTH, "not a node")
		}
		return "node-1", nil
	}
	ctl := httptest.NewServer(relay.Handler(auth, func(_ string, s *relay.Session) { sessions <- s }, cfg))
	defer ctl.Close()
	nodeEnd, err := relay.Dial(acting, "ws"+strings.TrimPrefix(ctl.URL, "http"),
		http.Header{"Authorization": {"Bearer node"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var controlEnd *relay.Session
	select {
	case controlEnd = <-sessions:
	case <-time.After(patience):
		t.Fatal("the node did not connect")
	}
	defer controlEnd.Close()

	var running inFlight
	var produced atomic.Int64
	const archiveSize = 64 << 20
	f := &fake{
		session: func(_ context.Context, id string) (corral.SessionState, error) {
			if id == "run_live" {
				return corral.SessionState{ID: id, Running: true}, nil
			}
			return corral.SessionState{}, corral.Errorf(corral.ENOTFOUND, "no session %s", id)
		},
		output: func(ctx context.Context) (corral.CommandOutput, error) {
			defer running.enter()()
			<-ctx.Done()
			return corral.CommandOutput{}, ctx.Err()
		},
		archive: func(ctx context.Context, w io.Writer) error {
			p := make([]byte, 32<<10)
			for i := int64(0); i < archiveSize/int64(len(p)); i++ {
				pattern(i, p)
				if _, err := w.Write(p); err != nil {
					return err
				}
				produced.Add(int64(len(p)))
			}
			return nil
		},
		imports: func(_ context.Context, body io.Reader) (corral.ImportResult, error) {
			n, err := io.Copy(io.Discard, body)
			return corral.ImportResult{Bytes: n}, err
		},
		terminal: func(context.Context) (corral.Terminal, error) {
			r, w := io.Pipe()
			return &echoTerminal{r: r, w: w}, nil
		},
	}
	served := make(chan error, 1)
	go func() { served <- noderpc.Serve(nodeEnd, f, slog.New(slog.DiscardHandler)) }()
	defer func() {
		nodeEnd.Close()
		select {
		case <-served:
		case <-time.After(patience):
			t.Error("Serve did not return once the relay closed")
		}
	}()
	c := noderpc.NewClient(controlEnd.Open)
	ctx := acting

	t.Run("errors", func(t *testing.T) {
		if st, err := c.Session(ctx, "run_live"); err != nil || !st.Running {
			t.Errorf("Session(run_live) = %+v, %v", st, err)
		}
		if _, err := c.Session(ctx, "run_none"); corral.ErrorCode(err) != corral.ENOTFOUND {
			t.Errorf("Session(run_none) = %v, want ENOTFOUND", err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.Output(wctx, "run_live", "c1", 0, true)
			done <- err
		}()
		waitFor(t, "the node to be in Output", func() bool { return running.n.Load() == 1 })
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("the cancelled Output returned %v", err)
			}
		case <-time.After(patience):
			t.Fatal("the cancelled Output did not return")
		}
		waitFor(t, "the node's Output to return", func() bool { return running.n.Load() == 0 })
	})

	t.Run("archive held up by one window", func(t *testing.T) {
		got := sha256.New()
		counted := &countingWriter{w: got}
		paused, resume := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- c.Archive(ctx, corral.FileScope{AgentID: "a"}, &pausingWriter{w: counted, at: 1 << 20, pause: func() {
				close(paused)
				<-resume
			}})
		}()
		<-paused
		held := settle(t, &produced) - counted.n.Load()
		t.Logf("produced but not consumed while the client did not read: %d KiB", held>>10)
		// One yamux window, and the fixed buffers of each end.
		if bound := int64(window + 256<<10); held > bound {
			t.Errorf("the node produced %d bytes the client had not read: more than %d", held, bound)
		}
		close(resume)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := sha256.New()
		p := make([]byte, 32<<10)
		for i := int64(0); i < archiveSize/int64(len(p)); i++ {
			pattern(i, p)
			want.Write(p)
		}
		if counted.n.Load() != archiveSize || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
			t.Fatalf("%d bytes arrived of %d, or not those sent", counted.n.Load(), archiveSize)
		}
	})

	t.Run("import", func(t *testing.T) {
		res, err := c.Import(ctx, "a", "application/x-tar", bytes.NewReader(make([]byte, 5<<20+3)), nil)
		if err != nil || res.Bytes != 5<<20+3 {
			t.Fatalf("Import = %+v, %v", res, err)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		term, err := c.Terminal(ctx, "run_live", 80, 24)
		if err != nil {
			t.Fatal(err)
		}
		s := nodetest.NewScreen(t, term)
		s.Type("over the relay")
		s.See("over the relay")
		term.Close()
		if _, err := term.Read(make([]byte, 1)); err == nil {
			t.Error("a closed terminal reads on")
		}
	})
	// Each call's stream is gone once both ends have closed it: none is
	// left behind.
	waitFor(t, "every stream to close", func() bool { return controlEnd.Streams() == 0 && nodeEnd.Streams() == 0 })
}

// echoTerminal shows what is typed.
type echoTerminal struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (e *echoTerminal) Read(b []byte) (int, error)  { return e.r.Read(b) }
func (e *echoTerminal) Write(b []byte) (int, error) { return e.w.Write(b) }
func (e *echoTerminal) Resize(int, int) error       { return nil }
func (e *echoTerminal) Close() error                { e.w.Close(); return e.r.Close() }
