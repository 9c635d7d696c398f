package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/modeltest"
)

const embedModel = "embed-model"

// answer is what a raw provider sends to one request.
type answer struct {
	status int
	body   string
}

// rawProvider is a provider that answers the n-th embeddings request with
// the n-th answer, and every one after the last with the last, for answers
// modeltest would never give. It checks that every request carried the key.
type rawProvider struct {
	mu     sync.Mutex
	bodies [][]byte // of the requests received
}

func (p *rawProvider) requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.bodies)
}

func newRaw(t *testing.T, answers ...answer) (*rawProvider, *Gateway, *waits) {
	t.Helper()
	p := &rawProvider{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" {
			t.Errorf("request to %s, want /v1/embeddings", r.URL.Path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
			t.Errorf("Authorization = %q, want the key", got)
		}
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.bodies = append(p.bodies, b)
		a := answers[min(len(p.bodies), len(answers))-1]
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	w := &waits{}
	g, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: testKey, Model: "chat-model", Sleep: w.sleep})
	if err != nil {
		t.Fatal(err)
	}
	return p, g, w
}

// embeddings is an OpenAI embeddings answer with items (each a JSON object)
// and usage ("" leaves it out).
func embeddings(usage string, items ...string) answer {
	body := `{"object":"list","model":"m","data":[` + strings.Join(items, ",") + `]`
	if usage != "" {
		body += `,"usage":` + usage
	}
	return answer{http.StatusOK, body + "}"}
}

func item(index int, vector string) string {
	b, _ := json.Marshal(index)
	return `{"object":"embedding","index":` + string(b) + `,"embedding":` + vector + `}`
}

const usage7 = `{"prompt_tokens":7,"total_tokens":7}`

func TestEmbed(t *testing.T) {
	p, g := newProvider(t, nil)
	texts := []string{"how to rotate the API key", "SQLite full text search", "rotate"}
	m := &meter{}
	vectors, u, err := g.Embed(context.Background(), embedModel, texts, m)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	for i, text := range texts {
		if i >= len(vectors) || !reflect.DeepEqual(vectors[i], modeltest.Embedding(text)) {
			t.Errorf("vector %d is not modeltest.Embedding(%q)", i, text)
		}
	}
	if len(vectors) != len(texts) {
		t.Errorf("%d vectors for %d texts", len(vectors), len(texts))
	}
	// modeltest counts a token per word.
	want := corral.Tokens{Input: 6 + 4 + 1}
	if u != want || !reflect.DeepEqual(m.recorded, []corral.Tokens{want}) || m.checks != 1 || !reflect.DeepEqual(m.models, []string{embedModel}) {
		t.Errorf("usage %+v, recorded %v after %d checks for models %q; want %+v recorded once after one check for %q", u, m.recorded, m.checks, m.models, want, embedModel)
	}
	reqs := p.Requests()
	if len(reqs) != 1 || !reflect.DeepEqual(reqs[0].Embeddings, texts) {
		t.Fatalf("provider got %+v, want one embeddings request of the texts", reqs)
	}
	fields := sent(t, p, 0)
	if fields["model"] != `"`+embedModel+`"` || fields["encoding_format"] != `"float"` {
		t.Errorf("sent model %s and encoding_format %s, want %q and float", fields["model"], fields["encoding_format"], embedModel)
	}
}

func TestEmbedOrdersByIndex(t *testing.T) {
	p, g, _ := newRaw(t, embeddings(usage7, item(2, "[3,3]"), item(0, "[1,1]"), item(1, "[2,2]")))
	vectors, u, err := g.Embed(context.Background(), embedModel, []string{"a", "b", "c"}, &meter{})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]float32{{1, 1}, {2, 2}, {3, 3}}; !reflect.DeepEqual(vectors, want) {
		t.Errorf("vectors = %v, want %v: in the order of their index", vectors, want)
	}
	if u != (corral.Tokens{Input: 7}) || p.requests() != 1 {
		t.Errorf("usage %+v after %d requests, want 7 input tokens after 1", u, p.requests())
	}
}

