package supervisor

// A session's terminal: one interactive shell on a pseudo-terminal inside
// the session, held by the supervisor so that it outlives the server like
// the session's commands. Any number of viewers attach to it, each on a
// connection of its own that carries frames (see frame): a new viewer gets
// the last RingSize bytes of the screen first, then what the shell writes.
// Output goes to every viewer from one reader, with blocking writes: a
// slow viewer slows the reader, which stops reading the pty, and the
// kernel holds the rest (and then the shell blocks), so no buffer grows.
// A viewer that takes nothing for viewerTimeout is cut off.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/creack/pty"

	"corral"
	"corral/internal/sandbox"
)

// RingSize is how much of a terminal's output a late viewer gets.
const RingSize = 64 << 10

// viewerTimeout bounds how long one viewer may hold the terminal's output
// up before it is cut off.
const viewerTimeout = 30 * time.Second

// Frame types on a terminal connection.
const (
	frameOutput = 'o' // supervisor to server: terminal bytes
	frameInput  = 'i' // server to supervisor: keystrokes
	frameResize = 'r' // server to supervisor: 2+2 bytes, columns and rows
	frameExit   = 'e' // supervisor to server: the shell ended; 4 bytes, its exit status
	frameEnded  = 'x' // supervisor to server: the session ended, and the shell with it
)

// maxFrame bounds one frame's payload.
const maxFrame = 64 << 10

func writeFrame(w io.Writer, typ byte, p []byte) error {
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(p)))
	if _, err := w.Write(append(h[:], p...)); err != nil {
		return err
	}
	return nil
}

func readFrame(r *bufio.Reader, buf []byte) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("terminal frame of %d bytes", n)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return 0, nil, err
	}
	return h[0], buf[:n], nil
}

func resizePayload(cols, rows int) []byte {
	var p [4]byte
	binary.BigEndian.PutUint16(p[:2], uint16(cols))
	binary.BigEndian.PutUint16(p[2:], uint16(rows))
	return p[:]
}

type terminal struct {
	s      *supervisor
	proc   *sandbox.Proc
	master *os.File

	mu      sync.Mutex // held while output goes out, so a joiner sees no gap
	ring    []byte
	viewers map[net.Conn]struct{}
	ended   bool

	sizeMu sync.Mutex
	size   pty.Winsize // the last size a viewer asked for
}

// setSize makes ws the terminal's size, the one it keeps.
func (t *terminal) setSize(ws pty.Winsize) {
	t.sizeMu.Lock()
	defer t.sizeMu.Unlock()
	t.size = ws
	pty.Setsize(t.master, &ws)
}

// keepSize puts the viewer's size back if something inside changed it.
// Readline, as each prompt starts, reads the size and writes it back
// (rltty.c's set_winsize): a resize that lands between the two is undone,
// and the shell and its programs go on at the old size while the viewer
// shows the new one. Checked before each piece of output goes out, so
// whatever a viewer reads next was written at its size or is followed by
// a SIGWINCH; a program that sets a size of its own (stty rows 10) is
// overruled the same way: the viewer's window is the size.
func (t *terminal) keepSize() {
	t.sizeMu.Lock()
	defer t.sizeMu.Unlock()
	if t.size.Cols == 0 {
		return
	}
	rows, cols, err := pty.Getsize(t.master)
	if err == nil && (rows != int(t.size.Rows) || cols != int(t.size.Cols)) {
		pty.Setsize(t.master, &t.size)
	}
}

// shell is the terminal's program: bash where the host (whose /usr the
// sandbox sees) has it, else sh.
func shell() []string {
	if _, err := os.Stat("/bin/bash"); err == nil {
		return []string{"/bin/bash", "-i"}
	}
	return []string{"/bin/sh", "-i"}
}

var terminalEnv = append(corral.SessionEnv("/tmp"), "TERM=xterm-256color", "PS1=sandbox:\\w$ ")

// openTerminal returns the session's terminal, starting its shell if none
// runs.
func (s *supervisor) openTerminal(cols, rows int) (*terminal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.term != nil {
		return s.term, nil
	}
	master, slave, err := pty.Open()
	if err != nil {
		return nil, corral.Internal("terminal", err)
	}
	t := &terminal{s: s, master: master, viewers: map[net.Conn]struct{}{}}
	if cols > 0 && rows > 0 {
		t.setSize(pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	}
	proc, err := s.sess.Exec(sandbox.Command{Argv: shell(), Env: terminalEnv, TTY: true}, slave, slave, slave)
	slave.Close()
	if err != nil {
		master.Close()
		return nil, err
	}
	t.proc = proc
	s.term = t
	s.finished.Add(1)
	go t.run()
	return t, nil
}

// run copies the shell's output to the ring and the viewers until the
// shell ends, then tells them and forgets the terminal.
func (t *terminal) run() {
	defer t.s.finished.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			t.keepSize()
			t.out(buf[:n])
		}
		if err != nil {
			break // EIO: every process holding the terminal has ended
		}
	}
	code, _ := t.proc.Exit()
	typ := byte(frameExit)
	if t.s.sess.Ended() {
		typ = frameEnded
	}
	t.master.Close()
	t.s.mu.Lock()
	if t.s.term == t {
		t.s.term = nil
	}
	t.s.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(code))
	for c := range t.viewers {
		c.SetWriteDeadline(time.Now().Add(viewerTimeout))
		writeFrame(c, typ, p[:])
		c.Close()
	}
	t.viewers = nil
}

