package retrieval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"corral"
)

// The evaluation set (testdata/eval, see its README): 30 documents and
// 160 questions, 110 that name the documents and the passage that answer
// them, 50 that none answers. It measures the ranking (recall@3) and the
// confidence signal (refusals, calibration), and is what the model in
// confidence.go was fitted on.

type evalQuestion struct {
	ID         string   `json:"id"`
	Question   string   `json:"question"`
	Answerable bool     `json:"answerable"`
	Documents  []string `json:"documents"`
	Answer     string   `json:"answer"`
	OffTopic   bool     `json:"off_topic"` // unanswerable and plainly off the documents' topics
}

// evalIndex indexes the evaluation documents, one document each.
// With vectors, each chunk also gets the fake embedder's vector
// (modeltest.Embedding), as embedChunk computes it.
func evalIndex(t testing.TB, vectors bool) (*Index, []evalQuestion) {
	t.Helper()
	ctx := context.Background()
	x, err := Open(ctx, filepath.Join(t.TempDir(), "eval.db"), "agt_eval")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	dir := filepath.Join("testdata", "eval", "docs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		d := corral.Document{ID: e.Name(), Name: e.Name(), Bytes: int64(len(b)), CreatedAt: time.Now()}
		chunks := Split(e.Name(), string(b))
		var vecs [][]float32
		if vectors {
			for _, c := range chunks {
				vecs = append(vecs, embedChunk(c))
			}
		}
		if err := x.Add(ctx, d, chunks, vecs); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "eval", "questions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var qs []evalQuestion
	if err := json.Unmarshal(b, &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) < 100 || len(entries) < 20 {
		t.Fatalf("the evaluation set is too small: %d questions, %d documents", len(qs), len(entries))
	}
	return x, qs
}

// sample is one retrieved passage with its label: it is from a document
// that answers its question and holds the expected answer.
type sample struct {
	f        features
	positive bool
}

// labelled are what each question retrieves, labelled.
type labelled struct {
	q     evalQuestion
	found []scored
}

func (l labelled) answersDoc(s scored) bool {
	for _, d := range l.q.Documents {
		if s.document == d {
			return true
		}
	}
	return false
}

func (l labelled) answers(s scored) bool {
	return l.answersDoc(s) && strings.Contains(strings.ToLower(s.text), strings.ToLower(l.q.Answer))
}

// retrieveAll ranks every question, by BM25 alone when embed is nil.
func retrieveAll(t testing.TB, x *Index, qs []evalQuestion, embed Embedder) []labelled {
	out := make([]labelled, len(qs))
	for i, q := range qs {
		found, _, _, err := rank(context.Background(), []Scope{{x, corral.SourcePrivate}}, Query{Text: q.Question, Embed: embed})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = labelled{q: q, found: found}
	}
	return out
}

// scores are the figures of one evaluation.
type scores struct {
	recallDoc3, recallPassage3 float64 // answerable questions with an answering document / passage in the top 3
	answered                   float64 // answerable questions judged answerable with an answering document in the top 3
	refused                    float64 // unanswerable questions judged unanswerable
	refusedOff, refusedNear    float64 // of them, the off-topic ones and the near misses
	brier, ece                 float64 // of confidence against "an answering passage is in the top 3"
}

func (s scores) String() string {
	return fmt.Sprintf("recall@3 %.3f (passage %.3f), answered %.3f, refused %.3f (off-topic %.3f, near misses %.3f), Brier %.3f, ECE %.3f",
		s.recallDoc3, s.recallPassage3, s.answered, s.refused, s.refusedOff, s.refusedNear, s.brier, s.ece)
}

// evaluate scores the questions with model m (ranking and confidence)
// and threshold.
func evaluate(qs []labelled, m logistic, threshold float64) scores {
	var s scores
	var nAns, nUn, nOff int
	type bin struct{ conf, hit, n float64 }
	bins := make([]bin, 10)
	for _, l := range qs {
		found := rescore(l.found, m)
		conf := 0.0
		for _, f := range found {
			conf = max(conf, f.p)
		}
		hitDoc, hitPassage := false, false
		for _, f := range found[:min(3, len(found))] {
			hitDoc = hitDoc || l.answersDoc(f)
			hitPassage = hitPassage || l.answers(f)
		}
		outcome := 0.0
		if l.q.Answerable && hitDoc {
			outcome = 1
		}
		s.brier += (conf - outcome) * (conf - outcome)
		b := &bins[min(9, int(conf*10))]
		b.conf += conf
		b.hit += outcome
		b.n++
		if l.q.Answerable {
			nAns++
			if hitDoc {
				s.recallDoc3++
			}
			if hitPassage {
				s.recallPassage3++
			}
			if hitDoc && conf >= threshold {
				s.answered++
			}
		} else {
			nUn++
			if offTopic(l.q) {
				nOff++
			}
			if conf < threshold {
				s.refused++
				if offTopic(l.q) {
					s.refusedOff++
				} else {
					s.refusedNear++
				}
			}
		}
	}
	n := float64(nAns + nUn)
	s.brier /= n
	for _, b := range bins {
		if b.n > 0 {
			s.ece += b.n / n * math.Abs(b.conf/b.n-b.hit/b.n)
		}
	}
	s.recallDoc3 /= float64(nAns)
	s.recallPassage3 /= float64(nAns)
	s.answered /= float64(nAns)
	s.refused /= float64(nUn)
	s.refusedOff /= float64(max(nOff, 1))
	s.refusedNear /= float64(max(nUn-nOff, 1))
	return s
}

// offTopic: the set marks its plainly off-topic questions; the other
// unanswerable ones are near misses, on the documents' topics and in
// their words (see testdata/eval/README.md).
func offTopic(q evalQuestion) bool { return !q.Answerable && q.OffTopic }

// rescore scores passages by m and orders them as rank does.
func rescore(found []scored, m logistic) []scored {
	out := append([]scored(nil), found...)
	for i := range out {
		out[i].p = m.apply(out[i].f)
	}
	sortLexical(out)
	return out
}

// samples are the training data of a fit, one per question: the
// features of its best passage by BM25, labelled positive when the
// question is answerable and an answering document is in its top 3 by
// BM25 (what the confidence is to predict: the search found an answer).
func samples(qs []labelled) []sample {
	var out []sample
	for _, l := range qs {
		byBM25 := append([]scored(nil), l.found...)
		sort.SliceStable(byBM25, func(i, j int) bool { return byBM25[i].bm25 > byBM25[j].bm25 })
		if len(byBM25) == 0 {
			out = append(out, sample{})
			continue
		}
		hit := false
		for _, f := range byBM25[:min(3, len(byBM25))] {
			hit = hit || l.answersDoc(f)
		}
		out = append(out, sample{f: byBM25[0].f, positive: l.q.Answerable && hit})
	}
	return out
}

// fit is logistic regression by Newton's method, with a ridge (0.1) so
// that it converges on separable data and a fit on half the set stays
// stable: coverage and strength move together, and with a weaker ridge
// a half's fit traded one for the other and called an off-topic question
// answerable.
func fit(data []sample) logistic {
	const dims = nFeatures + 1
	x := func(f features) [dims]float64 {
		var v [dims]float64
		v[0] = 1
		copy(v[1:], f[:])
		return v
	}
	var w [dims]float64
	for iter := 0; iter < 50; iter++ {
		var g [dims]float64
		var h [dims][dims]float64
		for i := 0; i < dims; i++ {
			g[i] = 0.1 * w[i]
			h[i][i] = 0.1
		}
		for _, s := range data {
			v := x(s.f)
			z := 0.0
			for i := range v {
				z += w[i] * v[i]
			}
			p := 1 / (1 + math.Exp(-z))
			y := 0.0
			if s.positive {
				y = 1
			}
			for i := range v {
				g[i] += (p - y) * v[i]
				for j := range v {
					h[i][j] += p * (1 - p) * v[i] * v[j]
				}
			}
		}
		step := solve(h, g)
		moved := 0.0
		for i := range w {
			w[i] -= step[i]
			moved = max(moved, math.Abs(step[i]))
		}
		if moved < 1e-9 {
			break
		}
	}
	m := logistic{bias: w[0]}
	copy(m.w[:], w[1:])
	return m
}

// solve solves h·s = g by Gaussian elimination with partial pivoting.
func solve[V ~[nFeatures + 1]float64, M ~[nFeatures + 1][nFeatures + 1]float64](h M, g V) V {
	const n = nFeatures + 1
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(h[r][c]) > math.Abs(h[p][c]) {
				p = r
			}
		}
		h[c], h[p] = h[p], h[c]
		g[c], g[p] = g[p], g[c]
		for r := c + 1; r < n; r++ {
			k := h[r][c] / h[c][c]
			for j := c; j < n; j++ {
				h[r][j] -= k * h[c][j]
			}
			g[r] -= k * g[c]
		}
	}
	var s V
	for r := n - 1; r >= 0; r-- {
		v := g[r]
		for j := r + 1; j < n; j++ {
			v -= h[r][j] * s[j]
		}
		s[r] = v / h[r][r]
	}
	return s
}

