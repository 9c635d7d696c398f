package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"corral"
	"corral/internal/modeltest"
)

func TestRetries(t *testing.T) {
	ok := modeltest.Reply{Content: "at last", Usage: &modeltest.Usage{Input: 7, Output: 3}}
	unavailable := modeltest.Reply{Status: http.StatusServiceUnavailable,
		Body: `{"error":{"message":"overloaded, key ` + testKey + `","type":"server_error"}}`}
	rateLimit := "modeltest: rate limit reached, try again later"
	both := modeltest.RateLimited("120")
	both.Header.Set("Retry-After-Ms", "1500")
	tests := []struct {
		name     string
		replies  []modeltest.Reply   // the last repeats
		retries  []corral.ModelRetry // as OnRetry is told of them
		message  string              // of the error; "" when the call succeeds
		prefix   bool                // message is only the start of the error's
		requests int
	}{
		{
			name:     "429 with Retry-After, then success",
			replies:  []modeltest.Reply{modeltest.RateLimited("1"), ok},
			retries:  []corral.ModelRetry{{Attempt: 2, Status: 429, Wait: time.Second, Message: rateLimit}},
			requests: 2,
		},
		{
			name:    "503 three times",
			replies: []modeltest.Reply{unavailable},
			retries: []corral.ModelRetry{
				{Attempt: 2, Status: 503, Wait: time.Second, Message: "overloaded, key [redacted]"},
				{Attempt: 3, Status: 503, Wait: 2 * time.Second, Message: "overloaded, key [redacted]"},
			},
			message:  "the model provider answered 503 Service Unavailable after 3 tries: overloaded, key [redacted]",
			requests: 3,
		},
		{
			name:    "Retry-After past the wait allowed",
			replies: []modeltest.Reply{modeltest.RateLimited("120"), ok},
			message: "the model provider answered 429 Too Many Requests and asked to wait 2m0s, " +
				"longer than Corral waits for a model call (30s in all): " + rateLimit,
			requests: 1,
		},
		{
			name:    "HTTP date past the wait allowed",
			replies: []modeltest.Reply{modeltest.RateLimited(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)), ok},
			message: "the model provider answered 429 Too Many Requests and asked to wait ", prefix: true,
			requests: 1,
		},
		{
			name:     "HTTP date already past",
			replies:  []modeltest.Reply{modeltest.RateLimited("Wed, 21 Oct 2015 07:28:00 GMT"), ok},
			retries:  []corral.ModelRetry{{Attempt: 2, Status: 429, Wait: 0, Message: rateLimit}},
			requests: 2,
		},
		{
			name:    "waits past 30 s in all",
			replies: []modeltest.Reply{modeltest.RateLimited("20"), modeltest.RateLimited("20"), ok},
			retries: []corral.ModelRetry{{Attempt: 2, Status: 429, Wait: 20 * time.Second, Message: rateLimit}},
			message: "the model provider answered 429 Too Many Requests after 2 tries and asked to wait 20s, " +
				"longer than Corral waits for a model call (30s in all): " + rateLimit,
			requests: 2,
		},
		{
			name:     "retry-after-ms before Retry-After",
			replies:  []modeltest.Reply{both, ok},
			retries:  []corral.ModelRetry{{Attempt: 2, Status: 429, Wait: 1500 * time.Millisecond, Message: rateLimit}},
			requests: 2,
		},
		{
			name:     "429 without Retry-After backs off",
			replies:  []modeltest.Reply{modeltest.RateLimited(""), modeltest.RateLimited(""), ok},
			retries:  []corral.ModelRetry{{Attempt: 2, Status: 429, Wait: time.Second, Message: rateLimit}, {Attempt: 3, Status: 429, Wait: 2 * time.Second, Message: rateLimit}},
			requests: 3,
		},
		{
			// Ollama's shape: the SDK cannot decode it, the status still counts.
			name:    "5xx with a bare error string",
			replies: []modeltest.Reply{{Status: 500, Body: `{"error":"llama runner process has terminated"}`}},
			retries: []corral.ModelRetry{{Attempt: 2, Status: 500, Wait: time.Second, Message: "llama runner process has terminated"},
				{Attempt: 3, Status: 500, Wait: 2 * time.Second, Message: "llama runner process has terminated"}},
			message:  "the model provider answered 500 Internal Server Error after 3 tries: llama runner process has terminated",
			requests: 3,
		},
		{
			name:     "a status without a text",
			replies:  []modeltest.Reply{{Status: 529, Body: `{"error":{"message":"Overloaded"}}`}},
			retries:  []corral.ModelRetry{{Attempt: 2, Status: 529, Wait: time.Second, Message: "Overloaded"}, {Attempt: 3, Status: 529, Wait: 2 * time.Second, Message: "Overloaded"}},
			message:  "the model provider answered 529 after 3 tries: Overloaded",
			requests: 3,
		},
		{
			name:     "400 is not tried again",
			replies:  []modeltest.Reply{{Status: 400, Body: `{"error":{"message":"model \"nope\" does not exist"}}`}, ok},
			message:  `the model provider answered 400 Bad Request: model "nope" does not exist`,
			requests: 1,
		},
		{
			name:     "404 is not tried again",
			replies:  []modeltest.Reply{{Status: 404}, ok},
			message:  "the model provider answered 404 Not Found: Not Found",
			requests: 1,
		},
		{
			// An answer without usage is refused, never tried again into a
			// metered success.
			name:     "no usage is not tried again",
			replies:  []modeltest.Reply{{Content: "unmetered", NoUsage: true}, ok},
			message:  "the provider reported no token usage: Corral cannot meter it",
			requests: 1,
		},
	}
	for _, tt := range tests {
		for _, mode := range modes {
			t.Run(tt.name+"/"+mode.name, func(t *testing.T) {
				p, g, w := newWaiting(t, modeltest.Sequence(tt.replies...))
				m := &meter{}
				var retries []corral.ModelRetry
				req := corral.ModelRequest{Messages: hi, OnRetry: func(r corral.ModelRetry) { retries = append(retries, r) }}
				resp, _, err := complete(t, context.Background(), g, req, m, mode.stream)
				if tt.message == "" {
					if err != nil {
						t.Fatalf("Complete = %v, want the reply", err)
					}
					if resp.Message.Content != "at last" {
						t.Errorf("content = %q, want %q", resp.Message.Content, "at last")
					}
					// The successful try is metered, once.
					if want := []corral.Tokens{{Input: 7, Output: 3}}; !reflect.DeepEqual(m.recorded, want) {
						t.Errorf("recorded %v, want %v", m.recorded, want)
					}
				} else {
					got := corral.ErrorMessage(err)
					if err == nil || got != tt.message && !(tt.prefix && strings.HasPrefix(got, tt.message)) {
						t.Errorf("error = %v\nwant the message %q", err, tt.message)
					}
					if err != nil {
						if code := errorCode(t, err); code != corral.EUNAVAIL {
							t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
						}
						var e *corral.Error
						errors.As(err, &e)
						if all := fmt.Sprintf("%v %+v %v", err, err, e.Err); strings.Contains(all, testKey) {
							t.Errorf("error text carries the key: %s", all)
						}
					}
					if len(m.recorded) != 0 {
						t.Errorf("recorded %v, want nothing", m.recorded)
					}
				}
				if !reflect.DeepEqual(retries, tt.retries) {
					t.Errorf("OnRetry was told %+v\nwant %+v", retries, tt.retries)
				}
				var wantWaits []time.Duration
				for _, r := range tt.retries {
					wantWaits = append(wantWaits, r.Wait)
				}
				if got := w.all(); !reflect.DeepEqual(got, wantWaits) {
					t.Errorf("waited %v, want %v", got, wantWaits)
				}
				if n := len(p.Requests()); n != tt.requests {
					t.Errorf("fake provider got %d requests, want %d", n, tt.requests)
				}
				// One reservation, settled once, covers every try.
				if m.checks != 1 || m.settles != 1 {
					t.Errorf("%d reservations, %d settled; want one of each", m.checks, m.settles)
				}
			})
		}
	}
}

