package noderpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"corral/internal/access"

	"corral"
)

// MaxLine bounds one header or answer line.
const MaxLine = 16 << 20

// Version is this protocol's: a node says it when it connects, and
// control takes only its own (a credential's key exchange, say, cannot
// work half-way). 2: credentials cross sealed.
const Version = "2"

// VersionHeader is where a node's connection says it.
const VersionHeader = "Corral-Node-Protocol"

// Sizes of the fixed buffers each end reads and writes through.
const (
	maxChunk  = 32 << 10 // a data frame's payload
	maxSecret = 64 << 10 // a credential's
	readBuf   = 64 << 10
)

// Frame types (see the package doc).
const (
	frameData   = 'd'
	frameEnd    = 'x'
	frameSecret = 's'
	frameKey    = 'k'
	frameResize = 'r'
	frameClose  = 'c'
)

const frameHeader = 5

var errTooLong = errors.New("line longer than the relay carries")

// reader reads a stream through a fixed buffer it owns, rather than
// bufio's, so that what passed through it (a credential) can be wiped.
type reader struct {
	rd   io.Reader
	buf  []byte
	i, n int
}

func newReader(rd io.Reader) *reader { return &reader{rd: rd, buf: make([]byte, readBuf)} }

func (r *reader) fill() error {
	n, err := r.rd.Read(r.buf)
	r.i, r.n = 0, n
	if n > 0 {
		return nil // a conn's error comes again on the next read
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

func (r *reader) Read(p []byte) (int, error) {
	if r.i == r.n {
		if len(p) >= len(r.buf) {
			return r.rd.Read(p)
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.i:r.n])
	r.i += n
	return n, nil
}

// errOverHeld is a line that would take a client past MaxHeld.
var errOverHeld = errors.New("answers in flight larger than the relay holds")

// MaxHeld bounds the bytes of answer lines a Client holds at once, across
// all its calls: a node that answers every call with a line as long as it
// may cannot make control hold more than this for it.
const MaxHeld = 64 << 20

// held counts the bytes of answer lines a Client holds.
type held struct {
	mu  sync.Mutex
	n   int
	max int
}

// take reserves n bytes; false when that would pass max.
func (h *held) take(n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n+n > h.max {
		return false
	}
	h.n += n
	return true
}

func (h *held) give(n int) {
	h.mu.Lock()
	h.n -= n
	h.mu.Unlock()
}

// line reads up to the next newline, which it drops; errTooLong past max
// bytes, without reading further.
func (r *reader) line(max int) ([]byte, error) {
	line, _, err := r.lineHeld(max, nil)
	return line, err
}

// lineHeld is line, each byte of it taken from h first (nil: none):
// errOverHeld, without reading further, when h has none left. It returns
// how many bytes it took, for the caller to give back once it is done
// with the line (also on an error).
func (r *reader) lineHeld(limit int, h *held) ([]byte, int, error) {
	var line []byte
	taken := 0
	for {
		if r.i == r.n {
			if err := r.fill(); err != nil {
				if err == io.EOF && len(line) > 0 {
					err = io.ErrUnexpectedEOF
				}
				return nil, taken, err
			}
		}
		chunk := r.buf[r.i:r.n]
		k := bytes.IndexByte(chunk, '\n')
		if k >= 0 {
			chunk = chunk[:k]
		}
		if len(line)+len(chunk) > limit {
			return nil, taken, errTooLong
		}
		if h != nil {
			// Taken at what the line's buffer may grow to, so what is
			// counted is what is held.
			if grow := max(0, len(line)+len(chunk)-taken); grow > 0 {
				if !h.take(grow) {
					return nil, taken, errOverHeld
				}
				taken += grow
			}
		}
		line = append(line, chunk...)
		r.i += len(chunk)
		if k >= 0 {
			r.i++
			return line, taken, nil
		}
	}
}

// frame reads one frame into buf; an error when its payload is longer
// than buf.
func (r *reader) frame(buf []byte) (byte, []byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > uint32(len(buf)) {
		return 0, nil, fmt.Errorf("a %q frame of %d bytes, more than %d", h[0], n, len(buf))
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return h[0], buf[:n], nil
}

// peek returns the next byte without reading it.
func (r *reader) peek() (byte, error) {
	if r.i == r.n {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	return r.buf[r.i], nil
}

func (r *reader) wipe() { clear(r.buf) }

// putFrame writes a frame of p into buf (frameHeader+len(p) bytes at
// least) and returns it: one Write per frame.
func putFrame(buf []byte, typ byte, p []byte) []byte {
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:frameHeader], uint32(len(p)))
	n := copy(buf[frameHeader:], p)
	return buf[:frameHeader+n]
}

// request is a header line: the method, its arguments, and who it is
// made for (see acting).
type request struct {
	M string        `json:"m"`
	A any           `json:"a"`
	W *corral.Actor `json:"w,omitempty"`
}

// acting are the calls that act in a sandbox, and what each needs of the
// level its actor holds: the node replays the decision with package
// access, and refuses such a call that carries no actor. Calls that only
// read or end (Output, Signal, EndSession) need none: ending a run must
// never be refused.
var acting = map[string]access.Action{
	"StartSession": access.SendMessage,
	"Exec":         access.SendMessage,
	"Terminal":     access.UseTerminal,
}

// allowed replays the access decision for a call or a frame.
func allowed(w *corral.Actor, action access.Action) error {
	if w == nil {
		return corral.Errorf(corral.EFORBIDDEN, "the sandbox node refuses a call that says for whom it is made")
	}
	if err := access.Check(w.Level, action).Err("agent", action); err != nil {
		return corral.Errorf(corral.EFORBIDDEN, "the sandbox node refuses: the person's access does not allow %s", action)
	}
	return nil
}

// frameActor, on a terminal, carries the actor of the input frame that
// follows (JSON), read fresh by control for that frame.
const frameActor = 'w'

// wireError is what crosses of an error.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// answer is an answer line as the client decodes it: a result R, with an
// error E when the call failed, or else a progress report P.
type answer struct {
	R json.RawMessage `json:"r"`
	E *wireError      `json:"e"`
	P *int            `json:"p"`
}

func answerLine(res any, e *wireError) ([]byte, error) {
	return json.Marshal(struct {
		R any        `json:"r"`
		E *wireError `json:"e,omitempty"`
	}{res, e})
}

// unreachable is a stream that broke before the call's answer.
func unreachable(err error) error {
	return &corral.Error{Code: corral.EUNAVAIL, Message: "the sandbox node is unreachable", Err: fmt.Errorf("%w: %w", errBroken, err)}
}

// errBroken marks the relay's failures, as against the node's answers.
var errBroken = errors.New("relay broken")

// Unreachable says whether err is the relay's (a stream that broke, a
// relay that is down) rather than the node's answer: the call may not
// have reached the node, or its answer not come back.
func Unreachable(err error) bool { return errors.Is(err, errBroken) }

// malformed is an answer that does not follow the protocol.
func malformed(err error) error {
	return &corral.Error{Code: corral.EINTERNAL, Message: "the sandbox node's answer is malformed", Err: err}
}

// redact takes secret out of text, for an error that might quote it.
func redact(text string, secret []byte) string {
	if len(secret) == 0 {
		return text
	}
	b := []byte(text)
	for {
		i := bytes.Index(b, secret)
		if i < 0 {
			return string(b)
		}
		b = append(b[:i:i], append([]byte("[redacted]"), b[i+len(secret):]...)...)
	}
}
