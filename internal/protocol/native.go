package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// RelayNative passes a provider's answer through to the client as it
// comes, for a call the provider takes in the client's own protocol (a
// provider that speaks the Responses API or Anthropic Messages itself):
// nothing is translated, every event is flushed as it arrives, and the
// usage is read on the way. A Responses stream reports it in its last
// event (response.completed, .incomplete or .failed: response.usage); a
// Messages stream in message_start (input) and message_delta (output); a
// whole answer at its top. A client that goes away is handled as Relay
// handles it (the stream is read on, bounded, for the usage); an answer
// with no usage is estimated from sent bytes (a token per 4 bytes of the
// request, requestBytes, and of the answer). A provider's error is passed
// through as it is, status and retry headers included: it is already in the
// client's protocol.
func RelayNative(ctx context.Context, w http.ResponseWriter, upstream *http.Response, p Protocol, requestBytes int) Result {
	defer upstream.Body.Close()
	res := Result{Status: upstream.StatusCode}
	if upstream.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(upstream.Body, maxErrorBody))
		for _, k := range []string{"Content-Type", "Retry-After", "Retry-After-Ms", "X-Should-Retry"} {
			if v := upstream.Header.Get(k); v != "" {
				w.Header().Set(k, v)
			}
		}
		w.WriteHeader(upstream.StatusCode)
		w.Write(b)
		res.Err = fmt.Errorf("the provider answered %d", upstream.StatusCode)
		return res
	}
	body := &countingReader{r: upstream.Body}
	o := newOut(ctx, w, upstream.Body)
	o.body = body
	defer o.stop()
	var u nativeUsage
	if isSSE(upstream.Header) {
		o.header("text/event-stream")
		rd := newSSEReader(body)
		for {
			ev, err := rd.next()
			if err != nil {
				switch {
				case o.wasCut():
					res.Err = fmt.Errorf("the client went away and the provider's stream went on past %v", drainTime)
				case !errors.Is(err, io.EOF):
					res.Err = fmt.Errorf("read the provider's stream: %w", err)
				}
				break
			}
			if o.isGone() && o.drained() {
				res.Err = fmt.Errorf("the client went away and the provider's stream went on past %d bytes", drainBytes)
				break
			}
			o.write(ev.raw)
			if ev.data != nil {
				u.read(p, ev.data)
			}
		}
	} else {
		b, err := io.ReadAll(io.LimitReader(body, maxBody))
		if err != nil {
			res.Err = fmt.Errorf("read the provider's answer: %w", err)
		}
		if ct := upstream.Header.Get("Content-Type"); ct != "" {
			o.header(ct)
		} else {
			o.header("application/json")
		}
		o.write(b)
		u.read(p, b)
	}
	res.ClientGone = o.isGone()
	res.Model = u.model
	if !u.seen {
		res.Usage = Usage{Input: estimate(requestBytes), Output: estimate(int(body.n)), Estimated: true}
		if res.Err == nil {
			res.Err = errors.New("the provider reported no usage: estimated")
		}
		return res
	}
	res.Usage = Usage{Input: u.input, Output: u.output}
	return res
}

// nativeUsage gathers what a native answer says of its usage and model.
type nativeUsage struct {
	seen          bool
	input, output int64
	model         string
}

// read takes the usage out of one event's data, or a whole answer.
func (u *nativeUsage) read(p Protocol, data []byte) {
	type anthropicUsage struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	}
	var v struct {
		Type    string          `json:"type"`
		Model   string          `json:"model"`
		Usage   *anthropicUsage `json:"usage"` // a Messages whole answer or message_delta; a whole Response
		Message *struct {
			Model string          `json:"model"`
			Usage *anthropicUsage `json:"usage"`
		} `json:"message"` // message_start
		Response *struct {
			Model string          `json:"model"`
			Usage *anthropicUsage `json:"usage"`
		} `json:"response"` // response.completed and its kin
	}
	if json.Unmarshal(data, &v) != nil {
		return
	}
	take := func(model string, us *anthropicUsage, whole bool) {
		if model != "" {
			u.model = model
		}
		if us == nil {
			return
		}
		if us.InputTokens != nil {
			// Anthropic counts cached input apart; all of it was sent.
			in := *us.InputTokens
			if p == Messages {
				in += us.CacheCreationInputTokens + us.CacheReadInputTokens
			}
			if whole || in > 0 || u.input == 0 {
				u.input = in
			}
			u.seen = true
		}
		if us.OutputTokens != nil {
			u.output = *us.OutputTokens
			u.seen = true
		}
	}
	switch {
	case v.Response != nil:
		take(v.Response.Model, v.Response.Usage, true)
	case v.Message != nil:
		take(v.Message.Model, v.Message.Usage, false)
	default:
		take(v.Model, v.Usage, v.Type == "" || v.Type == "message" || v.Type == "response")
	}
}
