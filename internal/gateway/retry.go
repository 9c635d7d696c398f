package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"corral"
)

// A call the provider answered 429 or 5xx, or one whose connection was
// refused or broken before any answer came, is tried again: at most maxTries
// times in all, waiting what the provider asks (Retry-After) or else the
// backoff, and never more than maxWaiting in all. The SDK's own retries are
// off (option.WithMaxRetries(0) in New) so that this is the one place: here
// the budget is checked again before each try and each retry is reported.
const (
	maxTries   = 3
	maxWaiting = 30 * time.Second
)

// backoff is the wait before the n-th retry (from 0) when the provider names
// none.
var backoff = [maxTries - 1]time.Duration{1 * time.Second, 2 * time.Second}

// exchange is what one try saw of the provider's HTTP answer. The
// middleware fills it in on the goroutine that makes the call, before the
// SDK returns.
type exchange struct {
	responded bool // response headers arrived
	status    int
	header    http.Header
	body      []byte // of an error answer, the first maxErrorBody bytes
}

type exchangeKey struct{}

const maxErrorBody = 64 << 10

// observe is the SDK middleware that records the answer of each try in the
// exchange its context carries. The SDK's errors do not always hold the
// status (a body such as {"error":"model not found"} fails to decode before
// the status is kept), so the gateway looks at the HTTP answer itself.
func observe(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if x == nil || res == nil {
		return res, err
	}
	x.responded = true
	x.status = res.StatusCode
	x.header = res.Header.Clone()
	if res.StatusCode >= 400 && res.Body != nil {
		// Error bodies are small and the SDK reads them whole anyway; it
		// is handed the same bytes, and the same read error, if any.
		b, rerr := io.ReadAll(res.Body)
		res.Body.Close()
		x.body = b[:min(len(b), maxErrorBody)]
		var rest io.Reader = bytes.NewReader(b)
		if rerr != nil {
			rest = io.MultiReader(rest, errReader{rerr})
		}
		res.Body = io.NopCloser(rest)
	}
	return res, err
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// transient reports whether a failed try may be made again, and if so the
// facts of its failure. Nothing is tried again once tokens were metered or
// a delta was handed over (the user saw it), nor when the caller gave up.
func (g *Gateway) transient(ctx context.Context, r result) (corral.ModelRetry, bool) {
	if r.err == nil || ctx.Err() != nil || r.metered || r.delivered {
		return corral.ModelRetry{}, false
	}
	x := r.exchange
	switch {
	case x.responded:
		if x.status != http.StatusTooManyRequests && x.status < 500 {
			return corral.ModelRetry{}, false
		}
		return corral.ModelRetry{Status: x.status, Message: g.providerMessage(x.body)}, true
	case unanswered(r.err):
		return corral.ModelRetry{Message: "the connection failed before the provider answered"}, true
	}
	return corral.ModelRetry{}, false
}

// unanswered reports whether err is a connection refused, reset or closed
// before the answer's headers came (the caller knows none came): the
// provider has not answered, and the same request can be sent again. A
// server that closes while the request is still being written shows as a
// broken pipe or a write on a closed connection. Other failures (a TLS or
// DNS error, a timeout) would fail the same way again.
func unanswered(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// retryAfter reads how long the provider asks to wait before trying again:
// retry-after-ms (OpenAI's, in milliseconds) before Retry-After (seconds, or
// an HTTP date measured from now). ok is false when neither names a wait.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if d, ok := delay(h.Get("Retry-After-Ms"), time.Millisecond); ok {
		return d, true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if d, ok := delay(v, time.Second); ok {
		return d, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// delay parses a non-negative number of units. Anything past a day is a
// day: far more than the gateway ever waits, and no Duration overflow.
func delay(v string, unit time.Duration) (time.Duration, bool) {
	const forever = 24 * time.Hour
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && f > 0:
		return forever, true
	case err != nil || math.IsNaN(f) || f < 0:
		return 0, false
	case f*float64(unit) >= float64(forever):
		return forever, true
	}
	return time.Duration(f * float64(unit)), true
}

// providerMessage finds the provider's own words in an error body: the
// OpenAI shape {"error":{"message":...}} and the shapes other compatible
// servers use ({"error":"..."}, {"message":"..."}, {"detail":"..."}). The
// key is removed, control characters and runs of spaces become one space,
// and a long message is cut. A body that is not one of these (an HTML page
// from a proxy) gives "".
func (g *Gateway) providerMessage(body []byte) string {
	var shape struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &shape) != nil {
		return ""
	}
	var msg string
	var inner struct {
		Message string `json:"message"`
	}
	switch {
	case json.Unmarshal(shape.Error, &inner) == nil && inner.Message != "":
		msg = inner.Message
	case json.Unmarshal(shape.Error, &msg) == nil && msg != "":
	case shape.Message != "":
		msg = shape.Message
	default:
		// FastAPI's detail is a string, or a list of objects with a msg.
		if json.Unmarshal(shape.Detail, &msg) != nil {
			msg = ""
		}
	}
	return tidy(g.redact(msg))
}

// maxMessage is how much of a provider's message is kept, in bytes.
const maxMessage = 500

// tidy makes text from outside fit on one line of a message: each run of
// spaces and control characters becomes one space, and it is cut, on a
// rune boundary, at maxMessage bytes. The key must be removed before: a cut
// could leave a piece of it that no longer matches.
func tidy(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		if b.Len()+utf8.RuneLen(r) > maxMessage {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sleep waits d, or until ctx ends: then it returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
