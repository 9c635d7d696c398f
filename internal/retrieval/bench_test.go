package retrieval

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kljensen/snowball/english"

	"corral"
)

// The benchmarks of search and indexing, each against a plain FTS5
// baseline measured in the same run:
//
//	go test -run '^$' -bench 'BenchmarkSearch|BenchmarkIndex' -benchtime 1x -count 3 ./internal/retrieval/
//
// The text is generated from a fixed seed: a vocabulary of English stop
// words (the head of any real text, which the index leaves out) and a
// few thousand made-up words, drawn with a Zipf distribution so that a
// term's idf varies as in real documents.

// corpus generates the benchmarks' text.
type corpus struct {
	r     *rand.Rand
	zipf  *rand.Zipf // over vocab: stop words first, then content words
	vocab []string
	words []string // the content words alone, for queries
	qzipf *rand.Zipf
}

var benchStopWords = strings.Fields(`the of and to a in is it that for on was with as be by at this are from or an
	which not but have has had were can all their there been if more when will would who so no they its into only other
	than then some these may such also any each about most over after before`)

func newCorpus(seed int64) *corpus {
	r := rand.New(rand.NewSource(seed))
	c := &corpus{r: r}
	c.vocab = append(c.vocab, benchStopWords...)
	onsets := strings.Split("b d f g k l m n p r s t v z br dr gl kr pl st tr", " ")
	vowels := []string{"a", "e", "i", "o", "u", "ai", "ou"}
	seen := map[string]bool{}
	for len(c.words) < 4000 {
		var w strings.Builder
		for n := 2 + r.Intn(3); n > 0; n-- {
			w.WriteString(onsets[r.Intn(len(onsets))] + vowels[r.Intn(len(vowels))])
		}
		if r.Intn(2) == 0 {
			w.WriteString(onsets[r.Intn(11)]) // a closing consonant
		}
		s := w.String()
		// One term per word, itself: so that the vocabulary is the index's.
		if seen[s] || english.IsStopWord(s) || english.Stem(s, false) != s {
			continue
		}
		seen[s] = true
		c.words = append(c.words, s)
	}
	c.vocab = append(c.vocab, c.words...)
	c.zipf = rand.NewZipf(r, 1.07, 2, uint64(len(c.vocab)-1))
	c.qzipf = rand.NewZipf(r, 1.07, 2, uint64(len(c.words)-1))
	return c
}

func (c *corpus) word() string { return c.vocab[c.zipf.Uint64()] }

