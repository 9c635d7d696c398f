package modeltest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// EmbeddingDims is the dimension of every vector the provider serves.
const EmbeddingDims = 256

// Embedding is the vector the provider serves for text: deterministic, and
// close for texts that share words. It is a hashed bag of features, the
// lower-cased words (runs of letters and digits) and the character trigrams
// of each word marked at both ends ("#go#" gives "#go" and "go#"), each
// hashed with FNV-1a into one of EmbeddingDims buckets and added there with
// a sign the hash also decides, so that features sharing a bucket tend to
// cancel rather than pile up. The vector is L2-normalised; a text without
// words has one feature, itself, so no vector is ever zero.
func Embedding(text string) []float32 {
	acc := make([]float64, EmbeddingDims)
	add := func(feature string) {
		h := fnv.New64a()
		io.WriteString(h, feature)
		sum := h.Sum64()
		sign := 1.0
		if sum>>63 == 1 {
			sign = -1
		}
		acc[sum%EmbeddingDims] += sign
	}
	words := embeddingWords(text)
	for _, w := range words {
		add("w:" + w)
		r := []rune("#" + w + "#")
		for i := 0; i+3 <= len(r); i++ {
			add("t:" + string(r[i:i+3]))
		}
	}
	if len(words) == 0 {
		add("x:" + text)
	}
	var norm float64
	for _, f := range acc {
		norm += f * f
	}
	norm = math.Sqrt(norm)
	if norm == 0 {
		// Every feature cancelled out in its bucket: rare, and still a
		// vector of its own.
		acc[0], norm = 1, 1
	}
	out := make([]float32, EmbeddingDims)
	for i, f := range acc {
		out[i] = float32(f / norm)
	}
	return out
}

// embeddingWords cuts text into lower-cased words: runs of letters and
// digits.
func embeddingWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// embeddingTokens is the prompt_tokens the provider reports for inputs: the
// number of words, at least one per input.
func embeddingTokens(inputs []string) int64 {
	var n int64
	for _, in := range inputs {
		n += int64(max(1, len(embeddingWords(in))))
	}
	return n
}

// FailEmbeddings makes every embeddings request from now on fail with
// status and an OpenAI-style error body (say 503), until it is called again
// with 0. Failed requests are still recorded in Requests, as chat requests
// answered with an error are. It does not touch chat completions.
func (p *Provider) FailEmbeddings(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failEmbeddings = status
}

// serveEmbeddings answers POST /v1/embeddings the way OpenAI does:
// {model, input: string | [string], encoding_format?: "float" | "base64"}
// gives a list of Embedding vectors, one per input, and the usage.
func (p *Provider) serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "", "modeltest: reading the request: "+err.Error())
		return
	}
	var wr struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.Unmarshal(body, &wr); err != nil {
		writeError(w, http.StatusBadRequest, "", "modeltest: the request is not an embeddings request: "+err.Error())
		return
	}
	inputs, err := embeddingInputs(wr.Input)
	if err == nil && wr.EncodingFormat != "" && wr.EncodingFormat != "float" && wr.EncodingFormat != "base64" {
		err = fmt.Errorf("encoding_format must be float or base64, not %q", wr.EncodingFormat)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "", "modeltest: "+err.Error())
		return
	}

	p.mu.Lock()
	p.reqs = append(p.reqs, Request{
		Model:         wr.Model,
		Embeddings:    inputs,
		Authorization: r.Header.Get("Authorization"),
		Body:          body,
	})
	fail := p.failEmbeddings
	p.mu.Unlock()
	if fail != 0 {
		writeError(w, fail, "", "modeltest: embeddings fail ("+http.StatusText(fail)+")")
		return
	}

	data := make([]any, len(inputs))
	for i, in := range inputs {
		var vector any = Embedding(in)
		if wr.EncodingFormat == "base64" {
			// Little-endian float32s, as OpenAI sends them.
			var b bytes.Buffer
			binary.Write(&b, binary.LittleEndian, vector)
			vector = base64.StdEncoding.EncodeToString(b.Bytes())
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": vector}
	}
	tokens := embeddingTokens(inputs)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"object": "list",
		"data":   data,
		"model":  wr.Model,
		"usage":  map[string]any{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}

// embeddingInputs reads input: one string or a list of them, none empty,
// as OpenAI requires. Token arrays are not served.
func embeddingInputs(raw json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, fmt.Errorf("input must not be empty")
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("input must be a string or a list of strings")
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("input must not be an empty list")
	}
	for i, s := range list {
		if s == "" {
			return nil, fmt.Errorf("input %d must not be empty", i)
		}
	}
	return list, nil
}
