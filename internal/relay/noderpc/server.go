package noderpc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/crypto/nacl/box"

	"corral"
)

// Node is what Serve answers calls with: both halves of the sandbox node
// (node.Local), its trees and its sessions. One that also says its load
// (Load(ctx) (corral.NodeLoad, error), as node.Local does) answers
// control's ask of how busy it is.
type Node interface {
	corral.Trees
	corral.Sessions
}

// Serve answers Node calls arriving as streams on l (each Accept is one
// call) with n, until l closes. It returns the error that ended Accept,
// once the calls in flight, whose ctx it cancels, have returned.
func Serve(l net.Listener, n Node, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for {
		conn, err := l.Accept()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveCall(base, conn, n, log)
		}()
	}
}

// served is the server's end of one call.
type served struct {
	conn   net.Conn
	r      *reader
	ctx    context.Context
	cancel context.CancelFunc
	log    *slog.Logger
	method string

	watched chan struct{} // closed when the watching read returns; nil before watch

	wmu  sync.Mutex // one write at a time: progress, frames, the answer
	wbuf []byte

	// secret is the call's credential while it runs: taken out of errors.
	secret []byte
	actor  *corral.Actor // of a call that acts in a sandbox
}

func serveCall(base context.Context, conn net.Conn, n Node, log *slog.Logger) {
	ctx, cancel := context.WithCancel(base)
	c := &served{conn: conn, r: newReader(conn), ctx: ctx, cancel: cancel, log: log}
	// Serve ends: so does a call still reading its header.
	stop := context.AfterFunc(base, func() { conn.SetDeadline(time.Now()) })
	defer func() {
		stop()
		c.end()
	}()
	// One call that panics must not take the node's other calls with it;
	// its client sees the stream end (EUNAVAIL).
	defer func() {
		if p := recover(); p != nil {
			log.Error("node call panicked", "method", c.method, "panic", redact(fmt.Sprint(p), c.secret), "stack", string(debug.Stack()))
		}
	}()
	line, err := c.r.line(MaxLine)
	if err != nil {
		if errors.Is(err, errTooLong) {
			c.fail(corral.Errorf(corral.ETOOLARGE, "the call is larger than the relay carries (%d MiB)", MaxLine>>20))
		}
		return
	}
	var req struct {
		M string          `json:"m"`
		A json.RawMessage `json:"a"`
		W *corral.Actor   `json:"w"`
	}
	if err := json.Unmarshal(line, &req); err != nil {
		c.fail(corral.Errorf(corral.EINVALID, "the call is malformed"))
		return
	}
	m, ok := methods[req.M]
	if !ok {
		name := req.M
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		c.fail(corral.Errorf(corral.EINVALID, "the sandbox node has no method %q", name))
		return
	}
	c.method = req.M
	if action, ok := acting[req.M]; ok {
		if err := allowed(req.W, action); err != nil {
			c.fail(err)
			return
		}
		c.actor = req.W
	}
	m(ctx, n, req.A, c)
}

// watch starts the read that learns of the client's going away, once the
// call's input has been read: the client sends nothing more, so the read
// returns only when the stream ends.
func (c *served) watch() {
	c.watched = make(chan struct{})
	go func() {
		defer close(c.watched)
		var b [1]byte
		c.r.Read(b[:])
		c.gone()
	}()
}

// gone ends the call's ctx and unblocks its writes: nobody reads them.
func (c *served) gone() {
	c.cancel()
	c.conn.SetWriteDeadline(time.Now())
}

// end stops the watching read, wipes what the call read and closes the
// stream.
func (c *served) end() {
	c.conn.SetReadDeadline(time.Now())
	if c.watched != nil {
		<-c.watched
	}
	c.cancel()
	c.r.wipe()
	c.conn.Close()
}

func (c *served) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.conn.Write(b)
	return err
}

// frame writes one frame.
func (c *served) frame(typ byte, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wbuf == nil {
		c.wbuf = make([]byte, frameHeader+maxChunk)
	}
	_, err := c.conn.Write(putFrame(c.wbuf, typ, p))
	return err
}