// sentence is 6 to 20 words, capitalized, with a full stop.
func (c *corpus) sentence(b *strings.Builder) {
	n := 6 + c.r.Intn(15)
	for i := 0; i < n; i++ {
		w := c.word()
		if i == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	b.WriteString(". ")
}

// passage is text of about size bytes, in whole sentences.
func (c *corpus) passage(size int) string {
	var b strings.Builder
	for b.Len() < size-60 {
		c.sentence(&b)
	}
	return strings.TrimSpace(b.String())
}

// query is 2 to 6 content words, drawn as the text draws them.
func (c *corpus) query() string {
	n := 2 + c.r.Intn(5)
	q := make([]string, n)
	for i := range q {
		q[i] = c.words[c.qzipf.Uint64()]
	}
	return strings.Join(q, " ")
}

// markdown is a document of about size bytes: a title, sections,
// paragraphs, now and then a list or a fenced block.
func (c *corpus) markdown(size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s %s\n\n", c.word(), c.words[c.r.Intn(len(c.words))])
	for b.Len() < size {
		fmt.Fprintf(&b, "## %s %s\n\n", c.words[c.r.Intn(len(c.words))], c.word())
		for p := 2 + c.r.Intn(5); p > 0 && b.Len() < size; p-- {
			switch c.r.Intn(8) {
			case 0:
				for i := 2 + c.r.Intn(4); i > 0; i-- {
					b.WriteString("- " + c.passage(40+c.r.Intn(80)) + "\n")
				}
			case 1:
				b.WriteString("```\n")
				for i := 3 + c.r.Intn(10); i > 0; i-- {
					fmt.Fprintf(&b, "%s := %s(%d)\n", c.words[c.r.Intn(len(c.words))], c.word(), c.r.Intn(1000))
				}
				b.WriteString("```\n")
			default:
				b.WriteString(c.passage(200 + c.r.Intn(700)))
			}
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

// The search fixture: one store of benchChunks chunks, built once per
// process (and removed by TestMain), outside every timed part.
const (
	benchChunks       = 100_000
	benchChunksPerDoc = 20
	benchQueries      = 50
)

type searchFixture struct {
	dir     string
	x       *Index
	queries []string
	bytes   int64
	took    time.Duration
	matched int // chunks a query's terms match, at the median
}

var (
	fixtureOnce sync.Once
	fixture     *searchFixture
	fixtureErr  error
	logFixture  sync.Once
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixture != nil {
		fixture.x.Close()
		os.RemoveAll(fixture.dir)
	}
	os.Exit(code)
}

func searchStore(b *testing.B) *searchFixture {
	fixtureOnce.Do(func() { fixture, fixtureErr = buildSearchFixture() })
	if fixtureErr != nil {
		b.Fatal(fixtureErr)
	}
	return fixture
}

// buildSearchFixture writes benchChunks chunks of 600 to 900 bytes in
// documents of benchChunksPerDoc, each chunk with its vector. Text is
// generated in order from the seed; the vectors of a batch are computed
// on every core while the batch before is being added.
func buildSearchFixture() (*searchFixture, error) {
	start := time.Now()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "corral-retrieval-bench-")
	if err != nil {
		return nil, err
	}
	x, err := Open(ctx, filepath.Join(dir, "documents.db"), "agt_bench")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	f := &searchFixture{dir: dir, x: x}
	c := newCorpus(1)
	type doc struct {
		d      corral.Document
		chunks []Chunk
		vecs   [][]float32
	}
	const batch = 50 // documents
	gen := func(first int) []doc {
		out := make([]doc, 0, batch)
		for i := first; i < first+batch && i*benchChunksPerDoc < benchChunks; i++ {
			d := doc{d: corral.Document{ID: fmt.Sprintf("doc_%05d", i), Name: fmt.Sprintf("notes-%05d.md", i), CreatedAt: time.Unix(int64(i), 0)}}
			section := ""
			for j := 0; j < benchChunksPerDoc; j++ {
				if j%5 == 0 {
					section = c.words[c.r.Intn(len(c.words))] + " " + c.word()
				}
				ch := Chunk{Ord: j, Heading: section, Text: c.passage(600 + c.r.Intn(301))}
				d.chunks = append(d.chunks, ch)
				d.d.Bytes += int64(len(ch.Text))
			}
			out = append(out, d)
		}
		// Vectors on every core: the text is fixed by now, and
		// Embedding is a pure function of it.
		var wg sync.WaitGroup
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < len(out); i += 2 {
					out[i].vecs = make([][]float32, len(out[i].chunks))
					for j, ch := range out[i].chunks {
						out[i].vecs[j] = embedChunk(ch)
					}
				}
			}(w)
		}
		wg.Wait()
		return out
	}
	docs := benchChunks / benchChunksPerDoc
	next := make(chan []doc, 1)
	go func() {
		for first := 0; first < docs; first += batch {
			next <- gen(first)
		}
		close(next)
	}()
	for ds := range next {
		for _, d := range ds {
			if err := x.Add(ctx, d.d, d.chunks, d.vecs); err != nil {
				x.Close()
				os.RemoveAll(dir)
				return nil, err
			}
			f.bytes += d.d.Bytes
		}
	}
	for i := 0; i < benchQueries; i++ {
		f.queries = append(f.queries, c.query())
	}
	f.took = time.Since(start)
	var matched []int
	for _, q := range f.queries {
		var n int
		if err := x.db.QueryRowContext(ctx, `SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?`, ftsQuery(q)).Scan(&n); err != nil {
			return nil, err
		}
		matched = append(matched, n)
	}
	sort.Ints(matched)
	f.matched = matched[len(matched)/2]
	return f, nil
}

// plainFTS5 is the baseline query: FTS5's own ranking over the same
// table, for the same terms, nothing else.
func plainFTS5(ctx context.Context, x *Index, q string) error {
	rows, err := x.db.QueryContext(ctx, `SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT 5`, ftsQuery(q))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ftsQuery is q's terms as Search hands them to FTS5: any of them.
func ftsQuery(q string) string {
	qt := queryTerms(q)
	quoted := make([]string, len(qt))
	for i, t := range qt {
		quoted[i] = `"` + t + `"`
	}
	return strings.Join(quoted, " OR ")
}

// percentile is the p-th percentile of ds (sorted in place), in ms.
func percentile(ds []time.Duration, p float64) float64 {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(p * float64(len(ds)-1))
	return float64(ds[i]) / float64(time.Millisecond)
}

// BenchmarkSearch times each of the fixture's queries by BM25, fused
// (BM25 and 100k vectors) and the plain FTS5 baseline; bm25 and fused
// alternate each query with the baseline, so their ratio to it is of the
// same moment of a shared machine.
func BenchmarkSearch(b *testing.B) {
	f := searchStore(b)
	ctx := context.Background()
	scopes := []Scope{{f.x, corral.SourcePrivate}}
	for _, tc := range []struct {
		name   string
		embed  Embedder
		ranker string
	}{{"bm25", nil, "bm25"}, {"fused", embedder, "fused"}, {"fts5", nil, ""}} {
		b.Run(tc.name, func(b *testing.B) {
			logFixture.Do(func() {
				b.Logf("fixture: %d chunks in %d documents, %.1f MB of text and %d vectors, built in %.1f s; "+
					"a query's terms match %d chunks at the median",
					benchChunks, benchChunks/benchChunksPerDoc, float64(f.bytes)/1e6, benchChunks, f.took.Seconds(), f.matched)
			})
			measure := func(q string) error {
				if tc.ranker == "" {
					return plainFTS5(ctx, f.x, q)
				}
				r, err := Search(ctx, scopes, Query{Text: q, Embed: tc.embed})
				if err == nil && r.Ranker != tc.ranker {
					err = fmt.Errorf("ranked by %s, want %s", r.Ranker, tc.ranker)
				}
				return err
			}
			// Warm: the vectors into memory, the pages into the cache.
			for _, q := range f.queries[:5] {
				if err := measure(q); err != nil {
					b.Fatal(err)
				}
				if err := plainFTS5(ctx, f.x, q); err != nil {
					b.Fatal(err)
				}
			}
			var took, base []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, q := range f.queries {
					if tc.ranker != "" {
						t0 := time.Now()
						if err := plainFTS5(ctx, f.x, q); err != nil {
							b.Fatal(err)
						}
						base = append(base, time.Since(t0))
					}
					t0 := time.Now()
					if err := measure(q); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(t0))
				}
			}
			b.StopTimer()
			p50 := percentile(took, 0.5)
			b.ReportMetric(p50, "p50_ms")
			b.ReportMetric(percentile(took, 0.95), "p95_ms")
			if tc.ranker != "" {
				base50 := percentile(base, 0.5)
				b.ReportMetric(base50, "fts5_p50_ms")
				b.ReportMetric(p50/base50, "p50_vs_fts5")
			}
		})
	}
}