// TestRetryKeepsItsReservation: the retries of a call are made under the
// reservation made before its first try, settled once at the end.
func TestRetryKeepsItsReservation(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			p, g, _ := newWaiting(t, modeltest.Sequence(modeltest.RateLimited("1"), modeltest.Text("in time")))
			m := &meter{}
			if _, _, err := complete(t, context.Background(), g, corral.ModelRequest{Messages: hi}, m, mode.stream); err != nil {
				t.Fatal(err)
			}
			if n := len(p.Requests()); n != 2 || m.checks != 1 || m.settles != 1 || len(m.recorded) != 1 {
				t.Errorf("provider got %d requests, %d reservations, %d settled, recorded %v; want 2, 1, 1 and the usage", n, m.checks, m.settles, m.recorded)
			}
		})
	}
}

// front is a server in front of a fake provider: handle decides, for the
// n-th request (from 1), whether to answer it itself; the others go on to
// the provider.
func front(t *testing.T, p *modeltest.Provider, handle func(n int, w http.ResponseWriter, r *http.Request) bool) *Gateway {
	t.Helper()
	target, err := url.Parse(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	proxy := httputil.NewSingleHostReverseProxy(target)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !handle(int(n.Add(1)), w, r) {
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	g, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: testKey, Model: "m", Sleep: (&waits{}).sleep})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// hangUp closes the connection under w at once: what was flushed was
// sent, nothing more is.
func hangUp(t *testing.T, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	conn.Close()
}

// TestRetryDroppedConnection: a connection closed before the provider
// answered anything is tried again; one closed after the answer began is
// not, streamed (a delta was shown) or whole.
func TestRetryDroppedConnection(t *testing.T) {
	const partialStream = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",` +
		`"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n"
	tests := []struct {
		name     string
		stream   bool
		hangUp   func(t *testing.T, w http.ResponseWriter) // what the first request gets
		requests int                                       // that reach the provider
		retries  []corral.ModelRetry
		deltas   []string // of the failed try; the retry's come after
		ok       bool
	}{
		{
			name: "before the answer, whole", hangUp: hangUp, requests: 1, ok: true,
			retries: []corral.ModelRetry{{Attempt: 2, Wait: time.Second, Message: "the connection failed before the provider answered"}},
		},
		{
			name: "before the answer, streamed", stream: true, hangUp: hangUp, requests: 1, ok: true,
			retries: []corral.ModelRetry{{Attempt: 2, Wait: time.Second, Message: "the connection failed before the provider answered"}},
		},
		{
			name: "in the middle of a whole answer",
			hangUp: func(t *testing.T, w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "500")
				w.WriteHeader(http.StatusOK)
				w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[`))
				w.(http.Flusher).Flush()
				hangUp(t, w)
			},
		},
		{
			name: "after a delta", stream: true, deltas: []string{"Hel"},
			hangUp: func(t *testing.T, w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.Write([]byte(partialStream))
				w.(http.Flusher).Flush()
				hangUp(t, w)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := modeltest.New(modeltest.Sequence(modeltest.Text("second try")))
			t.Cleanup(p.Close)
			g := front(t, p, func(n int, w http.ResponseWriter, r *http.Request) bool {
				if n > 1 {
					return false
				}
				tt.hangUp(t, w)
				return true
			})
			var retries []corral.ModelRetry
			req := corral.ModelRequest{Messages: hi, OnRetry: func(r corral.ModelRetry) { retries = append(retries, r) }}
			m := &meter{}
			resp, deltas, err := complete(t, context.Background(), g, req, m, tt.stream)
			if tt.ok {
				if err != nil || resp.Message.Content != "second try" {
					t.Errorf("Complete = %+v, %v; want the second try's reply", resp, err)
				}
			} else {
				if err == nil {
					t.Fatalf("Complete = %+v, want an error: the broken try must not be made again", resp)
				}
				if code := errorCode(t, err); code != corral.EUNAVAIL {
					t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
				}
				if !reflect.DeepEqual(deltas, tt.deltas) {
					t.Errorf("deltas %q, want %q, each once", deltas, tt.deltas)
				}
			}
			if !reflect.DeepEqual(retries, tt.retries) {
				t.Errorf("OnRetry was told %+v\nwant %+v", retries, tt.retries)
			}
			if n := len(p.Requests()); n != tt.requests {
				t.Errorf("fake provider got %d requests, want %d", n, tt.requests)
			}
		})
	}
}

