package modeltest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func TestEmbeddingDeterministic(t *testing.T) {
	texts := []string{"How do I rotate the API key?", "go", "!!!", "", "a", "Ünïcode wörds 123"}
	for _, text := range texts {
		v := Embedding(text)
		if len(v) != EmbeddingDims {
			t.Fatalf("Embedding(%q) has %d dimensions, want %d", text, len(v), EmbeddingDims)
		}
		if again := Embedding(text); !reflect.DeepEqual(v, again) {
			t.Errorf("Embedding(%q) differs between two calls", text)
		}
		var norm float64
		for _, f := range v {
			norm += float64(f) * float64(f)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("Embedding(%q) has squared norm %v, want 1", text, norm)
		}
	}
	// Words, not spelling: case and punctuation do not count.
	if a, b := Embedding("Rotate the KEY."), Embedding("rotate, the key"); !reflect.DeepEqual(a, b) {
		t.Errorf("Embedding differs for the same words in another case and punctuation")
	}
	if a, b := Embedding("rotate the key"), Embedding("rotate the door"); reflect.DeepEqual(a, b) {
		t.Errorf("Embedding is the same for different words")
	}
}

func TestEmbeddingSimilarity(t *testing.T) {
	tests := []struct {
		name                string
		text, near, faraway string
	}{
		{"shared words", "how to rotate the provider API key", "rotating an API key for the provider", "the cat sat on a warm mat"},
		{"inflection", "deploying containers", "deploy a container", "baking sourdough bread"},
		{"topic", "SQLite full text search with bm25 ranking", "bm25 ranking in SQLite FTS5 search", "budget of tokens for a delegated run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Embedding(tt.text)
			near, far := cosine(v, Embedding(tt.near)), cosine(v, Embedding(tt.faraway))
			if near <= far {
				t.Errorf("cos(%q, %q) = %.3f, not above cos(%q, %q) = %.3f", tt.text, tt.near, near, tt.text, tt.faraway, far)
			}
			t.Logf("near %.3f, far %.3f", near, far)
			if near < 0.3 {
				t.Errorf("cos(%q, %q) = %.3f, want at least 0.3", tt.text, tt.near, near)
			}
		})
	}
}

// embeddingsAnswer is OpenAI's embeddings answer, as a client decodes it.
type embeddingsAnswer struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

// postEmbeddings sends body to {URL}/embeddings and returns the status and
// the answer's body.
func postEmbeddings(t *testing.T, p *Provider, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, p.URL()+"/embeddings", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestServeEmbeddings(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		inputs []string
		tokens int64 // words, at least one per input
		base64 bool
	}{
		{"list", `{"model":"emb","input":["rotate the key","hello"],"encoding_format":"float"}`,
			[]string{"rotate the key", "hello"}, 3 + 1, false},
		{"one string", `{"model":"emb","input":"one two three four"}`, []string{"one two three four"}, 4, false},
		{"no words still costs one", `{"model":"emb","input":["...","a b"]}`, []string{"...", "a b"}, 1 + 2, false},
		{"base64", `{"model":"emb","input":["rotate the key"],"encoding_format":"base64"}`,
			[]string{"rotate the key"}, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, nil)
			status, body := postEmbeddings(t, p, tt.body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var a embeddingsAnswer
			if err := json.Unmarshal(body, &a); err != nil {
				t.Fatal(err)
			}
			if a.Object != "list" || a.Model != "emb" || len(a.Data) != len(tt.inputs) {
				t.Fatalf("answer %s: want a list from model emb with %d items", body, len(tt.inputs))
			}
			for i, d := range a.Data {
				if d.Object != "embedding" || d.Index != i {
					t.Errorf("item %d: object %q index %d, want embedding %d", i, d.Object, d.Index, i)
				}
				var got []float32
				if tt.base64 {
					var s string
					if err := json.Unmarshal(d.Embedding, &s); err != nil {
						t.Fatalf("item %d: base64 vector is not a string: %s", i, d.Embedding)
					}
					raw, err := base64.StdEncoding.DecodeString(s)
					if err != nil {
						t.Fatal(err)
					}
					got = make([]float32, len(raw)/4)
					if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, got); err != nil {
						t.Fatal(err)
					}
				} else if err := json.Unmarshal(d.Embedding, &got); err != nil {
					t.Fatal(err)
				}
				if want := Embedding(tt.inputs[i]); !reflect.DeepEqual(got, want) {
					t.Errorf("item %d: vector is not Embedding(%q)", i, tt.inputs[i])
				}
			}
			if a.Usage.PromptTokens != tt.tokens || a.Usage.TotalTokens != tt.tokens {
				t.Errorf("usage = %+v, want %d prompt and total tokens", a.Usage, tt.tokens)
			}
			reqs := p.Requests()
			if len(reqs) != 1 || !reflect.DeepEqual(reqs[0].Embeddings, tt.inputs) || reqs[0].Model != "emb" ||
				reqs[0].Authorization != "Bearer sk-test" || string(reqs[0].Body) != tt.body {
				t.Errorf("Requests() = %+v, want the one request with inputs %q", reqs, tt.inputs)
			}
		})
	}
}

func TestServeEmbeddingsRefusesBadRequests(t *testing.T) {
	tests := []struct {
		name, body string
	}{
		{"not JSON", `{`},
		{"no input", `{"model":"emb"}`},
		{"empty list", `{"model":"emb","input":[]}`},
		{"empty string", `{"model":"emb","input":""}`},
		{"an empty item", `{"model":"emb","input":["a",""]}`},
		{"token arrays", `{"model":"emb","input":[[1,2,3]]}`},
		{"unknown encoding", `{"model":"emb","input":["a"],"encoding_format":"int8"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, nil)
			if status, body := postEmbeddings(t, p, tt.body); status != http.StatusBadRequest {
				t.Errorf("status %d (%s), want 400", status, body)
			}
			if n := len(p.Requests()); n != 0 {
				t.Errorf("Requests() has %d, want none for a request that is not one", n)
			}
		})
	}
}

func TestFailEmbeddings(t *testing.T) {
	p := start(t, Sequence(Text("chat still answers")))
	const req = `{"model":"emb","input":["a"]}`

	p.FailEmbeddings(http.StatusServiceUnavailable)
	for range 2 {
		status, body := postEmbeddings(t, p, req)
		if status != http.StatusServiceUnavailable {
			t.Fatalf("status %d (%s), want 503 until reset", status, body)
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" {
			t.Errorf("body %s is not an OpenAI-style error", body)
		}
	}
	if got := content(wholeReply(t, p, userHi)); got != "chat still answers" {
		t.Errorf("chat content = %q while embeddings fail, want the script's", got)
	}

	p.FailEmbeddings(0)
	if status, body := postEmbeddings(t, p, req); status != http.StatusOK {
		t.Errorf("status %d (%s) after FailEmbeddings(0), want 200", status, body)
	}

	// Every embeddings request is recorded, failed or not, in order with
	// the chat request.
	var kinds []string
	for _, r := range p.Requests() {
		if r.Embeddings != nil {
			kinds = append(kinds, "embeddings")
		} else {
			kinds = append(kinds, "chat")
		}
	}
	if want := []string{"embeddings", "embeddings", "chat", "embeddings"}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("requests = %q, want %q", kinds, want)
	}
}
