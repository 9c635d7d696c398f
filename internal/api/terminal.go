package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"corral"
	"corral/internal/service"
)

// Close codes of a terminal's websocket, besides websocket.StatusNormalClosure
// (the shell exited).
const (
	closeRevoked = 4403 // the caller may not (any more)
	closeEnded   = 4404 // the run is over, or its session gone
)

// terminalRecheck is how often an idle terminal re-checks its viewer's
// access, so that a revoked one is cut off even when nothing is typed or
// shown.
const terminalRecheck = 2 * time.Second

// runTerminal is GET /api/runs/{id}/terminal: a websocket to the shell in
// the run's session. Binary frames are terminal bytes, both ways; a text
// frame from the browser is a control message ({"type":"resize", ...}).
// Access is decided again before every frame either way, and every few
// seconds: a caller who loses it is closed with 4403. Output is passed on
// with blocking writes and nothing queued: a browser that reads slowly
// holds the shell up, not the server's memory.
func (s *Server) runTerminal(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	id := r.PathValue("id")
	// Errors before the upgrade are answered as usual.
	release, err := s.streams.acquire(credentialKey(r))
	if err != nil {
		return err
	}
	defer release()
	term, err := s.runs.Terminal(r.Context(), actor, id, 80, 24)
	if err != nil {
		return err
	}
	defer term.Close()
	c, err := websocket.Accept(w, r, nil) // same origin only
	if err != nil {
		return nil // Accept has answered
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 10)

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if s.cfg.Done != nil {
		go func() {
			select {
			case <-s.cfg.Done:
				c.Close(websocket.StatusGoingAway, "the server is stopping")
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	// check decides the caller's access afresh: the session (or token)
	// still valid, and the grant on the run's agent still editor or more.
	check := func() error {
		if _, err := s.authenticate(r); err != nil {
			return err
		}
		return term.Check(ctx)
	}
	revoked := func() {
		c.Close(closeRevoked, "your access to this terminal was revoked")
		cancel()
	}
	go func() {
		t := time.NewTicker(terminalRecheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if check() != nil {
					revoked()
					return
				}
			}
		}
	}()
	go s.terminalOutput(ctx, cancel, c, term, check, revoked)
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return nil
		}
		if check() != nil {
			revoked()
			return nil
		}
		switch typ {
		case websocket.MessageBinary:
			if _, err := term.Write(data); err != nil {
				return nil
			}
		case websocket.MessageText:
			var m struct {
				Type       string
				Cols, Rows int
			}
			if json.Unmarshal(data, &m) == nil && m.Type == "resize" {
				if err := term.Resize(m.Cols, m.Rows); err != nil && corral.ErrorCode(err) == corral.EINVALID {
					c.Close(websocket.StatusPolicyViolation, corral.ErrorMessage(err))
					return nil
				}
			}
		}
	}
}

// terminalOutput passes the shell's output to the browser until either
// ends.
func (s *Server) terminalOutput(ctx context.Context, cancel func(), c *websocket.Conn, term *service.Terminal,
	check func() error, revoked func()) {
	defer cancel()
	buf := make([]byte, 32<<10)
	for {
		n, err := term.Read(buf)
		if n > 0 {
			if check() != nil {
				revoked()
				return
			}
			wctx, done := context.WithTimeout(ctx, s.cfg.StreamWriteTimeout)
			werr := c.Write(wctx, websocket.MessageBinary, buf[:n])
			done()
			if werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.Close(websocket.StatusNormalClosure, "the shell exited")
				return
			}
			// The session ended with the run, or its supervisor is gone.
			c.Close(closeEnded, "the run has ended")
			return
		}
	}
}