// TestEvaluation measures retrieval on the evaluation set and holds it
// to what docs/runs-and-agents.md claims (Documents and retrieval):
//
//   - held out: the model fitted, and a strict threshold (the lowest that
//     calls at most 5% of the unanswerable questions answerable) chosen, on the questions
//     of odd number, then both measured on those of even number, which
//     neither saw; and the default threshold on those too;
//   - shipped: the model of confidence.go (fitted on every question, so
//     in sample) at the default Threshold and at StrictThreshold.
//
// CORRAL_CALIBRATE=1 prints the model and strict threshold fitted on
// every question, for confidence.go.
func TestEvaluation(t *testing.T) {
	x, qs := evalIndex(t, false)
	all := retrieveAll(t, x, qs, nil)
	var odd, even []labelled
	for i, l := range all {
		if i%2 == 0 { // q001, q003, ...
			odd = append(odd, l)
		} else {
			even = append(even, l)
		}
	}
	m := fit(samples(odd))
	th := strictThreshold(odd, m)
	heldDefault, heldStrict := evaluate(even, m, Threshold), evaluate(even, m, th)
	t.Logf("held out (fitted on %d odd questions, measured on %d even), threshold %.2f: %v", len(odd), len(even), Threshold, heldDefault)
	t.Logf("held out, strict threshold %.2f chosen on the odd: %v", th, heldStrict)
	shipped, strict := evaluate(all, model, Threshold), evaluate(all, model, StrictThreshold)
	t.Logf("shipped, threshold %.2f (all %d questions, in sample): %v", Threshold, len(all), shipped)
	t.Logf("shipped, strict threshold %.2f (in sample): %v", StrictThreshold, strict)

	if os.Getenv("CORRAL_CALIBRATE") != "" {
		m := fit(samples(all))
		t.Logf("fitted on all: logistic{bias: %.3f, w: [nFeatures]float64{%s}}, strict threshold %.2f",
			m.bias, strings.ReplaceAll(strings.Trim(fmt.Sprintf("%.3f", m.w), "[]"), " ", ", "), strictThreshold(all, m))
	}
	checks := []struct {
		what      string
		got, want float64
	}{
		{"shipped recall@3", shipped.recallDoc3, 0.8},
		{"held-out recall@3", heldDefault.recallDoc3, 0.8},
		{"shipped answered at the default threshold", shipped.answered, 0.8},
		{"shipped off-topic refused at the default threshold", shipped.refusedOff, 0.9},
		{"held-out off-topic refused at the default threshold", heldDefault.refusedOff, 0.9},
		{"shipped refused at the strict threshold", strict.refused, 1 - maxFalseAnswerable},
		// A threshold chosen on one half refuses a little less of the
		// other: the floor is lower, and the note reports the figure.
		{"held-out refused at the strict threshold", heldStrict.refused, 0.9},
	}
	for _, c := range checks {
		if c.got < c.want {
			t.Errorf("%s: %.3f, want at least %.2f", c.what, c.got, c.want)
		}
	}
}