// TestRetryWaitCancelled: cancelling the context while the gateway waits
// to try again ends the call at once with the cancelled error, and the
// provider is not asked again. The wait is real: the default Sleep must
// end with the context.
func TestRetryWaitCancelled(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			p := modeltest.New(modeltest.Sequence(modeltest.RateLimited("29"), modeltest.Text("too late")))
			t.Cleanup(p.Close)
			g, err := New(Config{BaseURL: p.URL(), APIKey: testKey, Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waiting := make(chan corral.ModelRetry, 1)
			req := corral.ModelRequest{Messages: hi, OnRetry: func(r corral.ModelRetry) { waiting <- r }}
			if mode.stream {
				req.OnDelta = func(corral.ModelDelta) {}
			}
			done := make(chan error, 1)
			go func() {
				_, err := g.Complete(ctx, req, &meter{})
				done <- err
			}()
			select {
			case r := <-waiting:
				if r.Wait != 29*time.Second {
					t.Errorf("the gateway waits %v, want the 29s asked for", r.Wait)
				}
			case err := <-done:
				t.Fatalf("Complete returned %v before waiting to try again", err)
			case <-time.After(10 * time.Second):
				t.Fatal("OnRetry was not called")
			}
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Complete did not return 10s after its context was cancelled, in a wait of 29s")
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error %v does not wrap context.Canceled", err)
			}
			if want := "the model call was cancelled"; corral.ErrorMessage(err) != want {
				t.Errorf("message = %q, want %q", corral.ErrorMessage(err), want)
			}
			if code := errorCode(t, err); code != corral.EUNAVAIL {
				t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
			}
			if n := len(p.Requests()); n != 1 {
				t.Errorf("fake provider got %d requests, want 1", n)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second, true},
		{"fraction", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"spaces", map[string]string{"Retry-After": " 2 "}, 2 * time.Second, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"HTTP date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"HTTP date past", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"RFC 850 date", map[string]string{"Retry-After": "Saturday, 01-Mar-25 12:00:05 GMT"}, 5 * time.Second, true},
		{"milliseconds", map[string]string{"retry-after-ms": "250"}, 250 * time.Millisecond, true},
		{"milliseconds first", map[string]string{"retry-after-ms": "250", "Retry-After": "120"}, 250 * time.Millisecond, true},
		{"bad milliseconds", map[string]string{"retry-after-ms": "soon", "Retry-After": "4"}, 4 * time.Second, true},
		{"negative", map[string]string{"Retry-After": "-1"}, 0, false},
		{"words", map[string]string{"Retry-After": "soon"}, 0, false},
		{"NaN", map[string]string{"Retry-After": "NaN"}, 0, false},
		{"huge", map[string]string{"Retry-After": "1e400"}, 24 * time.Hour, true},
		{"infinite", map[string]string{"Retry-After": "Inf"}, 24 * time.Hour, true},
		{"past a Duration", map[string]string{"Retry-After": "1e12"}, 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := retryAfter(h, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("retryAfter(%v) = %v, %v, want %v, %v", tt.header, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestProviderMessage(t *testing.T) {
	g, err := New(Config{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", maxMessage)
	tests := []struct {
		name, body, want string
	}{
		{"OpenAI", `{"error":{"message":"Rate limit reached","type":"requests"}}`, "Rate limit reached"},
		{"bare string", `{"error":"model not found"}`, "model not found"},
		{"top-level message", `{"message":"slow down"}`, "slow down"},
		{"detail", `{"detail":"Service overloaded"}`, "Service overloaded"},
		{"detail list", `{"detail":[{"msg":"field required"}]}`, ""},
		{"HTML", `<html><body>502 Bad Gateway</body></html>`, ""},
		{"empty", ``, ""},
		{"no message", `{"error":{"type":"server_error"}}`, ""},
		{"key removed", `{"error":{"message":"bad key ` + testKey + `"}}`, "bad key [redacted]"},
		{"one line", `{"error":{"message":" line one\n\n\tline two\u0000 "}}`, "line one line two"},
		{"cut", `{"error":{"message":"` + long + `"}}`, strings.Repeat("é", maxMessage/2) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := g.providerMessage([]byte(tt.body)); got != tt.want {
				t.Errorf("providerMessage(%.60q) = %q, want %q", tt.body, got, tt.want)
			}
		})
	}
}

// TestRetryWaitInterrupted: closing corral.ModelRequest.Interrupt (a run's
// graceful stop) ends a wait to try again at once; no further try is made.
func TestRetryWaitInterrupted(t *testing.T) {
	p := modeltest.New(modeltest.Sequence(modeltest.RateLimited("29"), modeltest.Text("too late")))
	t.Cleanup(p.Close)
	g, err := New(Config{BaseURL: p.URL(), APIKey: testKey, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	interrupt := make(chan struct{})
	waiting := make(chan corral.ModelRetry, 1)
	req := corral.ModelRequest{Messages: hi, OnRetry: func(r corral.ModelRetry) { waiting <- r }, Interrupt: interrupt}
	done := make(chan error, 1)
	go func() {
		_, err := g.Complete(context.Background(), req, &meter{})
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("Complete returned %v before waiting to try again", err)
	case <-time.After(10 * time.Second):
		t.Fatal("OnRetry was not called")
	}
	close(interrupt)
	select {
	case err = <-done:
	case <-time.After(10 * time.Second): // liveness bound, in a wait of 29s
		t.Fatal("Complete did not return after Interrupt closed")
	}
	if !errors.Is(err, errInterrupted) || errorCode(t, err) != corral.EUNAVAIL {
		t.Errorf("error = %v, want the interruption, unavailable", err)
	}
	if n := len(p.Requests()); n != 1 {
		t.Errorf("the provider saw %d requests, want 1: no try after the interruption", n)
	}
}
