package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral"
	"corral/internal/sanitize"
)

// Client is the server's connection to one supervisor.
type Client struct {
	dir  string
	conn net.Conn

	wmu sync.Mutex // serialises requests on the connection
	seq uint64

	mu      sync.Mutex
	pending map[uint64]chan message
	changed chan struct{} // closed and replaced on every event
	state   *State        // the session's final state, once it ended

	gone chan struct{} // closed when the connection is lost
}

// Spawn starts a supervisor for a new session in dir, which must not hold
// one already, and connects to it. exe is the binary to run as the
// supervisor ("" for this one); it must call Dispatch first thing.
func Spawn(dir string, cfg Config, exe string) (*Client, error) {
	if exe == "" {
		exe = "/proc/self/exe"
	}
	// The supervisor starts in "/": a relative dir would name another place.
	if !filepath.IsAbs(dir) {
		return nil, corral.Internal("session directory", fmt.Errorf("%q is not an absolute path", dir))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, corral.Internal("session directory", err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath(dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, corral.Internal("supervisor log", err)
	}
	defer logf.Close()
	sr, sw, err := os.Pipe()
	if err != nil {
		return nil, corral.Internal("supervisor pipe", err)
	}
	defer sr.Close()
	cmd := &exec.Cmd{
		Path:       exe,
		Args:       []string{"corral-supervisor", Arg, dir},
		Env:        []string{"GOMAXPROCS=2"}, // nothing of the server's
		Dir:        "/",
		Stdin:      bytes.NewReader(b),
		Stdout:     logf,
		Stderr:     logf,
		ExtraFiles: []*os.File{sw},
		// Its own session and process group: a signal to the server's
		// group (a terminal's ^C) does not reach it, and it does not die
		// with the server.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		sw.Close()
		return nil, corral.Errorf(corral.EUNAVAIL, "start the session's supervisor: %v", err)
	}
	sw.Close()
	go cmd.Wait() // reaped here while this server lives; by init after
	line, _ := bufio.NewReader(sr).ReadString('\n')
	switch {
	case line == "ok\n":
	case strings.HasPrefix(line, "error "):
		return nil, &corral.Error{Code: corral.EUNAVAIL, Message: "its supervisor did not start", Op: "supervisor",
			Err: errors.New(strings.TrimSpace(strings.TrimPrefix(line, "error ")))}
	default:
		return nil, corral.Errorf(corral.EUNAVAIL, "the session's supervisor ended before it started (see %s)", logPath(dir))
	}
	return Dial(dir)
}

// Dial connects to the supervisor of the session in dir. ENOTFOUND means
// no supervisor is there (any more).
func Dial(dir string) (*Client, error) {
	conn, err := dialUnix(sockPath(dir))
	if err != nil {
		return nil, &corral.Error{Code: corral.ENOTFOUND, Message: "no supervisor for the session in " + dir, Op: "supervisor.Dial", Err: err}
	}
	c := &Client{dir: dir, conn: conn, pending: map[uint64]chan message{}, changed: make(chan struct{}), gone: make(chan struct{})}
	go c.read()
	return c, nil
}

func (c *Client) read() {
	defer close(c.gone)
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		c.mu.Lock()
		if m.Seq != 0 {
			if ch := c.pending[m.Seq]; ch != nil {
				delete(c.pending, m.Seq)
				ch <- m
			}
		} else {
			if m.Event == "ended" {
				c.state = m.State
			}
			close(c.changed)
			c.changed = make(chan struct{})
		}
		c.mu.Unlock()
	}
	c.conn.Close()
	c.mu.Lock()
	for seq, ch := range c.pending {
		delete(c.pending, seq)
		close(ch)
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// dialUnix connects to a socket whose path may be longer than a socket
// address holds (108 bytes): through its directory's descriptor.
func dialUnix(path string) (net.Conn, error) {
	d, err := os.OpenFile(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return net.Dial("unix", fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path)))
}

// Gone is closed when the connection to the supervisor is lost: the
// session ended, or the supervisor died.
func (c *Client) Gone() <-chan struct{} { return c.gone }

// Close drops the connection; the session goes on (see Config.Grace).
func (c *Client) Close() { c.conn.Close() }

func (c *Client) call(ctx context.Context, m message) (message, error) {
	ch := make(chan message, 1)
	c.wmu.Lock()
	c.seq++
	m.Seq = c.seq
	c.mu.Lock()
	select {
	case <-c.gone:
		c.mu.Unlock()
		c.wmu.Unlock()
		return message{}, errGone
	default:
	}
	c.pending[m.Seq] = ch
	c.mu.Unlock()
	b, _ := json.Marshal(m)
	c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := c.conn.Write(append(b, '\n'))
	c.wmu.Unlock()
	if err != nil {
		return message{}, errGone
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return message{}, errGone
		}
		if r.Error != "" {
			return r, corral.Errorf(corral.EINVALID, "%s", r.Error)
		}
		return r, nil
	case <-ctx.Done():
		return message{}, ctx.Err()
	}
}

var errGone = corral.Errorf(corral.EUNAVAIL, "the session's supervisor is gone")

// Exec starts a command; starting one that was started before under the
// same id does nothing.
func (c *Client) Exec(ctx context.Context, e Exec) error {
	_, err := c.call(ctx, message{Op: "exec", Exec: &e})
	return err
}

// Signal sends a signal (TERM, KILL, INT, HUP) to a running command's
// process group.
func (c *Client) Signal(ctx context.Context, id, sig string) error {
	_, err := c.call(ctx, message{Op: "signal", ID: id, Signal: sig})
	return err
}

// End kills the session and waits until the supervisor has recorded it.
func (c *Client) End(ctx context.Context) error {
	if _, err := c.call(ctx, message{Op: "end"}); err != nil && !errors.Is(err, errGone) {
		return err
	}
	select {
	case <-c.gone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Status asks the supervisor for the session's state: a connection alone
// does not show that it is there (a supervisor being killed still holds
// its socket open for a moment, and the kernel queues the connection).
func (c *Client) Status(ctx context.Context) (State, error) {
	r, err := c.call(ctx, message{Op: "status"})
	if err != nil {
		return State{}, err
	}
	if r.State == nil {
		return State{}, errGone
	}
	return *r.State, nil
}

// Read returns up to max bytes of a command's output from offset, and its
// exit once it has ended. It reads the log on disk, so it answers the
// same whether or not the supervisor is still there.
func (c *Client) Read(id string, offset int64, max int) ([]byte, *Exit, error) {
	return Read(c.dir, id, offset, max)
}

// Read is Client.Read without a client: for a session whose supervisor is
// gone.
func Read(dir, id string, offset int64, most int) ([]byte, *Exit, error) {
	if err := sanitize.CommandID(id); err != nil {
		return nil, nil, err
	}
	// The exit first: a log read after it holds everything.
	var ex *Exit
	var e Exit
	if err := readJSON(exitPath(dir, id), &e); err == nil {
		ex = &e
	} else if !os.IsNotExist(err) {
		return nil, nil, corral.Internal("command exit", err)
	}
	f, err := os.Open(outPath(dir, id))
	if os.IsNotExist(err) {
		return nil, nil, corral.Errorf(corral.ENOTFOUND, "no command %q in the session", id)
	}
	if err != nil {
		return nil, nil, corral.Internal("command log", err)
	}
	defer f.Close()
	// What is there to read, not max: a command that writes little is
	// read often.
	if st, err := f.Stat(); err == nil {
		most = int(min(int64(most), max(st.Size()-offset, 0)))
	}
	buf := make([]byte, most)
	n, err := f.ReadAt(buf, offset)
	if err != nil && err != io.EOF {
		return nil, nil, corral.Internal("command log", err)
	}
	if ex != nil && offset+int64(n) < ex.Kept {
		ex = nil // more to read before the end
	}
	return buf[:n], ex, nil
}

// Wait waits until a command's log holds more than offset bytes or the
// command has ended. It fails when the supervisor goes away first.
func (c *Client) Wait(ctx context.Context, id string, offset int64) error {
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		if fi, err := os.Stat(outPath(c.dir, id)); err == nil && fi.Size() > offset {
			return nil
		}
		if _, err := os.Stat(exitPath(c.dir, id)); err == nil {
			return nil
		}
		select {
		case <-c.gone:
			if _, err := os.Stat(exitPath(c.dir, id)); err == nil {
				return nil
			}
			return errGone
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Ended is the session's final state once the supervisor has said it
// ended, or from its state file once it is gone.
func (c *Client) Ended() (State, bool) {
	c.mu.Lock()
	st := c.state
	c.mu.Unlock()
	if st != nil {
		return *st, true
	}
	select {
	case <-c.gone:
		s, err := ReadState(c.dir)
		return s, err == nil && s.State != StateRunning
	default:
		return State{}, false
	}
}
