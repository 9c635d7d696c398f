package gateway

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/openai/openai-go/v3"

	"corral"
)

// The most one Embed call sends. A caller with more texts batches them:
// providers cap a request (OpenAI at 2,048 inputs and 300,000 tokens), and a
// small request keeps a retry cheap.
const (
	MaxEmbedTexts = 256
	MaxEmbedBytes = 2 << 20 // all the texts of a call together
)

// Embed returns one vector per input text, in order, from the provider's
// /v1/embeddings, with the provider's usage. It asks m.Reserve first and
// returns its error unchanged without calling the provider. After the call
// it settles with the usage (Input = prompt_tokens, Output 0), before the
// answer is judged: the tokens are spent whatever the answer looks like. A
// Settle error is returned unchanged along with the vectors. A provider that
// reports no usage makes the call fail, metered at its ceiling.
//
// model is the embedding model; "" is an error, never the chat model,
// whose vectors (when it has any) would not match the index's. No texts
// give no vectors and no call. A text must not be empty, and a call takes
// at most MaxEmbedTexts texts and MaxEmbedBytes of text (EINVALID).
//
// Failures are Complete's: EUNAVAIL without the key or the SDK's error, and
// a try the provider answered 429 or 5xx, or whose connection failed before
// any answer, is made again the way Complete makes it, under the same reservation.
// An answer that is not exactly one finite vector per text, all of one
// dimension, is EUNAVAIL "the provider returned malformed embeddings".
func (g *Gateway) Embed(ctx context.Context, model string, texts []string, m corral.Meter) ([][]float32, corral.Tokens, error) {
	if err := g.Configured(); err != nil {
		return nil, corral.Tokens{}, err
	}
	if model == "" {
		return nil, corral.Tokens{}, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "no embedding model is named: set CORRAL_EMBED_MODEL"}
	}
	if err := embeddable(texts); err != nil {
		return nil, corral.Tokens{}, err
	}
	if len(texts) == 0 {
		return nil, corral.Tokens{}, nil
	}
	params := openai.EmbeddingNewParams{
		Model:          model,
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
	}
	// An embedding has no output: its ceiling is its input's.
	size := 0
	for _, t := range texts {
		size += len(t) + 8 // and what separates it from the next
	}
	settle, err := g.reserve(ctx, m, model, corral.Ceiling(size, 0))
	if err != nil {
		return nil, corral.Tokens{}, err
	}
	start := time.Now()
	// Complete's loop without its callbacks: an embedding call has no
	// OnRetry to tell and no Interrupt, and never streams.
	var waited time.Duration
	for try := 1; ; try++ {
		r, res := g.embedOnce(ctx, params)
		r.tries = try
		if _, ok := g.transient(ctx, r); !ok || try == maxTries {
			g.observe(corral.ModelEmbeddings, model, r, start)
			return g.settleEmbed(ctx, r, res, len(texts), settle)
		}
		wait := backoff[try-1]
		if d, ok := retryAfter(r.exchange.header, time.Now()); ok {
			wait = d
		}
		if waited+wait > maxWaiting {
			r.refused = wait
			g.observe(corral.ModelEmbeddings, model, r, start)
			return g.settleEmbed(ctx, r, res, len(texts), settle)
		}
		if err := g.wait(ctx, nil, wait); err != nil {
			g.observe(corral.ModelEmbeddings, model, r, start)
			settle(context.WithoutCancel(ctx), corral.Tokens{}, true)
			return nil, corral.Tokens{}, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
				Message: "the embedding call was cancelled", Err: fmt.Errorf("waiting to retry: %w", err)}
		}
		waited += wait
	}
}