// answer writes the call's answer line: res, and err as it may cross.
// A result crosses with an error too: an Apply's ECONFLICT comes with
// the paths that conflict.
func (c *served) answer(res any, err error) error {
	var e *wireError
	if err != nil {
		e = c.crossing(err)
		if v := reflect.ValueOf(res); !v.IsValid() || v.IsZero() {
			res = nil // most failures have no result to speak of
		}
	}
	line, merr := answerLine(res, e)
	if merr != nil {
		line, _ = answerLine(nil, c.crossing(corral.Internal("encode the answer", merr)))
	} else if len(line) > MaxLine {
		line, _ = answerLine(nil, c.crossing(corral.Errorf(corral.ETOOLARGE, "the answer is larger than the relay carries (%d MiB)", MaxLine>>20)))
	}
	return c.write(append(line, '\n'))
}

// fail answers err alone.
func (c *served) fail(err error) error { return c.answer(nil, err) }

// crossing is what crosses of err: a *corral.Error's code and message,
// EINTERNAL for anything else. What the client is not told is logged.
func (c *served) crossing(err error) *wireError {
	w := &wireError{Code: corral.EINTERNAL, Message: "the sandbox node failed"}
	var e *corral.Error
	if errors.As(err, &e) {
		w.Code, w.Message = e.Code, redact(e.Message, c.secret)
	}
	if w.Code == corral.EINTERNAL {
		level := slog.LevelError
		if c.ctx.Err() != nil {
			level = slog.LevelDebug // the client went away: that is why it failed
		}
		c.log.Log(context.Background(), level, "node call failed", "method", c.method, "err", redact(err.Error(), c.secret))
	}
	return w
}

// method serves one call whose header is read; it writes its answer.
type method func(ctx context.Context, n Node, args json.RawMessage, c *served)

func decode(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return corral.Errorf(corral.EINVALID, "the call's arguments are malformed")
	}
	return nil
}

// plain is a method whose input is its header and whose answer is one
// line.
func plain[A, R any](f func(ctx context.Context, n Node, a A) (R, error)) method {
	return func(ctx context.Context, n Node, args json.RawMessage, c *served) {
		var a A
		if err := decode(args, &a); err != nil {
			c.answer(nil, err)
			return
		}
		c.watch()
		res, err := f(ctx, n, a)
		c.answer(res, err)
	}
}

// none is the result of a method that returns only an error.
type none = *struct{}

// Arguments of the methods whose arguments are not one corral type.
type (
	stageArgs struct {
		Agent, Stage string
	}
	manifestArgs struct {
		Agent, Stage string
		Policy       corral.ClassPolicy
	}
	diffsArgs struct {
		Agent, Stage string
		Entries      []corral.ChangeEntry
	}
	readArgs struct {
		Scope corral.FileScope
		Path  string
	}
	readResult struct {
		Files []corral.FileInfo
		Data  []byte
	}
	deleteArgs struct {
		Agent, Path string
		Recursive   bool
		Commit      *corral.CommitSpec
	}
	importArgs struct {
		Agent, ContentType string
		Commit             *corral.CommitSpec
	}
	agentArgs struct {
		Agent string
	}
	commitArgs struct {
		Agent string
		Spec  corral.CommitSpec
	}
	logArgs struct {
		Agent string
		N     int
	}
	// authArgs is a GitAuth whose secret follows the header ('s').
	authArgs struct {
		Username string
		Secret   int // its length
	}
	cloneArgs struct {
		Agent, URL, Ref string
		Auth            *authArgs
		Progress        bool
	}
	pushArgs struct {
		Agent, URL, Branch string
		Auth               *authArgs
	}
	idArgs struct {
		ID string
	}
	execArgs struct {
		Session string
		Command corral.Command
	}
	outputArgs struct {
		Session, Command string
		Offset           int64
		Wait             bool
	}
	signalArgs struct {
		Session, Command, Signal string
	}
	terminalArgs struct {
		Session    string
		Cols, Rows int
	}
)

