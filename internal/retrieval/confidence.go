package retrieval

import (
	"math"
	"strings"
	"unicode"
)

// The confidence signal. Every passage found gets a score: the chance,
// by a logistic model over features of the query and the passage, that
// the search has found an answer when this passage is its best. A
// search's confidence is its best passage's score, and below Threshold it
// answers that nothing relevant was found.
//
// Each feature is computed from the store's own counts, so passages of
// two stores (an agent's and the library) are comparable:
//
//   - coverage: the share of the query's weight (its terms' idf) that the
//     passage, with its heading and document name, holds;
//   - strength: the passage's BM25 (one field: name, heading and text)
//     divided by the query's weight;
//   - missing: the share of the query's weight in terms no chunk of the
//     store holds at all (a question about what the documents never
//     mention);
//   - terms: log(1 + the number of query terms);
//   - focus: the largest share of the query's weight that two
//     consecutive sentences of the passage hold (an answer sits where the
//     question's terms come together);
//   - figures: the question asks for a number, a date or a time ("how
//     many", "when", ...) and those sentences hold a digit, or it does
//     not ask for one (0 when it asks and they hold none).
//
// The coefficients were fitted by logistic regression on the evaluation
// set (testdata/eval: 278 questions over 35 documents, 81 answered by no
// document), one sample per question, labelled positive when an
// answering document is among the three best passages: see
// calibrate_test.go, which measures the signal on folds held out of the
// fit, and prints a new fit with CORRAL_CALIBRATE=1.
var model = logistic{bias: -5.348, w: [nFeatures]float64{1.296, 1.178, -0.258, 1.616, 1.278, 1.257}}

// Threshold is the confidence below which a search is not answerable by
// default: the calibrated even chance. On the evaluation set it answers
// 90% of the answerable questions and refuses 23 of the 24 off-topic
// ones, but only about a fifth of the near misses (questions on the
// documents' topics, in their words, that they do not answer): telling
// those apart takes reading, which term statistics cannot do. An agent
// reads the passages it is handed, so a near miss costs it a reading; a
// refusal would hide the answer.
const Threshold = 0.5

// StrictThreshold is the lowest threshold (in steps of 0.05) at which at
// most 5% of the evaluation set's unanswerable questions, near misses
// included, are called answerable (3.7% in sample, 6.2% over ten folds
// held out): for a server that would rather refuse than risk a near miss
// (--retrieval-threshold 0.9), at the price of answering about 29% of
// the answerable questions.
const StrictThreshold = 0.9

const nFeatures = 6

// features of one passage for one query, in the order of the list above.
type features [nFeatures]float64

type logistic struct {
	bias float64
	w    [nFeatures]float64
}

func (f features) probability() float64 { return model.apply(f) }

func (m logistic) apply(f features) float64 {
	z := m.bias
	for i, v := range f {
		z += m.w[i] * v
	}
	return 1 / (1 + math.Exp(-z))
}

// weights are a query's terms weighed by one store's counts.
type weights struct {
	terms   []string
	avgdl   float64
	idf     map[string]float64
	total   float64 // the query's weight
	missing float64 // the weight of terms the store never holds
	figures bool    // the query asks for a number, a date or a time
}

// BM25's parameters, as FTS5 has them.
const (
	k1 = 1.2
	b  = 0.75
)

// weigh gives each query term BM25's idf in the store (the form that
// stays positive: log(1 + (N - n + 0.5) / (n + 0.5))).
func weigh(query string, qterms []string, st stats) weights {
	w := weights{terms: qterms, avgdl: st.avgdl, idf: map[string]float64{}, figures: asksFigures(query)}
	n := float64(st.n)
	for _, t := range qterms {
		df := float64(st.df[t])
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		w.idf[t] = idf
		w.total += idf
		if df == 0 {
			w.missing += idf
		}
	}
	return w
}

func (w weights) features(c candidate) features {
	var f features
	f[3] = math.Log1p(float64(len(w.terms)))
	if w.total == 0 {
		return f
	}
	tf := map[string]float64{}
	var dl float64
	terms(c.name+" "+c.heading+" "+c.text, func(t string) { tf[t]++; dl++ })
	var covered, bm25 float64
	for _, t := range w.terms {
		if n := tf[t]; n > 0 {
			covered += w.idf[t]
			bm25 += w.idf[t] * n * (k1 + 1) / (n + k1*(1-b+b*dl/max(w.avgdl, 1)))
		}
	}
	focus, window := w.focus(c.text)
	f[0] = covered / w.total
	// BM25 by the same idf, over the whole passage: FTS5's own score
	// (which orders the candidates) uses an idf that turns negative for
	// common terms in a small store, and so is not comparable across
	// stores of different sizes.
	f[1] = bm25 / w.total
	f[2] = w.missing / w.total
	f[4] = focus
	f[5] = 1
	if w.figures && !strings.ContainsFunc(window, unicode.IsDigit) {
		f[5] = 0
	}
	return f
}

// focus is the largest share of the query's weight that two consecutive
// sentences of text hold, and those sentences.
func (w weights) focus(text string) (float64, string) {
	best, window := 0.0, ""
	prev, prevText := map[string]bool{}, ""
	for _, s := range splitSentences(text) {
		cur := termSet(s)
		var covered float64
		for _, t := range w.terms {
			if cur[t] || prev[t] {
				covered += w.idf[t]
			}
		}
		if covered/w.total > best {
			best, window = covered/w.total, prevText+s
		}
		prev, prevText = cur, s
	}
	return best, window
}

// splitSentences cuts text at sentence ends and line breaks.
func splitSentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		end := c == '\n' || ((c == '.' || c == '?' || c == '!') && (i+1 == len(text) || text[i+1] == ' ' || text[i+1] == '\n'))
		if end {
			if i+1-start > 1 {
				out = append(out, text[start:i+1])
			}
			start = i + 1
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// asksFigures says whether a question asks for a quantity, a date or a
// time, whose answer is written with digits.
func asksFigures(q string) bool {
	q = " " + strings.ToLower(q) + " "
	for _, p := range []string{" how many ", " how much ", " how long ", " how often ", " how old ", " how big ", " how large ",
		" how soon ", " how far ", " when ", " what time ", " what date ", " which year ", " what year ", " what percentage ",
		" what size ", " what number ", " how fast "} {
		if strings.Contains(q, p) {
			return true
		}
	}
	return false
}
