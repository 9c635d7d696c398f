package noderpc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/crypto/nacl/box"

	"corral"
)

// Client is a sandbox node's trees and sessions (corral.Trees and
// corral.Sessions) on control: every call opens one stream with open and
// speaks to a Serve at the other end.
type Client struct {
	open func(ctx context.Context) (net.Conn, error)
	held *held // the answer lines its calls hold, at most MaxHeld
}

// NewClient returns a Client over open: relay.Session.Open, or a dialer.
func NewClient(open func(ctx context.Context) (net.Conn, error)) *Client {
	return &Client{open: open, held: &held{max: MaxHeld}}
}

var (
	_ corral.Trees    = (*Client)(nil)
	_ corral.Sessions = (*Client)(nil)
)

// stream is the client's end of one call.
type stream struct {
	ctx  context.Context
	conn net.Conn
	r    *reader
	held *held
	stop func() bool // unties the stream from ctx
}

// start opens a call's stream and sends its header, and the credential
// of auth when there is one.
func (c *Client) start(ctx context.Context, method string, args any, auth *corral.GitAuth) (*stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if auth != nil && len(auth.Secret) > maxSecret {
		return nil, corral.Errorf(corral.EINVALID, "a credential is at most %d KiB", maxSecret>>10)
	}
	req := request{M: method, A: args}
	if w, ok := corral.ActorOf(ctx); ok {
		req.W = &w
	}
	line, err := json.Marshal(req)
	if err != nil {
		return nil, corral.Internal("encode the call", err)
	}
	if len(line) > MaxLine {
		return nil, corral.Errorf(corral.ETOOLARGE, "the call is larger than the relay carries (%d MiB)", MaxLine>>20)
	}
	conn, err := c.open(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var e *corral.Error
		if errors.As(err, &e) {
			// The relay's own EUNAVAIL says more: keep its words.
			return nil, &corral.Error{Code: e.Code, Message: e.Message, Err: fmt.Errorf("%w: %w", errBroken, err)}
		}
		return nil, unreachable(err)
	}
	s := &stream{ctx: ctx, conn: conn, r: newReader(conn), held: c.held}
	// When ctx ends, the stream does: a blocked read or write returns, and
	// the server's read of the stream's end cancels the call there.
	s.stop = context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	if _, err := conn.Write(append(line, '\n')); err != nil {
		s.close()
		return nil, s.broken(err)
	}
	if auth != nil {
		if err := s.seal(auth.Secret); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// seal sends a credential sealed to the key the node made for this call
// alone (see the package doc): no transport buffer on either side ever
// holds it in the clear. A node that answers instead (it refused the
// call) leaves its answer for answerOf.
func (s *stream) seal(secret []byte) error {
	if b, err := s.r.peek(); err != nil {
		return s.broken(err)
	} else if b == '{' {
		return nil
	}
	var key [32]byte
	typ, p, err := s.r.frame(key[:])
	if err != nil {
		return s.broken(err)
	}
	if typ != frameKey || len(p) != len(key) {
		return malformed(fmt.Errorf("a %q frame of %d bytes where the call's key belongs", typ, len(p)))
	}
	sealed, err := box.SealAnonymous(make([]byte, frameHeader, frameHeader+len(secret)+box.AnonymousOverhead), secret, &key, rand.Reader)
	if err != nil {
		return corral.Internal("seal the credential", err)
	}
	sealed[0] = frameSecret
	binary.BigEndian.PutUint32(sealed[1:frameHeader], uint32(len(sealed)-frameHeader))
	if _, err := s.conn.Write(sealed); err != nil {
		return s.broken(err)
	}
	return nil
}

func (s *stream) close() {
	s.stop()
	s.conn.Close()
}

// broken is the error of a stream that failed: ctx's when it ended.
func (s *stream) broken(err error) error {
	if s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	return unreachable(err)
}

// answerOf reads the call's answer, passing progress reports on.
func answerOf[R any](s *stream, progress func(int)) (R, error) {
	var res R
	for {
		line, taken, err := s.r.lineHeld(MaxLine, s.held)
		// Given back once the line is decoded: until then it is held.
		release := func() { s.held.give(taken); taken = 0 }
		if errors.Is(err, errTooLong) {
			release()
			return res, malformed(err)
		}
		if errors.Is(err, errOverHeld) {
			release()
			return res, &corral.Error{Code: corral.ETOOLARGE, Err: err,
				Message: fmt.Sprintf("the sandbox node's answers in flight pass what control holds for it (%d MiB): the call is refused", MaxHeld>>20)}
		}
		if err != nil {
			release()
			return res, s.broken(err)
		}
		var a answer
		err = json.Unmarshal(line, &a)
		line = nil
		if err != nil {
			release()
			return res, malformed(err)
		}
		if a.R == nil && a.E == nil {
			release()
			if a.P == nil {
				return res, malformed(errors.New("an answer with neither a result nor an error"))
			}
			if progress != nil {
				progress(*a.P)
			}
			continue
		}
		if a.R != nil {
			// a.R is a copy of the line's result: still held until decoded.
			err := json.Unmarshal(a.R, &res)
			release()
			if err != nil {
				return res, malformed(err)
			}
		}
		release()
		if a.E != nil {
			return res, &corral.Error{Code: a.E.Code, Message: a.E.Message}
		}
		return res, nil
	}
}

// call makes a call whose input is its header and whose answer is one
// line.
func call[R any](c *Client, ctx context.Context, method string, args any) (R, error) {
	s, err := c.start(ctx, method, args, nil)
	if err != nil {
		var zero R
		return zero, err
	}
	defer s.close()
	return answerOf[R](s, nil)
}

func (c *Client) Stage(ctx context.Context, spec corral.StageSpec) error {
	_, err := call[none](c, ctx, "Stage", spec)
	return err
}

func (c *Client) ReopenStage(ctx context.Context, agentID, stageID string) error {
	_, err := call[none](c, ctx, "ReopenStage", stageArgs{agentID, stageID})
	return err
}

func (c *Client) Manifest(ctx context.Context, agentID, stageID string, policy corral.ClassPolicy) (corral.StageManifest, error) {
	return call[corral.StageManifest](c, ctx, "Manifest", manifestArgs{agentID, stageID, policy})
}

func (c *Client) Diffs(ctx context.Context, agentID, stageID string, entries []corral.ChangeEntry) ([]corral.ChangeEntry, error) {
	return call[[]corral.ChangeEntry](c, ctx, "Diffs", diffsArgs{agentID, stageID, entries})
}

func (c *Client) Apply(ctx context.Context, req corral.ApplyRequest) (corral.ApplyResult, error) {
	return call[corral.ApplyResult](c, ctx, "Apply", req)
}

func (c *Client) DiscardStage(ctx context.Context, stageID string) error {
	_, err := call[none](c, ctx, "DiscardStage", idArgs{stageID})
	return err
}

// Load asks the node how busy it is (see corral.NodeLoad).
func (c *Client) Load(ctx context.Context) (corral.NodeLoad, error) {
	return call[corral.NodeLoad](c, ctx, "Load", struct{}{})
}

func (c *Client) DropAgent(ctx context.Context, agentID string) error {
	_, err := call[none](c, ctx, "DropAgent", agentArgs{agentID})
	return err
}

func (c *Client) ReadFile(ctx context.Context, scope corral.FileScope, path string) ([]corral.FileInfo, []byte, error) {
	res, err := call[readResult](c, ctx, "ReadFile", readArgs{scope, path})
	return res.Files, res.Data, err
}

func (c *Client) WriteFile(ctx context.Context, w corral.FileWrite) (corral.CommitResult, error) {
	return call[corral.CommitResult](c, ctx, "WriteFile", w)
}

func (c *Client) DeleteFile(ctx context.Context, agentID, path string, recursive bool, commit *corral.CommitSpec) (corral.DeleteResult, error) {
	return call[corral.DeleteResult](c, ctx, "DeleteFile", deleteArgs{agentID, path, recursive, commit})
}

// Import sends body as it reads it, and stops once the node has
// answered: a node that refuses an archive early needs no more of it.
func (c *Client) Import(ctx context.Context, agentID, contentType string, body io.Reader, commit *corral.CommitSpec) (corral.ImportResult, error) {
	return upload[corral.ImportResult](c, ctx, "Import", importArgs{agentID, contentType, commit}, body)
}

func (c *Client) ImportWorkspace(ctx context.Context, agentID string, r io.Reader) error {
	_, err := upload[none](c, ctx, "ImportWorkspace", agentArgs{agentID}, r)
	return err
}

// upload makes a call whose body follows its header as 'd' frames, then
// 'x' (see the package doc); the answer may come before the body's end.
func upload[R any](c *Client, ctx context.Context, method string, args any, body io.Reader) (R, error) {
	var zero R
	s, err := c.start(ctx, method, args, nil)
	if err != nil {
		return zero, err
	}
	defer s.close()
	type got struct {
		res R
		err error
	}
	answered := make(chan got, 1)
	go func() {
		res, err := answerOf[R](s, nil)
		answered <- got{res, err}
	}()
	buf := make([]byte, frameHeader+maxChunk)
	for {
		select {
		case g := <-answered:
			return g.res, g.err
		default:
		}
		n, rerr := body.Read(buf[frameHeader:])
		if n > 0 {
			if _, err := s.conn.Write(putFrame(buf, frameData, buf[frameHeader:frameHeader+n])); err != nil {
				break // the answer, or why there is none, comes from the reading side
			}
		}
		if rerr == io.EOF {
			s.conn.Write(putFrame(buf, frameEnd, nil))
			break
		}
		if rerr != nil {
			// A stream that ends before 'x' fails the node's call:
			// nothing of the body lands.
			s.conn.SetDeadline(time.Now())
			<-answered
			return zero, fmt.Errorf("read what %s sends: %w", method, rerr)
		}
	}
	g := <-answered
	return g.res, g.err
}

// Archive writes the archive to w as it arrives: what the node wrote
// before an error is written, and the error returned.
func (c *Client) Archive(ctx context.Context, scope corral.FileScope, w io.Writer) error {
	return download(c, ctx, "Archive", scope, w)
}

func (c *Client) ExportWorkspace(ctx context.Context, agentID string, w io.Writer) error {
	return download(c, ctx, "ExportWorkspace", agentArgs{agentID}, w)
}

// download makes a call that answers with 'd' frames, then 'x' and the
// answer line, writing the frames to w as they arrive.
func download(c *Client, ctx context.Context, method string, args any, w io.Writer) error {
	s, err := c.start(ctx, method, args, nil)
	if err != nil {
		return err
	}
	defer s.close()
	buf := make([]byte, maxChunk)
	for {
		typ, p, err := s.r.frame(buf)
		if err != nil {
			return s.broken(err)
		}
		switch typ {
		case frameData:
			if _, err := w.Write(p); err != nil {
				return fmt.Errorf("write what %s sends: %w", method, err)
			}
		case frameEnd:
			_, err := answerOf[none](s, nil)
			return err
		default:
			return malformed(fmt.Errorf("a %q frame in what %s sends", typ, method))
		}
	}
}

// authArgsOf is what the header says of a credential; its bytes follow.
func authArgsOf(a *corral.GitAuth) *authArgs {
	if a == nil {
		return nil
	}
	return &authArgs{Username: a.Username, Secret: len(a.Secret)}
}

func (c *Client) Clone(ctx context.Context, agentID string, spec corral.CloneSpec, progress func(percent int)) (corral.CloneResult, error) {
	args := cloneArgs{Agent: agentID, URL: spec.URL, Ref: spec.Ref, Auth: authArgsOf(spec.Auth), Progress: progress != nil}
	s, err := c.start(ctx, "Clone", args, spec.Auth)
	if err != nil {
		return corral.CloneResult{}, err
	}
	defer s.close()
	return answerOf[corral.CloneResult](s, progress)
}

func (c *Client) CanClone(ctx context.Context, agentID string) error {
	_, err := call[none](c, ctx, "CanClone", agentArgs{agentID})
	return err
}

func (c *Client) Commit(ctx context.Context, agentID string, spec corral.CommitSpec) (corral.CommitResult, error) {
	return call[corral.CommitResult](c, ctx, "Commit", commitArgs{agentID, spec})
}

func (c *Client) Log(ctx context.Context, agentID string, n int) ([]corral.GitCommit, error) {
	return call[[]corral.GitCommit](c, ctx, "Log", logArgs{agentID, n})
}

func (c *Client) Push(ctx context.Context, agentID, url, branch string, auth *corral.GitAuth) (corral.PushResult, error) {
	s, err := c.start(ctx, "Push", pushArgs{Agent: agentID, URL: url, Branch: branch, Auth: authArgsOf(auth)}, auth)
	if err != nil {
		return corral.PushResult{}, err
	}
	defer s.close()
	return answerOf[corral.PushResult](s, nil)
}

func (c *Client) Sync(ctx context.Context, agentID string, spec corral.CloneSpec) (corral.SyncResult, error) {
	s, err := c.start(ctx, "Sync", cloneArgs{Agent: agentID, URL: spec.URL, Ref: spec.Ref, Auth: authArgsOf(spec.Auth)}, spec.Auth)
	if err != nil {
		return corral.SyncResult{}, err
	}
	defer s.close()
	return answerOf[corral.SyncResult](s, nil)
}

func (c *Client) StartSession(ctx context.Context, spec corral.SessionSpec) error {
	_, err := call[none](c, ctx, "StartSession", spec)
	return err
}

func (c *Client) Session(ctx context.Context, id string) (corral.SessionState, error) {
	return call[corral.SessionState](c, ctx, "Session", idArgs{id})
}

func (c *Client) Exec(ctx context.Context, sessionID string, cmd corral.Command) error {
	_, err := call[none](c, ctx, "Exec", execArgs{sessionID, cmd})
	return err
}

// Output's data arrives as frames (see serveOutput), at most
// corral.MaxOutputRead of it.
func (c *Client) Output(ctx context.Context, sessionID, commandID string, offset int64, wait bool) (corral.CommandOutput, error) {
	s, err := c.start(ctx, "Output", outputArgs{sessionID, commandID, offset, wait}, nil)
	if err != nil {
		return corral.CommandOutput{}, err
	}
	defer s.close()
	var out corral.CommandOutput
	buf := make([]byte, maxChunk)
	for {
		typ, p, err := s.r.frame(buf)
		if err != nil {
			return corral.CommandOutput{}, s.broken(err)
		}
		switch typ {
		case frameData:
			if len(out.Data)+len(p) > corral.MaxOutputRead {
				return corral.CommandOutput{}, malformed(fmt.Errorf("more than %d bytes of output at once", corral.MaxOutputRead))
			}
			out.Data = append(out.Data, p...)
		case frameEnd:
			a, err := answerOf[outputAnswer](s, nil)
			if err != nil {
				return corral.CommandOutput{}, err
			}
			out.Exit = a.Exit
			return out, nil
		default:
			return corral.CommandOutput{}, malformed(fmt.Errorf("a %q frame in an output", typ))
		}
	}
}

func (c *Client) Signal(ctx context.Context, sessionID, commandID, signal string) error {
	_, err := call[none](c, ctx, "Signal", signalArgs{sessionID, commandID, signal})
	return err
}

func (c *Client) EndSession(ctx context.Context, id string) error {
	_, err := call[none](c, ctx, "EndSession", idArgs{id})
	return err
}
