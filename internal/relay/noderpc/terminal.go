package noderpc

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"corral/internal/access"

	"corral"
)

// serveTerminal attaches a viewer to the session's shell and carries it
// until the client detaches: typed bytes and resizes in, the screen out.
func serveTerminal(ctx context.Context, n Node, args json.RawMessage, c *served) {
	var a terminalArgs
	if err := decode(args, &a); err != nil {
		c.answer(nil, err)
		return
	}
	term, err := n.Terminal(ctx, a.Session, a.Cols, a.Rows)
	if err != nil {
		c.answer(nil, err)
		return
	}
	var once sync.Once
	detach := func() { once.Do(func() { term.Close() }) }
	defer detach()
	if c.answer(nil, nil) != nil {
		return
	}
	out := make(chan struct{})
	go func() {
		defer close(out)
		terminalOutput(c, term, detach)
	}()
	if err := terminalInput(c, term); err != nil {
		// Refused a frame: the viewer is detached, and told why.
		detach()
		<-out
		return
	}
	// The client detached or went: nobody reads the screen any more.
	c.gone()
	detach()
	<-out
}

// terminalInput passes what the client sends to the shell, a frame at a
// time, until it detaches. Each input frame is let through only when the
// actor that came with it (the call's, or a later actor frame's) may use
// the terminal: a grant revoked on control cuts the terminal here on its
// next keystroke. A refusal is returned, after the client is told.
var errOtherViewer = errors.New("a frame for another viewer")

func terminalInput(c *served, term corral.Terminal) error {
	buf := make([]byte, maxChunk)
	var werr error
	actor := c.actor
	for {
		typ, p, err := c.r.frame(buf)
		if err != nil {
			return nil
		}
		switch typ {
		case frameActor:
			var w corral.Actor
			if json.Unmarshal(p, &w) != nil {
				return nil
			}
			// Only the level may change under an open terminal: frames
			// for another person, account session or agent are refused.
			if c.actor == nil || w.UserID != c.actor.UserID || w.SessionID != c.actor.SessionID || w.AgentID != c.actor.AgentID {
				if c.frame(frameEnd, nil) == nil {
					c.answer(nil, corral.Errorf(corral.EFORBIDDEN, "the sandbox node refuses: a terminal's frames come from the viewer who opened it"))
				}
				return errOtherViewer
			}
			actor = &w
		case frameData:
			if err := allowed(actor, access.UseTerminal); err != nil {
				if c.frame(frameEnd, nil) == nil {
					c.answer(nil, err)
				}
				return err
			}
			// A shell that is gone takes nothing more; its end reaches the
			// client on the screen's side.
			if werr == nil {
				_, werr = term.Write(p)
			}
		case frameResize:
			if len(p) == 4 && werr == nil {
				term.Resize(int(binary.BigEndian.Uint16(p[:2])), int(binary.BigEndian.Uint16(p[2:])))
			}
		case frameClose:
			return nil
		default:
			return nil // not a terminal's frame
		}
	}
}

// terminalOutput passes the screen to the client until the shell is gone,
// then says how it went.
func terminalOutput(c *served, term corral.Terminal, detach func()) {
	buf := make([]byte, maxChunk)
	for {
		n, err := term.Read(buf)
		if n > 0 {
			if c.frame(frameData, buf[:n]) != nil {
				detach()
				return
			}
		}
		if err != nil {
			if c.ctx.Err() != nil {
				return // detached here: the client is gone
			}
			if errors.Is(err, io.EOF) {
				err = nil // the shell exited
			}
			if c.frame(frameEnd, nil) == nil {
				c.answer(nil, err)
			}
			return
		}
	}
}

func (c *Client) Terminal(ctx context.Context, sessionID string, cols, rows int) (corral.Terminal, error) {
	s, err := c.start(ctx, "Terminal", terminalArgs{sessionID, cols, rows}, nil)
	if err != nil {
		return nil, err
	}
	if _, err := answerOf[none](s, nil); err != nil {
		s.close()
		return nil, err
	}
	// ctx bounds the open only: the terminal lasts until Close, as
	// node.Local's does.
	if !s.stop() {
		s.close()
		return nil, ctx.Err()
	}
	s.ctx = context.Background()
	return &terminal{s: s, rbuf: make([]byte, maxChunk), wbuf: make([]byte, frameHeader+maxChunk)}, nil
}

// terminal is the client's end of a terminal stream.
type terminal struct {
	s    *stream
	rbuf []byte
	left []byte
	end  error // what Read returns once left is drained

	wmu    sync.Mutex
	wbuf   []byte
	actor  *corral.Actor // sent before each input frame
	closed atomic.Bool
	once   sync.Once
}

// Read returns the screen; io.EOF once the shell has exited, the node's
// error when the session ended.
func (t *terminal) Read(p []byte) (int, error) {
	for len(t.left) == 0 {
		if t.end != nil {
			return 0, t.end
		}
		typ, b, err := t.s.r.frame(t.rbuf)
		switch {
		case err != nil && t.closed.Load():
			t.end = net.ErrClosed
		case err != nil:
			t.end = unreachable(err)
		case typ == frameData:
			t.left = b
		case typ == frameEnd:
			if _, err := answerOf[none](t.s, nil); err != nil {
				t.end = err
			} else {
				t.end = io.EOF
			}
		default:
			t.end = malformed(fmt.Errorf("a %q frame on a terminal", typ))
		}
	}
	n := copy(p, t.left)
	t.left = t.left[n:]
	return n, nil
}

func (t *terminal) write(typ byte, p []byte) error {
	_, err := t.s.conn.Write(putFrame(t.wbuf, typ, p))
	if err != nil {
		if t.closed.Load() {
			return net.ErrClosed
		}
		return unreachable(err)
	}
	return nil
}

// Act sets the actor sent with the frames typed from now on.
func (t *terminal) Act(a corral.Actor) {
	t.wmu.Lock()
	t.actor = &a
	t.wmu.Unlock()
}

// Write types p, after the actor Act last set.
func (t *terminal) Write(p []byte) (int, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.actor != nil {
		b, _ := json.Marshal(t.actor)
		if err := t.write(frameActor, b); err != nil {
			return 0, err
		}
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), maxChunk)
		if err := t.write(frameData, p[:k]); err != nil {
			return n, err
		}
		n += k
		p = p[k:]
	}
	return n, nil
}

// Resize is checked here, with the supervisor's bounds, because the
// node's answer to a resize has no way back but the screen.
func (t *terminal) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 1000 || rows > 1000 {
		return corral.Errorf(corral.EINVALID, "a terminal is 1 to 1000 columns and rows")
	}
	var p [4]byte
	binary.BigEndian.PutUint16(p[:2], uint16(cols))
	binary.BigEndian.PutUint16(p[2:], uint16(rows))
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.write(frameResize, p[:])
}

// Close detaches this viewer; the shell runs on. A Read or Write in
// progress returns.
func (t *terminal) Close() error {
	t.once.Do(func() {
		t.closed.Store(true)
		// Say so, unless a Write is held up (by a shell that reads no
		// input): then the stream's end says it.
		if t.wmu.TryLock() {
			t.s.conn.SetWriteDeadline(time.Now().Add(time.Second))
			t.write(frameClose, nil)
			t.wmu.Unlock()
		}
		t.s.conn.SetDeadline(time.Now())
		t.s.close()
	})
	return nil
}

var _ corral.ActingTerminal = (*terminal)(nil)
