package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// The bounds of reading on after the client went away. The provider sends
// its usage in the last chunk, so Relay reads the stream to its end to meter
// the call; these keep a runaway stream from holding the gateway. Variables
// only so that tests can make them small.
var (
	drainBytes int64 = 16 << 20
	drainTime        = 2 * time.Minute
)

// maxBody bounds a whole (not streamed) answer and an error answer.
const (
	maxBody      = 64 << 20
	maxErrorBody = 1 << 20
)

// Relay writes the upstream Chat Completions answer to w in the call's
// protocol, flushing each event as it is made, and returns how it went,
// the provider's usage first.
//
// ctx is the client's request context: when it ends the client has gone.
// Relay then stops writing but reads upstream on to its end, at most
// drainBytes and drainTime, so that the final usage chunk is still read:
// the upstream request must therefore be made with a context that outlives
// the client's (context.WithoutCancel), and closing upstream.Body is how the
// caller stops it sooner.
//
// An upstream answer that is not 2xx is written in the client's protocol's
// error shape, with the provider's message verbatim, its status and its
// Retry-After; Usage is then zero, since the provider billed nothing.
func Relay(ctx context.Context, w http.ResponseWriter, upstream *http.Response, call Call) Result {
	defer upstream.Body.Close()
	res := Result{Status: upstream.StatusCode}
	if upstream.StatusCode/100 != 2 {
		relayError(w, upstream, call, &res)
		return res
	}
	body := &countingReader{r: upstream.Body}
	o := newOut(ctx, w, upstream.Body)
	o.body = body
	defer o.stop()
	var a *answer
	if isSSE(upstream.Header) {
		a = relayStream(o, body, call, &res)
	} else {
		a = relayWhole(o, body, call, &res)
	}
	res.ClientGone = o.isGone()
	res.Model, res.Finish = a.model, a.finish
	res.Usage = a.usageFor(call)
	if a.usage == nil && res.Err == nil {
		res.Err = errors.New("the provider reported no usage: estimated")
	}
	return res
}

// relayStream reads the provider's Chat Completions stream and writes it in
// the call's protocol, event by event.
func relayStream(o *out, body io.Reader, call Call, res *Result) *answer {
	a := newAnswer()
	var t streamer
	if call.Stream {
		t = newStreamer(o, call, a)
		t.start()
	} // else the provider streamed a call that was not to stream: gather it, answer whole
	pass, _ := t.(*chatStreamer)
	rd := newSSEReader(body)
	var fail *failure
	for {
		ev, err := rd.next()
		if err != nil {
			switch {
			case o.wasCut():
				res.Err = fmt.Errorf("the client went away and the provider's stream went on past %v", drainTime)
			case a.finish != "" && !errors.Is(err, io.EOF):
				// The answer was whole; only the usage chunk may be lost.
				res.Err = fmt.Errorf("read the provider's stream after its answer: %w", err)
			case !errors.Is(err, io.EOF):
				fail = &failure{code: "server_error", message: "the model provider's stream broke off"}
				res.Err = fmt.Errorf("read the provider's stream: %w", err)
			case a.finish == "":
				fail = &failure{code: "server_error", message: "the model provider's stream ended before the answer did"}
				res.Err = errors.New("the provider's stream ended without a finish reason")
			}
			break
		}
		if o.isGone() && o.drained() {
			res.Err = fmt.Errorf("the client went away and the provider's stream went on past %d bytes", drainBytes)
			break
		}
		var ch chatChunk
		parsed := ev.data != nil && !ev.done && json.Unmarshal(ev.data, &ch) == nil
		if pass != nil && !(parsed && !call.usageAsked && len(ch.Choices) == 0 && ch.Usage != nil) {
			// Chat is passed through as the provider sent it, but for
			// the usage chunk Corral asked for and the client did not.
			pass.forward(ev.raw)
		}
		if ev.done {
			break
		}
		if !parsed {
			continue // a keep-alive or a comment
		}
		if ch.Error != nil {
			fail = ch.Error.failure()
			res.Err = fmt.Errorf("the provider's stream carried an error: %s", ch.Error.Message)
			break
		}
		a.add(&ch, t)
	}
	if t != nil {
		t.end(fail)
	} else {
		writeWhole(o, call, a, fail)
	}
	return a
}