var methods = map[string]method{
	"Stage": plain(func(ctx context.Context, n Node, a corral.StageSpec) (none, error) {
		return nil, n.Stage(ctx, a)
	}),
	"ReopenStage": plain(func(ctx context.Context, n Node, a stageArgs) (none, error) {
		return nil, n.ReopenStage(ctx, a.Agent, a.Stage)
	}),
	"Manifest": plain(func(ctx context.Context, n Node, a manifestArgs) (corral.StageManifest, error) {
		return n.Manifest(ctx, a.Agent, a.Stage, a.Policy)
	}),
	"Diffs": plain(func(ctx context.Context, n Node, a diffsArgs) ([]corral.ChangeEntry, error) {
		return n.Diffs(ctx, a.Agent, a.Stage, a.Entries)
	}),
	"Apply": plain(func(ctx context.Context, n Node, a corral.ApplyRequest) (corral.ApplyResult, error) {
		return n.Apply(ctx, a)
	}),
	"DiscardStage": plain(func(ctx context.Context, n Node, a idArgs) (none, error) {
		return nil, n.DiscardStage(ctx, a.ID)
	}),
	"Load": plain(func(ctx context.Context, n Node, _ struct{}) (corral.NodeLoad, error) {
		l, ok := n.(interface {
			Load(context.Context) (corral.NodeLoad, error)
		})
		if !ok {
			return corral.NodeLoad{}, corral.Errorf(corral.EINVALID, "the sandbox node does not say its load")
		}
		return l.Load(ctx)
	}),
	"DropAgent": plain(func(ctx context.Context, n Node, a agentArgs) (none, error) {
		return nil, n.DropAgent(ctx, a.Agent)
	}),
	"ReadFile": plain(func(ctx context.Context, n Node, a readArgs) (readResult, error) {
		files, data, err := n.ReadFile(ctx, a.Scope, a.Path)
		return readResult{files, data}, err
	}),
	"WriteFile": plain(func(ctx context.Context, n Node, a corral.FileWrite) (corral.CommitResult, error) {
		return n.WriteFile(ctx, a)
	}),
	"DeleteFile": plain(func(ctx context.Context, n Node, a deleteArgs) (corral.DeleteResult, error) {
		return n.DeleteFile(ctx, a.Agent, a.Path, a.Recursive, a.Commit)
	}),
	"Import":          serveImport,
	"ImportWorkspace": serveImportWorkspace,
	"ExportWorkspace": serveExportWorkspace,
	"Archive":         serveArchive,
	"Clone":           serveClone,
	"CanClone": plain(func(ctx context.Context, n Node, a agentArgs) (none, error) {
		return nil, n.CanClone(ctx, a.Agent)
	}),
	"Commit": plain(func(ctx context.Context, n Node, a commitArgs) (corral.CommitResult, error) {
		return n.Commit(ctx, a.Agent, a.Spec)
	}),
	"Log": plain(func(ctx context.Context, n Node, a logArgs) ([]corral.GitCommit, error) {
		return n.Log(ctx, a.Agent, a.N)
	}),
	"Push": servePush,
	"Sync": serveSync,

	"StartSession": plain(func(ctx context.Context, n Node, a corral.SessionSpec) (none, error) {
		return nil, n.StartSession(ctx, a)
	}),
	"Session": plain(func(ctx context.Context, n Node, a idArgs) (corral.SessionState, error) {
		return n.Session(ctx, a.ID)
	}),
	"Exec": plain(func(ctx context.Context, n Node, a execArgs) (none, error) {
		return nil, n.Exec(ctx, a.Session, a.Command)
	}),
	"Output": serveOutput,
	"Signal": plain(func(ctx context.Context, n Node, a signalArgs) (none, error) {
		return nil, n.Signal(ctx, a.Session, a.Command, a.Signal)
	}),
	"EndSession": plain(func(ctx context.Context, n Node, a idArgs) (none, error) {
		return nil, n.EndSession(ctx, a.ID)
	}),
	"Terminal": serveTerminal,
}

// body is an Import's archive as it arrives: 'd' frames until 'x'.
type body struct {
	c     *served
	buf   []byte
	left  []byte
	ended bool  // 'x' came
	err   error // what Read returns once left is empty
}