// benchMarkdown is the indexing benchmark's input, about 8 MiB of
// Markdown in documents of about 32 KiB.
var benchMarkdown = sync.OnceValue(func() []string {
	c := newCorpus(3)
	var docs []string
	total := 0
	for total < 8<<20 {
		d := c.markdown(32 << 10)
		docs = append(docs, d)
		total += len(d)
	}
	return docs
})

// BenchmarkIndex measures indexing (Split and Index.Add, BM25 only) in
// MB/s of Markdown, against inserting the same chunks' raw text into a
// plain FTS5 table in one transaction of a fresh file opened by Open
// (so with the same pragmas).
func BenchmarkIndex(b *testing.B) {
	ctx := context.Background()
	docs := benchMarkdown()
	var size int64
	var raw []string // the chunks' text, as the baseline inserts it
	for _, d := range docs {
		size += int64(len(d))
		for _, c := range Split("doc.md", d) {
			raw = append(raw, c.Text)
		}
	}
	b.Logf("indexing %d documents, %.1f MB of Markdown, %d chunks", len(docs), float64(size)/1e6, len(raw))
	var took, plain time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		x, err := Open(ctx, filepath.Join(dir, "documents.db"), "agt_bench")
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for j, d := range docs {
			name := fmt.Sprintf("doc-%04d.md", j)
			doc := corral.Document{ID: fmt.Sprintf("doc_%04d", j), Name: name, Bytes: int64(len(d)), CreatedAt: time.Now()}
			if err := x.Add(ctx, doc, Split(name, d), nil); err != nil {
				b.Fatal(err)
			}
		}
		took += time.Since(t0)
		x.Close()

		p, err := Open(ctx, filepath.Join(dir, "plain.db"), "agt_bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.db.ExecContext(ctx, `CREATE VIRTUAL TABLE plain USING fts5(body)`); err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		if err := insertPlain(ctx, p, raw); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(t0)
		p.Close()
	}
	b.StopTimer()
	mbs := float64(size) * float64(b.N) / 1e6 / took.Seconds()
	plainMBs := float64(size) * float64(b.N) / 1e6 / plain.Seconds()
	b.ReportMetric(mbs, "MB/s")
	b.ReportMetric(plainMBs, "plain_MB/s")
	b.ReportMetric(mbs/plainMBs, "vs_plain_fts5")
}

func insertPlain(ctx context.Context, p *Index, texts []string) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO plain (body) VALUES (?)`)
	if err != nil {
		return err
	}
	for _, t := range texts {
		if _, err := ins.ExecContext(ctx, t); err != nil {
			return err
		}
	}
	return tx.Commit()
}