// TestThresholdCurve logs, for thresholds from 0.3 to 0.95, what share
// of answerable questions gets an answer with the right document and
// what share of unanswerable ones is refused, on held-out folds.
func TestThresholdCurve(t *testing.T) {
	if os.Getenv("CORRAL_CALIBRATE") == "" {
		t.Skip("CORRAL_CALIBRATE=1 prints the curve")
	}
	x, qs := evalIndex(t, false)
	all := retrieveAll(t, x, qs, nil)
	type point struct {
		conf           float64
		ok, answerable bool
	}
	var pts []point
	for k := 0; k < 5; k++ {
		var train, test []labelled
		for i, l := range all {
			if i%5 == k {
				test = append(test, l)
			} else {
				train = append(train, l)
			}
		}
		m := fit(samples(train))
		for _, l := range test {
			found := rescore(l.found, m)
			conf, hit := 0.0, false
			for i, f := range found {
				conf = max(conf, f.p)
				if i < 3 {
					hit = hit || l.answersDoc(f)
				}
			}
			pts = append(pts, point{conf, hit, l.q.Answerable})
		}
	}
	_ = x
	for th := 0.3; th < 0.96; th += 0.05 {
		var ans, nAns, ref, nUn float64
		for _, p := range pts {
			if p.answerable {
				nAns++
				if p.ok && p.conf >= th {
					ans++
				}
			} else {
				nUn++
				if p.conf < th {
					ref++
				}
			}
		}
		t.Logf("threshold %.2f: answered %.3f, refused %.3f", th, ans/nAns, ref/nUn)
	}
}
