package retrieval

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"corral"
)

// Scope is one store a search draws from and what its passages are called
// in the answer (corral.SourcePrivate or corral.SourceLibrary).
type Scope struct {
	Index  *Index
	Source string
}

// Embedder turns texts into vectors: the gateway's embeddings, metered on
// whoever asked. nil means BM25 alone.
type Embedder func(ctx context.Context, texts []string) ([][]float32, error)

// Query is one search.
type Query struct {
	Text string
	K    int // passages to return; 0 means DefaultK, at most MaxK
	// Exclude are the agent's own exclusion globs, applied again to what
	// is found: a document indexed before a glob was added never comes back.
	Exclude []string
	Embed   Embedder
	// Threshold is the confidence below which the search is not
	// answerable; 0 means the calibrated default, Threshold.
	Threshold float64
	// Weak returns the passages found even when the search is not
	// answerable, marked so: for a person reviewing the documents, never
	// for an agent.
	Weak bool
}

// Passages a search returns.
const (
	DefaultK = 5
	MaxK     = 20
)

// pool is how many candidates each store and each ranker contributes
// before the passages are scored and cut to K.
const pool = 50

// MaxQueryBytes bounds a query's text.
const MaxQueryBytes = 4 << 10

// scored is a candidate with its store, its features and its score.
type scored struct {
	candidate
	source string
	f      features
	p      float64 // the calibrated chance it answers the query
	rrf    float64
}

// Search finds the passages of scopes that best answer q. Each store is
// searched by BM25 over its own statistics; each passage found gets a
// calibrated score (confidence.go) that makes passages of different
// stores comparable. With an embedder, each store is also searched by
// vector and the two rankings are fused by reciprocal rank; an embedder
// that fails leaves BM25 alone and a Note. Below the confidence threshold
// nothing is returned (unless q.Weak).
func Search(ctx context.Context, scopes []Scope, q Query) (corral.Retrieval, error) {
	if len(q.Text) > MaxQueryBytes {
		return corral.Retrieval{}, corral.Errorf(corral.ETOOLARGE, "a query is at most %d bytes", MaxQueryBytes)
	}
	if strings.TrimSpace(q.Text) == "" {
		return corral.Retrieval{}, corral.Errorf(corral.EINVALID, "the query is empty")
	}
	k := q.K
	if k <= 0 {
		k = DefaultK
	}
	k = min(k, MaxK)
	found, ranker, note, err := rank(ctx, scopes, q)
	if err != nil {
		return corral.Retrieval{}, err
	}
	out := corral.Retrieval{Ranker: ranker, Note: note}
	for _, s := range found {
		out.Confidence = max(out.Confidence, s.p)
	}
	out.Confidence = math.Round(out.Confidence*1000) / 1000
	threshold := q.Threshold
	if threshold <= 0 {
		threshold = Threshold
	}
	out.Answerable = out.Confidence >= threshold
	if !out.Answerable && !q.Weak {
		return out, nil
	}
	for _, s := range found[:min(k, len(found))] {
		out.Items = append(out.Items, corral.Passage{
			DocumentID: s.document, ChunkID: fmt.Sprintf("%s:%d", s.document, s.ord),
			Name: s.name, Source: s.source, Heading: s.heading, Text: s.text,
			Score: math.Round(s.p*1000) / 1000,
		})
	}
	return out, nil
}

// rank gathers, scores and orders the candidates of every scope.
func rank(ctx context.Context, scopes []Scope, q Query) ([]scored, string, string, error) {
	qterms := queryTerms(q.Text)
	var all []scored
	byKey := map[string]int{} // source/chunk id → index in all
	weights := map[*Index]weights{}
	for _, sc := range scopes {
		cands, st, err := sc.Index.lexical(ctx, qterms, pool)
		if err != nil {
			return nil, "", "", err
		}
		w := weigh(q.Text, qterms, st)
		weights[sc.Index] = w
		for _, c := range cands {
			if _, ex := Excluded(c.name, q.Exclude); ex {
				continue
			}
			byKey[fmt.Sprintf("%s/%d", sc.Source, c.id)] = len(all)
			all = append(all, scored{candidate: c, source: sc.Source, f: w.features(c)})
		}
	}
	for i := range all {
		all[i].p = all[i].f.probability()
	}
	sortLexical(all)
	if q.Embed == nil {
		return all, "bm25", "", nil
	}
	vecs, err := q.Embed(ctx, []string{q.Text})
	if err == nil && len(vecs) != 1 {
		err = corral.Errorf(corral.EUNAVAIL, "the embedder answered %d vectors for one query", len(vecs))
	}
	if err != nil {
		return all, "bm25", "embeddings were not used (" + corral.ErrorMessage(err) + "): ranked by BM25 alone", nil
	}
	qv := normalize(vecs[0])
	for i := range all {
		all[i].rrf = 1 / float64(rrfK+i+1)
	}
	type vhit struct {
		sc  Scope
		id  int64
		cos float64
	}
	var vhits []vhit
	for _, sc := range scopes {
		ids, cos, err := sc.Index.nearest(ctx, qv, pool)
		if err != nil {
			return nil, "", "", corral.Internal("retrieval.Search", err)
		}
		for i := range ids {
			vhits = append(vhits, vhit{sc, ids[i], cos[i]})
		}
	}
	sort.SliceStable(vhits, func(i, j int) bool { return vhits[i].cos > vhits[j].cos })
	for r, h := range vhits[:min(len(vhits), pool)] {
		key := fmt.Sprintf("%s/%d", h.sc.Source, h.id)
		if i, ok := byKey[key]; ok {
			all[i].cosine = h.cos
			all[i].rrf += 1 / float64(rrfK+r+1)
			continue
		}
		got, err := h.sc.Index.byIDs(ctx, []int64{h.id})
		if err != nil {
			return nil, "", "", err
		}
		c, ok := got[h.id]
		if !ok {
			continue
		}
		if _, ex := Excluded(c.name, q.Exclude); ex {
			continue
		}
		c.cosine = h.cos
		s := scored{candidate: c, source: h.sc.Source, rrf: 1 / float64(rrfK+r+1)}
		s.f = weights[h.sc.Index].features(c)
		s.p = s.f.probability()
		byKey[key] = len(all)
		all = append(all, s)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].rrf > all[j].rrf })
	return all, "fused", "", nil
}

// rrfK is reciprocal rank fusion's constant (Cormack et al., 2009).
const rrfK = 60

// sortLexical orders passages by BM25 divided by the query's weight in
// their store: within a store that is BM25's order, and across stores it
// is a comparable strength (raw BM25 grows with a store's idf).
func sortLexical(all []scored) {
	sort.SliceStable(all, func(i, j int) bool { return all[i].f[1] > all[j].f[1] })
}
