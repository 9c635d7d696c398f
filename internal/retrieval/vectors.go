package retrieval

import (
	"context"
	"sort"
)

// vectorCache holds a store's chunk vectors in memory: a search compares
// the query's vector with every one (exact, no approximate index), which
// at 100,000 chunks is one pass over memory, while reading them from the
// file on every query would be a pass over the disk.
type vectorCache struct {
	rows []vectorRow
}

type vectorRow struct {
	id  int64
	vec []float32 // unit length
}

func (c *vectorCache) add(rows []vectorRow) { c.rows = append(c.rows, rows...) }

func (c *vectorCache) remove(ids []int64) {
	gone := map[int64]bool{}
	for _, id := range ids {
		gone[id] = true
	}
	kept := c.rows[:0]
	for _, r := range c.rows {
		if !gone[r.id] {
			kept = append(kept, r)
		}
	}
	c.rows = kept
}

// loadVectors reads the store's vectors once.
func (x *Index) loadVectors(ctx context.Context) error {
	loaded := func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		return x.vecs != nil
	}
	if loaded() {
		return nil
	}
	x.load.Lock() // no write meanwhile: see Index.load
	defer x.load.Unlock()
	if loaded() {
		return nil
	}
	rows, err := x.db.QueryContext(ctx, `SELECT id, vector FROM chunks WHERE owner = ? AND vector IS NOT NULL`, x.owner)
	if err != nil {
		return err
	}
	defer rows.Close()
	c := &vectorCache{}
	for rows.Next() {
		var r vectorRow
		var b []byte
		if err := rows.Scan(&r.id, &b); err != nil {
			return err
		}
		r.vec = decodeVector(b)
		c.rows = append(c.rows, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	x.mu.Lock()
	x.vecs = c
	x.mu.Unlock()
	return nil
}

// nearest returns the ids and cosines of the n chunks closest to q (unit
// length), best first. Vectors of another dimension (a changed model) are
// skipped.
func (x *Index) nearest(ctx context.Context, q []float32, n int) ([]int64, []float64, error) {
	if err := x.loadVectors(ctx); err != nil {
		return nil, nil, err
	}
	type hit struct {
		id  int64
		cos float64
	}
	x.mu.Lock()
	hits := make([]hit, 0, n+1)
	for _, r := range x.vecs.rows {
		if len(r.vec) != len(q) {
			continue
		}
		c := float64(dot(r.vec, q))
		if len(hits) == n && c <= hits[n-1].cos {
			continue
		}
		i := sort.Search(len(hits), func(i int) bool { return hits[i].cos < c })
		hits = append(hits, hit{})
		copy(hits[i+1:], hits[i:])
		hits[i] = hit{r.id, c}
		if len(hits) > n {
			hits = hits[:n]
		}
	}
	x.mu.Unlock()
	ids := make([]int64, len(hits))
	cos := make([]float64, len(hits))
	for i, h := range hits {
		ids[i], cos[i] = h.id, h.cos
	}
	return ids, cos, nil
}

// dot is the dot product of two vectors of one length, with four
// accumulators so the loop is not one long chain of dependent adds.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