// relayWhole reads the provider's whole answer and writes it in the call's
// protocol: whole, or as a stream of one delta when the call streams (the
// provider ignored "stream").
func relayWhole(o *out, body io.Reader, call Call, res *Result) *answer {
	a := newAnswer()
	b, err := io.ReadAll(io.LimitReader(body, maxBody))
	var comp chatCompletion
	if err == nil {
		err = json.Unmarshal(b, &comp)
	}
	if err != nil || len(comp.Choices) == 0 && comp.Usage == nil {
		res.Err = fmt.Errorf("the provider's answer is not a chat completion: %v", err)
		fail := &failure{code: "server_error", message: "the model provider's answer could not be read"}
		if call.Stream {
			t := newStreamer(o, call, a)
			t.start()
			t.end(fail)
		} else {
			writeWhole(o, call, a, fail)
		}
		return a
	}
	if call.Protocol == Chat && !call.Stream {
		a.fromCompletion(&comp, nil)
		o.header("application/json")
		o.write(b)
		return a
	}
	if !call.Stream {
		a.fromCompletion(&comp, nil)
		writeWhole(o, call, a, nil)
		return a
	}
	t := newStreamer(o, call, a)
	if cs, ok := t.(*chatStreamer); ok {
		cs.synth = true
	}
	t.start()
	a.fromCompletion(&comp, t)
	t.end(nil)
	return a
}

// writeWhole writes a gathered answer as one JSON document.
func writeWhole(o *out, call Call, a *answer, fail *failure) {
	if fail != nil {
		writeErrorBody(o.w, call.Protocol, http.StatusBadGateway, fail.message, fail.code)
		return
	}
	var v any
	switch call.Protocol {
	case Chat:
		v = a.completion(call)
	case Responses:
		v = wholeResponse(call, a)
	case Messages:
		v = messageObject(call, a)
	}
	b, _ := marshal(v)
	o.header("application/json")
	o.write(b)
}

// failure is an error met mid-answer, for the client.
type failure struct {
	code    string // OpenAI's error code: server_error, context_length_exceeded...
	message string
}

// streamer writes a call's answer in its protocol, as it comes.
type streamer interface {
	start()
	text(delta string)
	callStart(c *toolCall)
	callArgs(c *toolCall, delta string)
	end(fail *failure)
}

func newStreamer(o *out, call Call, a *answer) streamer {
	switch call.Protocol {
	case Responses:
		return &responsesStreamer{o: o, call: call, a: a}
	case Messages:
		return &messagesStreamer{o: o, call: call, a: a}
	}
	return &chatStreamer{o: o, call: call, a: a}
}

// --- the client side ---

// out is the client's side of a relay. Once the client has gone (its
// context ended or a write failed) writes are dropped, and reading upstream
// goes on within the drain bounds.
type out struct {
	ctx  context.Context
	w    http.ResponseWriter
	rc   *http.ResponseController
	body *countingReader

	mu       sync.Mutex
	gone     bool
	goneAt   int64 // bytes read upstream when the client went
	timer    *time.Timer
	cut      bool // the drain ran out of time and closed the upstream body
	upstream io.Closer
	started  bool
}

func newOut(ctx context.Context, w http.ResponseWriter, upstream io.ReadCloser) *out {
	return &out{ctx: ctx, w: w, rc: http.NewResponseController(w), upstream: upstream}
}

// header sets the content type and the status, once, before the first
// byte.
func (o *out) header(contentType string) {
	if o.started {
		return
	}
	o.started = true
	h := o.w.Header()
	h.Set("Content-Type", contentType)
	if contentType == "text/event-stream" {
		h.Set("Cache-Control", "no-cache")
		// Proxies between the sandbox and the gateway must not buffer.
		h.Set("X-Accel-Buffering", "no")
	}
	o.w.WriteHeader(http.StatusOK)
}

// write writes b to the client and flushes it: the CLIs read events as
// they come (Claude Code's SSE is unbuffered), so every event is flushed.
func (o *out) write(b []byte) {
	if o.isGone() {
		return
	}
	if _, err := o.w.Write(b); err != nil {
		o.leave()
		return
	}
	if err := o.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		o.leave()
	}
}

// leave marks the client gone and bounds the drain in time: past drainTime
// the upstream body is closed, which ends the read.
func (o *out) leave() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gone {
		return
	}
	o.gone = true
	if o.body != nil {
		o.goneAt = o.body.n
	}
	o.timer = time.AfterFunc(drainTime, func() {
		o.mu.Lock()
		o.cut = true
		o.mu.Unlock()
		o.upstream.Close()
	})
}

func (o *out) wasCut() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cut
}

func (o *out) isGone() bool {
	if o.ctx.Err() != nil {
		o.leave()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gone
}

// drained is whether the drain has read its bound of bytes.
func (o *out) drained() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.body != nil && o.body.n-o.goneAt > drainBytes
}

func (o *out) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.timer != nil {
		o.timer.Stop()
	}
}

// event writes one server-sent event: "event: name" when name is set (the
// Responses API and Anthropic name their events), then the data.
func (o *out) event(name string, v any) {
	o.header("text/event-stream")
	b, err := marshal(v)
	if err != nil {
		return
	}
	var buf bytes.Buffer
	if name != "" {
		buf.WriteString("event: ")
		buf.WriteString(name)
		buf.WriteByte('\n')
	}
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	o.write(buf.Bytes())
}