// embeddable checks a call's texts before anything is sent.
func embeddable(texts []string) error {
	if len(texts) > MaxEmbedTexts {
		return corral.Errorf(corral.EINVALID, "%d texts to embed in one call, more than %d: send them in batches", len(texts), MaxEmbedTexts)
	}
	size := 0
	for i, t := range texts {
		if t == "" {
			// Providers refuse an empty input; saying which one helps.
			return corral.Errorf(corral.EINVALID, "text %d to embed is empty", i)
		}
		size += len(t)
	}
	if size > MaxEmbedBytes {
		return corral.Errorf(corral.EINVALID, "%d bytes of text to embed in one call, more than %d: send them in batches", size, MaxEmbedBytes)
	}
	return nil
}

// embedOnce makes one try. res is nil when the try failed.
func (g *Gateway) embedOnce(ctx context.Context, params openai.EmbeddingNewParams) (result, *openai.CreateEmbeddingResponse) {
	x := &exchange{}
	res, err := g.embeddings.New(context.WithValue(ctx, exchangeKey{}, x), params)
	r := result{op: "embeddings", err: err, exchange: x}
	if err != nil || res == nil {
		return r, nil
	}
	if res.JSON.Usage.Valid() && res.Usage.JSON.PromptTokens.Valid() {
		r.usage, r.metered = corral.Tokens{Input: res.Usage.PromptTokens}, true
	}
	return r, res
}

// settleEmbed is settle for an embedding call: record what the provider
// says was spent, then judge the answer.
func (g *Gateway) settleEmbed(ctx context.Context, r result, res *openai.CreateEmbeddingResponse, n int, settle corral.Settle) ([][]float32, corral.Tokens, error) {
	u, reported := r.spent()
	recErr := settle(context.WithoutCancel(ctx), u, reported)
	fail := func(err error) ([][]float32, corral.Tokens, error) {
		if recErr != nil {
			return nil, corral.Tokens{}, recErr
		}
		return nil, corral.Tokens{}, err
	}
	malformed := &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
		Message: "the provider returned malformed embeddings"}
	switch {
	case r.err != nil && r.exchange.responded && r.exchange.status < 400 && ctx.Err() == nil:
		// A success status whose body the SDK could not read. Its error
		// may quote the body, which may quote the texts: only the fact.
		malformed.Err = fmt.Errorf("embeddings: a %d answer that does not decode (try %d)", r.exchange.status, r.tries)
		return fail(malformed)
	case r.err != nil:
		return fail(g.providerError(ctx, r))
	case !r.metered:
		return nil, corral.Tokens{}, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "the provider reported no token usage: Corral cannot meter it"}
	}
	vectors, err := vectorsOf(res.Data, n)
	if err != nil {
		malformed.Err = err
		return fail(malformed)
	}
	return vectors, r.usage, recErr
}

// vectorsOf puts the answer's vectors in the order of their index, and
// checks that they are one per text, each index once, all of one non-zero
// dimension and finite as float32 (a float64 past float32's range is not).
func vectorsOf(data []openai.Embedding, n int) ([][]float32, error) {
	if len(data) != n {
		return nil, fmt.Errorf("embeddings: %d vectors for %d texts", len(data), n)
	}
	out := make([][]float32, n)
	dim := 0
	for i, d := range data {
		if !d.JSON.Index.Valid() || !d.JSON.Embedding.Valid() {
			return nil, fmt.Errorf("embeddings: item %d lacks a valid index or vector", i)
		}
		if d.Index < 0 || d.Index >= int64(n) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings: item %d has index %d, out of range or repeated", i, d.Index)
		}
		if i == 0 {
			dim = len(d.Embedding)
		}
		if len(d.Embedding) == 0 || len(d.Embedding) != dim {
			return nil, fmt.Errorf("embeddings: item %d has %d dimensions, the first has %d", i, len(d.Embedding), dim)
		}
		v := make([]float32, dim)
		for j, f := range d.Embedding {
			v[j] = float32(f)
			if math.IsNaN(float64(v[j])) || math.IsInf(float64(v[j]), 0) {
				return nil, fmt.Errorf("embeddings: item %d is not finite at %d", i, j)
			}
		}
		out[d.Index] = v
	}
	return out, nil
}
