package noderpc_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
)

// typed is a terminal that keeps what it is typed and shows nothing until
// it is closed.
type typed struct {
	mu     sync.Mutex
	got    strings.Builder
	closed chan struct{}
	once   sync.Once
}

func (t *typed) Read([]byte) (int, error) { <-t.closed; return 0, io.EOF }
func (t *typed) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.got.Write(p)
	return len(p), nil
}
func (t *typed) Resize(int, int) error { return nil }
func (t *typed) Close() error          { t.once.Do(func() { close(t.closed) }); return nil }
func (t *typed) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.got.String()
}

// TestActorReplayed: the node decides access again, with package access,
// from the four fields each call and each terminal frame carries: a call
// that acts in a sandbox without them, or for a level that may not, is
// refused before the node's method runs; a terminal's next keystroke
// after a revocation on control never reaches the shell.
func TestActorReplayed(t *testing.T) {
	shell := &typed{closed: make(chan struct{})}
	c := serve(t, &fake{terminal: func(context.Context) (corral.Terminal, error) { return shell, nil }}).client()
	viewer := corral.WithActor(context.Background(), corral.Actor{UserID: "usr_v", AgentID: "agt_t", Level: corral.LevelViewer})
	runner := corral.WithActor(context.Background(), corral.Actor{UserID: "usr_r", AgentID: "agt_t", Level: corral.LevelRunner})
	// The fake has no Exec or StartSession: were a refused call let
	// through, it would panic there and the client would see EUNAVAIL.
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"exec with no actor", func() error { return c.Exec(context.Background(), "s1", corral.Command{ID: "c"}) }},
		{"exec for a viewer", func() error { return c.Exec(viewer, "s1", corral.Command{ID: "c"}) }},
		{"a session for a viewer", func() error { return c.StartSession(viewer, corral.SessionSpec{ID: "s1"}) }},
		{"a terminal for a runner", func() error { _, err := c.Terminal(runner, "s1", 80, 24); return err }},
		{"a terminal with no actor", func() error { _, err := c.Terminal(context.Background(), "s1", 80, 24); return err }},
	} {
		if err := tt.call(); corral.ErrorCode(err) != corral.EFORBIDDEN {
			t.Errorf("%s: %v, want EFORBIDDEN", tt.name, err)
		}
	}

	term, err := c.Terminal(acting, "s1", 80, 24) // an editor
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if _, err := term.Write([]byte("typed-while-editor\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first keystrokes to reach the shell", func() bool { return strings.Contains(shell.String(), "typed-while-editor") })
	// Control re-reads the grant for the next frame: downgraded to viewer.
	term.(corral.ActingTerminal).Act(corral.Actor{UserID: "usr_t", AgentID: "agt_t", Level: corral.LevelViewer})
	term.Write([]byte("typed-after-revocation\n"))
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(term); ended <- err }()
	select {
	case err := <-ended:
		if corral.ErrorCode(err) != corral.EFORBIDDEN {
			t.Fatalf("the terminal after a revocation ended with %v, want EFORBIDDEN", err)
		}
	case <-time.After(patience):
		t.Fatal("the terminal went on after the revocation")
	}
	if strings.Contains(shell.String(), "typed-after-revocation") {
		t.Fatal("a keystroke after the revocation reached the shell")
	}

	// Only the level may change under an open terminal: a frame for
	// another person, account session or agent ends it, even an editor's.
	opener := corral.Actor{UserID: "usr_t", SessionID: "ses_1", AgentID: "agt_t", Level: corral.LevelEditor}
	for _, other := range []corral.Actor{
		{UserID: "usr_x", SessionID: "ses_1", AgentID: "agt_t", Level: corral.LevelEditor},
		{UserID: "usr_t", SessionID: "ses_2", AgentID: "agt_t", Level: corral.LevelEditor},
		{UserID: "usr_t", SessionID: "ses_1", AgentID: "agt_x", Level: corral.LevelOwner},
	} {
		shell := &typed{closed: make(chan struct{})}
		c := serve(t, &fake{terminal: func(context.Context) (corral.Terminal, error) { return shell, nil }}).client()
		term, err := c.Terminal(corral.WithActor(context.Background(), opener), "s1", 80, 24)
		if err != nil {
			t.Fatal(err)
		}
		term.(corral.ActingTerminal).Act(opener) // the same viewer: let through
		term.Write([]byte("typed-by-opener\n"))
		waitFor(t, "the opener's keystrokes", func() bool { return strings.Contains(shell.String(), "typed-by-opener") })
		term.(corral.ActingTerminal).Act(other)
		term.Write([]byte("typed-by-another\n"))
		ended := make(chan error, 1)
		go func() { _, err := io.ReadAll(term); ended <- err }()
		select {
		case err := <-ended:
			if corral.ErrorCode(err) != corral.EFORBIDDEN {
				t.Fatalf("a frame for %+v ended the terminal with %v, want EFORBIDDEN", other, err)
			}
		case <-time.After(patience):
			t.Fatalf("the terminal went on after a frame for %+v", other)
		}
		if strings.Contains(shell.String(), "typed-by-another") {
			t.Fatalf("a keystroke for %+v reached the shell", other)
		}
		term.Close()
	}
}