func (b *body) Read(p []byte) (int, error) {
	for len(b.left) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		typ, payload, err := b.c.r.frame(b.buf)
		switch {
		case err != nil:
			b.err = errors.New("the upload broke off")
			b.c.gone()
		case typ == frameEnd:
			b.ended, b.err = true, io.EOF
			b.c.watch()
		case typ == frameData:
			b.left = payload
		default:
			b.err = errors.New("a frame that is not the upload's")
			b.c.gone()
		}
	}
	n := copy(p, b.left)
	b.left = b.left[n:]
	return n, nil
}

func serveImport(ctx context.Context, n Node, args json.RawMessage, c *served) {
	uploaded(ctx, n, args, c, func(ctx context.Context, n Node, a importArgs, b io.Reader) (any, error) {
		return n.Import(ctx, a.Agent, a.ContentType, b, a.Commit)
	})
}

func serveImportWorkspace(ctx context.Context, n Node, args json.RawMessage, c *served) {
	uploaded(ctx, n, args, c, func(ctx context.Context, n Node, a agentArgs, b io.Reader) (any, error) {
		return nil, n.ImportWorkspace(ctx, a.Agent, b)
	})
}

// uploaded serves a call whose body follows its header as frames.
func uploaded[A any](ctx context.Context, n Node, args json.RawMessage, c *served, f func(context.Context, Node, A, io.Reader) (any, error)) {
	var a A
	if err := decode(args, &a); err != nil {
		c.answer(nil, err)
		return
	}
	b := &body{c: c, buf: make([]byte, maxChunk)}
	res, err := f(ctx, n, a, b)
	if c.answer(res, err) != nil || b.ended || b.err != nil {
		return
	}
	// Answered before the body's end: drop what the client sends until
	// it has read the answer and stops, so that closing the stream does
	// not reset it under an answer the client has yet to read.
	for {
		typ, _, err := c.r.frame(b.buf)
		if err != nil || typ == frameEnd {
			return
		}
	}
}

// archiveWriter sends what a node's Archive writes as 'd' frames.
type archiveWriter struct{ c *served }

func (w archiveWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := w.c.ctx.Err(); err != nil {
			return n, err
		}
		k := min(len(p), maxChunk)
		if err := w.c.frame(frameData, p[:k]); err != nil {
			return n, err
		}
		n += k
		p = p[k:]
	}
	return n, nil
}

func serveExportWorkspace(ctx context.Context, n Node, args json.RawMessage, c *served) {
	var a agentArgs
	if err := decode(args, &a); err != nil {
		// The client reads frames first: the end, then why.
		if c.frame(frameEnd, nil) == nil {
			c.answer(nil, err)
		}
		return
	}
	c.watch()
	err := n.ExportWorkspace(ctx, a.Agent, archiveWriter{c})
	if c.frame(frameEnd, nil) == nil {
		c.answer(nil, err)
	}
}

func serveArchive(ctx context.Context, n Node, args json.RawMessage, c *served) {
	var scope corral.FileScope
	if err := decode(args, &scope); err != nil {
		// The client reads frames first: the end, then why.
		if c.frame(frameEnd, nil) == nil {
			c.answer(nil, err)
		}
		return
	}
	c.watch()
	err := n.Archive(ctx, scope, archiveWriter{c})
	if c.frame(frameEnd, nil) == nil {
		c.answer(nil, err)
	}
}