func TestEmbedRecordError(t *testing.T) {
	tests := []struct {
		name    string
		answer  answer
		vectors [][]float32
	}{
		{"with the vectors", embeddings(usage7, item(0, "[1,2]")), [][]float32{{1, 2}}},
		{"instead of malformed", embeddings(usage7, item(0, "[1,2]"), item(1, "[1,2]")), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, g, _ := newRaw(t, tt.answer)
			recErr := &corral.Error{Code: corral.EADMISSION, Message: "budget reached"}
			m := &meter{recordErr: recErr}
			vectors, _, err := g.Embed(context.Background(), embedModel, []string{"a"}, m)
			if err != recErr {
				t.Errorf("Embed error = %v, want Record's error unchanged", err)
			}
			if !reflect.DeepEqual(vectors, tt.vectors) || !reflect.DeepEqual(m.recorded, []corral.Tokens{{Input: 7}}) {
				t.Errorf("vectors %v, recorded %v; want %v and the usage", vectors, m.recorded, tt.vectors)
			}
		})
	}
}

func TestEmbedRefusedBeforeTheCall(t *testing.T) {
	unconfigured, err := New(Config{APIKey: testKey, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	refusal := &corral.Error{Code: corral.EADMISSION, Reason: "budget_exhausted", Message: "token budget reached"}
	big := strings.Repeat("x", MaxEmbedBytes/2)
	tests := []struct {
		name   string
		g      *Gateway // nil: one pointed at the fake provider
		model  string
		texts  []string
		meter  *meter
		err    error  // the very error, when not ""
		code   string // else its code
		checks int
	}{
		{name: "not configured", g: unconfigured, model: embedModel, texts: []string{"a"}, meter: &meter{}, err: unconfigured.Configured()},
		{name: "no embedding model", model: "", texts: []string{"a"}, meter: &meter{}, code: corral.EUNAVAIL},
		{name: "budget refused", model: embedModel, texts: []string{"a"}, meter: &meter{checkErr: refusal}, err: refusal, checks: 1},
		{name: "too many texts", model: embedModel, texts: slices.Repeat([]string{"a"}, MaxEmbedTexts+1), meter: &meter{}, code: corral.EINVALID},
		{name: "too much text", model: embedModel, texts: []string{big, big, "x"}, meter: &meter{}, code: corral.EINVALID},
		{name: "an empty text", model: embedModel, texts: []string{"a", ""}, meter: &meter{}, code: corral.EINVALID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, g := newProvider(t, nil)
			if tt.g != nil {
				g = tt.g
			}
			vectors, u, err := g.Embed(context.Background(), tt.model, tt.texts, tt.meter)
			switch {
			case tt.err != nil && !reflect.DeepEqual(err, tt.err):
				t.Errorf("Embed error = %v, want %v unchanged", err, tt.err)
			case tt.err == nil && err == nil:
				t.Fatal("Embed = nil error")
			case tt.err == nil:
				if code := errorCode(t, err); code != tt.code {
					t.Errorf("code = %q (%v), want %q", code, err, tt.code)
				}
			}
			if vectors != nil || u != (corral.Tokens{}) || tt.meter.checks != tt.checks || len(tt.meter.recorded) != 0 {
				t.Errorf("got %v and %+v, meter saw %d checks and %v; want nothing and %d checks",
					vectors, u, tt.meter.checks, tt.meter.recorded, tt.checks)
			}
			if n := len(p.Requests()); n != 0 {
				t.Errorf("fake provider got %d requests, want 0", n)
			}
		})
	}
	t.Run("the message names the embedding model", func(t *testing.T) {
		_, g := newProvider(t, nil)
		_, _, err := g.Embed(context.Background(), "", []string{"a"}, &meter{})
		if msg := corral.ErrorMessage(err); !strings.Contains(msg, "embedding model") {
			t.Errorf("message %q does not say to set the embedding model", msg)
		}
	})
}

func TestEmbedLimits(t *testing.T) {
	t.Run("no texts", func(t *testing.T) {
		p, g := newProvider(t, nil)
		m := &meter{}
		vectors, u, err := g.Embed(context.Background(), embedModel, nil, m)
		if err != nil || vectors != nil || u != (corral.Tokens{}) || m.checks != 0 || len(p.Requests()) != 0 {
			t.Errorf("Embed(no texts) = %v, %+v, %v after %d checks and %d requests; want nothing at all",
				vectors, u, err, m.checks, len(p.Requests()))
		}
	})
	t.Run("at the limits", func(t *testing.T) {
		p, g := newProvider(t, nil)
		texts := slices.Repeat([]string{strings.Repeat("y", MaxEmbedBytes/MaxEmbedTexts)}, MaxEmbedTexts)
		vectors, _, err := g.Embed(context.Background(), embedModel, texts, &meter{})
		if err != nil || len(vectors) != MaxEmbedTexts || len(p.Requests()) != 1 {
			t.Errorf("Embed(%d texts, %d bytes) = %d vectors, %v; want them all in one request",
				len(texts), MaxEmbedBytes, len(vectors), err)
		}
	})
}

func TestEmbedMissingUsage(t *testing.T) {
	tests := []struct {
		name   string
		answer answer
	}{
		{"absent", embeddings("", item(0, "[1,2]"))},
		{"null", embeddings("null", item(0, "[1,2]"))},
		{"empty", embeddings("{}", item(0, "[1,2]"))},
		{"total only", embeddings(`{"total_tokens":3}`, item(0, "[1,2]"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, g, _ := newRaw(t, tt.answer)
			m := &meter{}
			vectors, u, err := g.Embed(context.Background(), embedModel, []string{"a"}, m)
			if err == nil {
				t.Fatal("Embed = nil error for an answer without usage")
			}
			if code := errorCode(t, err); code != corral.EUNAVAIL {
				t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
			}
			if want := "the provider reported no token usage: Corral cannot meter it"; corral.ErrorMessage(err) != want {
				t.Errorf("message = %q, want %q", corral.ErrorMessage(err), want)
			}
			if vectors != nil || u != (corral.Tokens{}) || len(m.recorded) != 0 {
				t.Errorf("got %v and %+v, recorded %v; want nothing", vectors, u, m.recorded)
			}
		})
	}
}

func TestEmbedMalformed(t *testing.T) {
	tests := []struct {
		name     string
		texts    int
		answer   answer
		recorded bool // the usage could be read
	}{
		{"too few", 2, embeddings(usage7, item(0, "[1,2]")), true},
		{"too many", 1, embeddings(usage7, item(0, "[1,2]"), item(1, "[1,2]")), true},
		{"none", 1, embeddings(usage7), true},
		{"mixed dimensions", 2, embeddings(usage7, item(0, "[1,2]"), item(1, "[1,2,3]")), true},
		{"no dimensions", 2, embeddings(usage7, item(0, "[]"), item(1, "[]")), true},
		{"repeated index", 2, embeddings(usage7, item(0, "[1,2]"), item(0, "[1,2]")), true},
		{"index out of range", 2, embeddings(usage7, item(0, "[1,2]"), item(2, "[1,2]")), true},
		{"negative index", 1, embeddings(usage7, item(-1, "[1,2]")), true},
		{"no index", 1, embeddings(usage7, `{"object":"embedding","embedding":[1,2]}`), true},
		{"no vector", 1, embeddings(usage7, `{"object":"embedding","index":0}`), true},
		{"not numbers", 1, embeddings(usage7, item(0, `[1,null,"x"]`)), true},
		{"infinite", 1, embeddings(usage7, item(0, "[1,1e999]")), true},
		{"past float32", 1, embeddings(usage7, item(0, "[1,1e300]")), true},
		{"NaN", 1, embeddings(usage7, item(0, "[1,NaN]")), false},
		{"not JSON", 1, answer{http.StatusOK, `{"object":"list","data":[`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, g, _ := newRaw(t, tt.answer)
			m := &meter{}
			texts := slices.Repeat([]string{"private"}, tt.texts)
			vectors, u, err := g.Embed(context.Background(), embedModel, texts, m)
			if err == nil {
				t.Fatalf("Embed = %v, nil error; want malformed", vectors)
			}
			if code := errorCode(t, err); code != corral.EUNAVAIL {
				t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
			}
			if want := "the provider returned malformed embeddings"; corral.ErrorMessage(err) != want {
				t.Errorf("message = %q, want %q", corral.ErrorMessage(err), want)
			}
			checkHidden(t, err, testKey, "private")
			if vectors != nil || u != (corral.Tokens{}) {
				t.Errorf("got %v and %+v, want nothing", vectors, u)
			}
			// The tokens are spent: recorded even though the answer is refused.
			var want []corral.Tokens
			if tt.recorded {
				want = []corral.Tokens{{Input: 7}}
			}
			if !reflect.DeepEqual(m.recorded, want) {
				t.Errorf("recorded %v, want %v", m.recorded, want)
			}
			if n := p.requests(); n != 1 {
				t.Errorf("provider got %d requests, want 1: a malformed answer is not tried again", n)
			}
		})
	}
}

func TestEmbedRetries(t *testing.T) {
	fail := answer{http.StatusInternalServerError, `{"error":{"message":"overloaded","type":"server_error"}}`}
	ok := embeddings(usage7, item(0, "[1,2]"))
	tests := []struct {
		name     string
		answers  []answer
		requests int
		waits    []time.Duration
		message  string // "" for success
	}{
		{"500 then 200", []answer{fail, ok}, 2, []time.Duration{time.Second}, ""},
		{"429 then 200", []answer{{http.StatusTooManyRequests, `{"error":{"message":"slow down"}}`}, ok},
			2, []time.Duration{time.Second}, ""},
		{"500 throughout", []answer{fail}, maxTries, backoff[:],
			"the model provider answered 500 Internal Server Error after 3 tries: overloaded"},
		{"400 is not tried again", []answer{{http.StatusBadRequest, `{"error":{"message":"bad input"}}`}}, 1, nil,
			"the model provider answered 400 Bad Request: bad input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, g, w := newRaw(t, tt.answers...)
			m := &meter{}
			vectors, u, err := g.Embed(context.Background(), embedModel, []string{"a"}, m)
			if tt.message == "" {
				if err != nil || !reflect.DeepEqual(vectors, [][]float32{{1, 2}}) || u != (corral.Tokens{Input: 7}) {
					t.Errorf("Embed = %v, %+v, %v; want the last try's answer", vectors, u, err)
				}
			} else {
				if got := corral.ErrorMessage(err); got != tt.message {
					t.Errorf("message = %q, want %q", got, tt.message)
				}
				if vectors != nil {
					t.Errorf("got vectors %v with an error", vectors)
				}
			}
			if p.requests() != tt.requests || m.checks != 1 || m.settles != 1 {
				t.Errorf("%d requests, %d reservations, %d settled; want %d, and one reservation settled once for all the tries",
					p.requests(), m.checks, m.settles, tt.requests)
			}
			if got := w.all(); !reflect.DeepEqual(got, tt.waits) {
				t.Errorf("waited %v, want %v", got, tt.waits)
			}
		})
	}

	t.Run("one reservation covers the retries", func(t *testing.T) {
		p, g, _ := newRaw(t, fail, ok)
		m := &meter{}
		if _, _, err := g.Embed(context.Background(), embedModel, []string{"a"}, m); err != nil {
			t.Fatal(err)
		}
		if p.requests() != 2 || m.checks != 1 || m.settles != 1 {
			t.Errorf("provider got %d requests, %d reservations, %d settled; want 2, 1, 1", p.requests(), m.checks, m.settles)
		}
	})

	t.Run("modeltest's failure switch", func(t *testing.T) {
		p, g := newProvider(t, nil)
		p.FailEmbeddings(http.StatusServiceUnavailable)
		_, _, err := g.Embed(context.Background(), embedModel, []string{"a"}, &meter{})
		if code := errorCode(t, err); code != corral.EUNAVAIL {
			t.Errorf("code = %q, want %q", code, corral.EUNAVAIL)
		}
		if n := len(p.Requests()); n != maxTries {
			t.Errorf("provider got %d requests, want %d", n, maxTries)
		}
		p.FailEmbeddings(0)
		if _, _, err := g.Embed(context.Background(), embedModel, []string{"a"}, &meter{}); err != nil {
			t.Errorf("Embed after FailEmbeddings(0) = %v", err)
		}
	})
}

func TestEmbedHidesTheKey(t *testing.T) {
	echo := `{"error":{"message":"Incorrect API key provided: ` + testKey + ` for secret input text","code":"invalid_api_key"}}`
	tests := []struct {
		name    string
		status  int
		message string
	}{
		{"401", http.StatusUnauthorized, "the model provider refused the credentials (401): check CORRAL_MODEL_API_KEY"},
		{"400", http.StatusBadRequest, "the model provider answered 400 Bad Request: Incorrect API key provided: [redacted] for secret input text"},
		{"500", http.StatusInternalServerError, "the model provider answered 500 Internal Server Error after 3 tries: Incorrect API key provided: [redacted] for secret input text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, g, _ := newRaw(t, answer{tt.status, echo})
			_, _, err := g.Embed(context.Background(), embedModel, []string{"secret input text"}, &meter{})
			checkHidden(t, err, testKey)
			if got := corral.ErrorMessage(err); got != tt.message {
				t.Errorf("message = %q, want %q", got, tt.message)
			}
			var e *corral.Error
			if errors.As(err, &e) && !strings.HasPrefix(e.Err.Error(), "embeddings: ") {
				t.Errorf("cause %q does not say it was an embeddings call", e.Err)
			}
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		g, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: testKey, Sleep: (&waits{}).sleep})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = g.Embed(context.Background(), embedModel, []string{"secret input text"}, &meter{})
		checkHidden(t, err, testKey, "secret input text")
		if want := "the model provider could not be reached after 3 tries"; corral.ErrorMessage(err) != want {
			t.Errorf("message = %q, want %q", corral.ErrorMessage(err), want)
		}
	})
}