func (t *terminal) out(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring = append(t.ring, p...)
	if over := len(t.ring) - RingSize; over > 0 {
		t.ring = append(t.ring[:0], t.ring[over:]...)
	}
	for c := range t.viewers {
		c.SetWriteDeadline(time.Now().Add(viewerTimeout))
		if err := writeFrame(c, frameOutput, p); err != nil {
			c.Close()
			delete(t.viewers, c)
		}
	}
}

// attach serves one viewer on c until it goes or the shell ends.
func (t *terminal) attach(c net.Conn, r *bufio.Reader) {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return
	}
	c.SetWriteDeadline(time.Now().Add(viewerTimeout))
	if err := writeFrame(c, frameOutput, t.ring); err != nil {
		t.mu.Unlock()
		return
	}
	t.viewers[c] = struct{}{}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.viewers, c)
		t.mu.Unlock()
	}()
	buf := make([]byte, maxFrame)
	for {
		typ, p, err := readFrame(r, buf)
		if err != nil {
			return
		}
		switch typ {
		case frameInput:
			// Blocks while the shell reads nothing: the viewer's input
			// waits in its connection, not here.
			if _, err := t.master.Write(p); err != nil {
				return
			}
		case frameResize:
			if len(p) == 4 {
				cols, rows := binary.BigEndian.Uint16(p[:2]), binary.BigEndian.Uint16(p[2:])
				if cols > 0 && rows > 0 {
					t.setSize(pty.Winsize{Cols: cols, Rows: rows})
				}
			}
		}
	}
}

// Terminal is a viewer's connection to a session's terminal, on the server.
type Terminal struct {
	conn net.Conn
	r    *bufio.Reader
	wmu  sync.Mutex

	rbuf  []byte
	left  []byte // of the last output frame, not read yet
	code  int
	done  bool
	ended bool // the session ended, not only the shell
}

// Terminal attaches a new viewer to the session's terminal, starting its
// shell with the given size if none runs.
func (c *Client) Terminal(cols, rows int) (*Terminal, error) {
	conn, err := dialUnix(sockPath(c.dir))
	if err != nil {
		return nil, errGone
	}
	b, _ := jsonLine(message{Seq: 1, Op: "terminal", Cols: cols, Rows: rows})
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(b); err != nil {
		conn.Close()
		return nil, errGone
	}
	r := bufio.NewReaderSize(conn, maxFrame+5)
	var m message
	for m.Seq != 1 { // events may come first
		line, err := readLine(r, 1<<20)
		if err != nil {
			conn.Close()
			return nil, errGone
		}
		m = message{}
		if err := json.Unmarshal(line, &m); err != nil {
			conn.Close()
			return nil, errGone
		}
	}
	conn.SetDeadline(time.Time{})
	if m.Error != "" {
		conn.Close()
		return nil, corral.Errorf(corral.EUNAVAIL, "%s", m.Error)
	}
	return &Terminal{conn: conn, r: r, rbuf: make([]byte, maxFrame)}, nil
}

// ErrSessionEnded is what a terminal's Read returns once its session has
// ended (the shell with it).
var ErrSessionEnded = corral.Errorf(corral.ECONFLICT, "the run's session has ended")

// Read returns the terminal's output: the screen so far, then what the
// shell writes. io.EOF once the shell has exited (Exit says how),
// ErrSessionEnded once the session has ended.
func (t *Terminal) Read(p []byte) (int, error) {
	for len(t.left) == 0 {
		if t.ended {
			return 0, ErrSessionEnded
		}
		if t.done {
			return 0, io.EOF
		}
		typ, b, err := readFrame(t.r, t.rbuf)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return 0, io.ErrUnexpectedEOF // the supervisor went, not the shell
			}
			return 0, err
		}
		switch typ {
		case frameOutput:
			t.left = b
		case frameExit, frameEnded:
			if len(b) == 4 {
				t.code = int(binary.BigEndian.Uint32(b))
			}
			t.done, t.ended = true, typ == frameEnded
		}
	}
	n := copy(p, t.left)
	t.left = t.left[n:]
	return n, nil
}

// Write sends keystrokes.
func (t *Terminal) Write(p []byte) (int, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	for off := 0; off < len(p); off += maxFrame {
		if err := writeFrame(t.conn, frameInput, p[off:min(off+maxFrame, len(p))]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// Resize sets the terminal's size.
func (t *Terminal) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 1000 || rows > 1000 {
		return corral.Errorf(corral.EINVALID, "a terminal is 1 to 1000 columns and rows")
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return writeFrame(t.conn, frameResize, resizePayload(cols, rows))
}

// Exit is the shell's exit status, once Read has returned io.EOF.
func (t *Terminal) Exit() int { return t.code }

// Close detaches the viewer; the shell goes on.
func (t *Terminal) Close() error { return t.conn.Close() }