// readSecret reads the credential the header announced: it sends a
// public key made for this call, opens the credential the client sealed
// to it into a slice of its own that the caller wipes, and wipes the
// private key. What the relay's buffers and the stream's reader held is
// the sealed form, which nothing can open once the key is gone.
func (c *served) readSecret(a *authArgs) (*corral.GitAuth, error) {
	if a == nil {
		return nil, nil
	}
	if a.Secret < 0 || a.Secret > maxSecret {
		return nil, corral.Errorf(corral.EINVALID, "a credential of %d bytes", a.Secret)
	}
	pub, priv, err := box.GenerateKey(rand.Reader)
	if err != nil {
		return nil, corral.Internal("make the call's key", err)
	}
	defer clear(priv[:])
	if err := c.frame(frameKey, pub[:]); err != nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "the call's stream broke")
	}
	sealed := make([]byte, a.Secret+box.AnonymousOverhead)
	typ, p, err := c.r.frame(sealed)
	if err != nil || typ != frameSecret || len(p) != len(sealed) {
		return nil, corral.Errorf(corral.EINVALID, "the call's credential is malformed")
	}
	buf, ok := box.OpenAnonymous(make([]byte, 0, a.Secret), p, pub, priv)
	if !ok || len(buf) != a.Secret {
		clear(buf)
		return nil, corral.Errorf(corral.EINVALID, "the call's credential is malformed")
	}
	c.secret = buf
	return &corral.GitAuth{Username: a.Username, Secret: buf}, nil
}

// forget wipes the call's credential: the node keeps none after the call.
func (c *served) forget() {
	clear(c.secret)
	c.secret = nil
}

func serveClone(ctx context.Context, n Node, args json.RawMessage, c *served) {
	var a cloneArgs
	if err := decode(args, &a); err != nil {
		c.answer(nil, err)
		return
	}
	auth, err := c.readSecret(a.Auth)
	defer c.forget()
	if err != nil {
		c.answer(nil, err)
		return
	}
	c.watch()
	var progress func(int)
	var mu sync.Mutex
	answered := false
	if a.Progress {
		progress = func(p int) {
			mu.Lock()
			defer mu.Unlock()
			if answered {
				return // a report after the clone returned has nowhere to go
			}
			b, _ := json.Marshal(struct {
				P int `json:"p"`
			}{p})
			if c.write(append(b, '\n')) != nil {
				c.gone()
			}
		}
	}
	res, err := n.Clone(ctx, a.Agent, corral.CloneSpec{URL: a.URL, Ref: a.Ref, Auth: auth}, progress)
	mu.Lock()
	answered = true
	mu.Unlock()
	c.answer(res, err)
}

func servePush(ctx context.Context, n Node, args json.RawMessage, c *served) {
	var a pushArgs
	if err := decode(args, &a); err != nil {
		c.answer(nil, err)
		return
	}
	auth, err := c.readSecret(a.Auth)
	defer c.forget()
	if err != nil {
		c.answer(nil, err)
		return
	}
	c.watch()
	res, err := n.Push(ctx, a.Agent, a.URL, a.Branch, auth)
	c.answer(res, err)
}

// serveSync is Push's shape with Clone's arguments: a credential that
// crosses sealed, no progress.
func serveSync(ctx context.Context, n Node, args json.RawMessage, c *served) {
	var a cloneArgs
	if err := decode(args, &a); err != nil {
		c.answer(nil, err)
		return
	}
	auth, err := c.readSecret(a.Auth)
	defer c.forget()
	if err != nil {
		c.answer(nil, err)
		return
	}
	c.watch()
	res, err := n.Sync(ctx, a.Agent, corral.CloneSpec{URL: a.URL, Ref: a.Ref, Auth: auth})
	c.answer(res, err)
}

// outputAnswer is an Output's answer line: its data crossed as frames.
type outputAnswer struct {
	Exit *corral.CommandExit
}

// serveOutput sends what the node's Output returned as 'd' frames, raw
// (a command's output is the bulk of what crosses: through JSON it would
// be base64'd and scanned twice), then 'x' and the answer line.
func serveOutput(ctx context.Context, n Node, args json.RawMessage, c *served) {
	var a outputArgs
	if err := decode(args, &a); err != nil {
		if c.frame(frameEnd, nil) == nil {
			c.answer(nil, err)
		}
		return
	}
	c.watch()
	out, err := n.Output(ctx, a.Session, a.Command, a.Offset, a.Wait)
	if err != nil {
		out = corral.CommandOutput{}
	}
	for p := out.Data; len(p) > 0; {
		k := min(len(p), maxChunk)
		if c.frame(frameData, p[:k]) != nil {
			return
		}
		p = p[k:]
	}
	if c.frame(frameEnd, nil) == nil {
		c.answer(outputAnswer{Exit: out.Exit}, err)
	}
}
