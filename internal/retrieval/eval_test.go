package retrieval

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"corral"
)

// The figures an agent sees (issue 29): does the passage that answers a
// question come back among the DefaultK an agent is handed (recall@5),
// and how often is a question no document answers called answerable
// (false-answerable)? Both are measured on the evaluation set
// (testdata/eval), by BM25 alone and fused with the fake embedder's
// vectors, and TestRetrievalFloor holds them to a floor.

// topK is how many passages an agent is handed.
const topK = DefaultK

// figures are one evaluation's share of questions.
type figures struct {
	recall5, recallDoc5 float64 // answerable: an answering passage / document in the top 5
	answered            float64 // answerable: called answerable, with an answering passage in the top 5
	falseAnswerable     float64 // unanswerable: called answerable
	precision           float64 // of those called answerable, the share with an answering passage in the top 5
}

func (f figures) String() string {
	return fmt.Sprintf("recall@5 %.3f (document %.3f), answered %.3f, false-answerable %.3f, answerable-precision %.3f",
		f.recall5, f.recallDoc5, f.answered, f.falseAnswerable, f.precision)
}

// measure scores qs with model m at threshold, keeping each question's
// ranking (BM25's, or the fused one) and rescoring only the confidence.
func measure(qs []labelled, m logistic, threshold float64) figures {
	var f figures
	var nAns, nUn, called, calledRight float64
	for _, l := range qs {
		conf := 0.0
		for _, s := range l.found {
			conf = max(conf, m.apply(s.f))
		}
		hit, hitDoc := false, false
		for _, s := range l.found[:min(topK, len(l.found))] {
			hit = hit || l.answers(s)
			hitDoc = hitDoc || l.answersDoc(s)
		}
		yes := conf >= threshold
		if yes {
			called++
		}
		if !l.q.Answerable {
			nUn++
			if yes {
				f.falseAnswerable++
			}
			continue
		}
		nAns++
		if hit {
			f.recall5++
		}
		if hitDoc {
			f.recallDoc5++
		}
		if hit && yes {
			f.answered++
			calledRight++
		}
	}
	f.recall5 /= max(nAns, 1)
	f.recallDoc5 /= max(nAns, 1)
	f.answered /= max(nAns, 1)
	f.falseAnswerable /= max(nUn, 1)
	f.precision = calledRight / max(called, 1)
	return f
}

// maxFalseAnswerable is the share of unanswerable questions a threshold
// may call answerable.
const maxFalseAnswerable = 0.05

// strictThreshold is the lowest threshold, in steps of 0.05, at which m
// calls at most maxFalseAnswerable of the unanswerable questions of qs
// answerable.
func strictThreshold(qs []labelled, m logistic) float64 {
	for th := 0.5; th < 0.99; th += 0.05 {
		th = math.Round(th*100) / 100
		if measure(qs, m, th).falseAnswerable <= maxFalseAnswerable {
			return th
		}
	}
	return 0.99
}

// halves splits the set by question number: odd (q001, q003, ...) and even.
func halves(all []labelled) (odd, even []labelled) {
	for i, l := range all {
		if i%2 == 0 {
			odd = append(odd, l)
		} else {
			even = append(even, l)
		}
	}
	return odd, even
}

// evalReport is the evaluation's figures for one ranker: the shipped
// model at Threshold and StrictThreshold over the whole set (in sample),
// and two-fold held out: fitted, and a strict threshold chosen, on one
// half, measured on the other.
type evalReport struct {
	shipped, strict figures
	held            [2]struct {
		threshold     float64
		atDefault, at figures
		fittedOn, on  string
	}
}

func evalRun(all []labelled) evalReport {
	var r evalReport
	r.shipped, r.strict = measure(all, model, Threshold), measure(all, model, StrictThreshold)
	odd, even := halves(all)
	for i, split := range [2][2][]labelled{{odd, even}, {even, odd}} {
		m := fit(samples(split[0]))
		th := strictThreshold(split[0], m)
		h := &r.held[i]
		h.threshold, h.atDefault, h.at = th, measure(split[1], m, Threshold), measure(split[1], m, th)
		h.fittedOn, h.on = [2]string{"odd", "even"}[i], [2]string{"even", "odd"}[i]
	}
	return r
}

func (r evalReport) log(logf func(string, ...any), ranker string) {
	logf("%s, shipped, threshold %.2f (in sample): %v", ranker, Threshold, r.shipped)
	logf("%s, shipped, strict threshold %.2f (in sample): %v", ranker, StrictThreshold, r.strict)
	for _, h := range r.held {
		logf("%s, fitted on %s, measured on %s, threshold %.2f: %v", ranker, h.fittedOn, h.on, Threshold, h.atDefault)
		logf("%s, fitted on %s, strict threshold %.2f chosen there, measured on %s: %v", ranker, h.fittedOn, h.threshold, h.on, h.at)
	}
}

// TestRetrievalFloor fails when the ranking or the confidence regresses
// on the evaluation set: recall@5 at least 0.9, in sample and on each
// held-out half; at most 5% of the unanswerable questions called
// answerable at the strict threshold in sample, and at most 10% on each
// held-out half with a threshold chosen on the other. Issue 29 asked for
// at most 5% at a threshold that still answers; at StrictThreshold about
// 29% of the answerable questions are answered: the set's near misses
// (questions on the documents' topics, in their words, that none
// answers; some hold every term of the passage they find) keep a better
// trade out of reach of term statistics. The figures are in
// docs/benchmarks.md.
func TestRetrievalFloor(t *testing.T) {
	x, qs := evalIndex(t, false)
	r := evalRun(retrieveAll(t, x, qs, nil))
	r.log(t.Logf, "bm25")
	checks := []floor{
		{"shipped recall@5", r.shipped.recall5, 0.9, false},
		{"shipped false-answerable at the strict threshold", r.strict.falseAnswerable, maxFalseAnswerable, true},
	}
	for _, h := range r.held {
		checks = append(checks,
			floor{"recall@5 on the " + h.on + " half", h.at.recall5, 0.9, false},
			floor{"false-answerable on the " + h.on + " half at the threshold chosen on the " + h.fittedOn, h.at.falseAnswerable, 0.10, true})
	}
	checkFloors(t, checks)
}

// floor is one figure's bound.
type floor struct {
	what      string
	got, want float64
	atMost    bool
}

func checkFloors(t *testing.T, checks []floor) {
	t.Helper()
	for _, c := range checks {
		if (c.atMost && c.got > c.want) || (!c.atMost && c.got < c.want) {
			t.Errorf("%s: %.3f, want %s %.2f", c.what, c.got, map[bool]string{true: "at most", false: "at least"}[c.atMost], c.want)
		}
	}
}

// TestRetrievalObviousQuestions is issue 29's complaint measured on the
// set's second part (q161 on: five documents and 118 questions written
// for it, without looking at the ranker, with plurals, compounds and
// "how long / how many / when" questions): with the model fitted on the
// first part only, so the second is held out whole, the default
// threshold answers at least 90% of its answerable questions from the
// right passage and refuses every off-topic one.
func TestRetrievalObviousQuestions(t *testing.T) {
	x, qs := evalIndex(t, false)
	all := retrieveAll(t, x, qs, nil)
	var first, second []labelled
	for _, l := range all {
		if l.q.ID <= "q160" {
			first = append(first, l)
		} else {
			second = append(second, l)
		}
	}
	m := fit(samples(first))
	f := measure(second, m, Threshold)
	var off []labelled
	for _, l := range second {
		if offTopic(l.q) {
			off = append(off, l)
		}
	}
	fo := measure(off, m, Threshold)
	t.Logf("second part (%d questions), fitted on the first (%d), threshold %.2f: %v; off-topic called answerable %.3f",
		len(second), len(first), Threshold, f, fo.falseAnswerable)
	if len(second) < 50 || len(off) == 0 {
		t.Fatalf("the second part has %d questions, %d off-topic", len(second), len(off))
	}
	checkFloors(t, []floor{
		{"recall@5", f.recall5, 0.9, false},
		{"answered", f.answered, 0.9, false},
		{"off-topic called answerable", fo.falseAnswerable, 0, true},
	})
}

// TestRetrievalHowLong is issue 29's example: "how long" asks for a
// duration, which the answer gives in figures without the word "long",
// and a plural finds its singular.
func TestRetrievalHowLong(t *testing.T) {
	x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	addDoc(t, x, "doc_deploys", "deploys.md", "# Deploys\n\n## Rollback\n\nTo roll back a deploy, run `shipyard rollback api --to previous`. "+
		"Rollbacks take about 4 minutes.\n\n## Canary\n\nA canary gets 5% of the traffic for 20 minutes before the rest of the fleet.\n", false)
	addDoc(t, x, "doc_leave", "leave.md", leaveDoc, false)
	addDoc(t, x, "doc_expenses", "expenses.md", expensesDoc, false)
	for _, q := range []string{
		"How do I roll back a deploy?",
		"how long does a rollback take?",
		"how long do rollbacks take",
	} {
		t.Run(q, func(t *testing.T) {
			r := search(t, []Scope{{x, corral.SourcePrivate}}, Query{Text: q})
			if !r.Answerable || len(r.Items) == 0 || r.Items[0].DocumentID != "doc_deploys" {
				t.Errorf("answerable %v (confidence %v), passages %v; want answerable from doc_deploys", r.Answerable, r.Confidence, docIDs(r))
			}
		})
	}
}

// BenchmarkRetrievalEval reports the evaluation's figures, by BM25 alone
// and fused with the fake embedder (modeltest.Embedding: hashed words
// and trigrams, not a language model, so the fused figures say the
// fusion works, not how a real embedder would do):
//
//	go test -run '^$' -bench RetrievalEval -benchtime 1x ./internal/retrieval/
func BenchmarkRetrievalEval(b *testing.B) {
	for _, ranker := range []string{"bm25", "fused"} {
		b.Run(ranker, func(b *testing.B) {
			x, qs := evalIndex(b, ranker == "fused")
			var embed Embedder
			if ranker == "fused" {
				embed = embedder
			}
			var r evalReport
			for i := 0; i < b.N; i++ {
				r = evalRun(retrieveAll(b, x, qs, embed))
			}
			r.log(b.Logf, ranker)
			b.ReportMetric(r.shipped.recall5, "recall@5")
			b.ReportMetric(r.shipped.falseAnswerable, "false-ans@default")
			b.ReportMetric(r.shipped.answered, "answered@default")
			b.ReportMetric(r.strict.falseAnswerable, "false-ans@strict")
			b.ReportMetric(r.strict.answered, "answered@strict")
			b.ReportMetric(r.strict.precision, "precision@strict")
			b.ReportMetric((r.held[0].at.falseAnswerable+r.held[1].at.falseAnswerable)/2, "held-false-ans@strict")
			b.ReportMetric((r.held[0].at.answered+r.held[1].at.answered)/2, "held-answered@strict")
			b.ReportMetric((r.held[0].at.recall5+r.held[1].at.recall5)/2, "held-recall@5")
		})
	}
}

// TestQueryTermsMeasures: the word after "how" that asks for a quantity
// is not a term; a dimension, or the same word elsewhere, is.
func TestQueryTermsMeasures(t *testing.T) {
	for _, tc := range []struct{ q, want string }{
		{"how long does a rollback take?", "rollback take"},
		{"How many replicas run?", "replica run"},
		{"How tall is the tower?", "tall tower"},
		{"a long rollback", "long rollback"},
	} {
		if got := strings.Join(queryTerms(tc.q), " "); got != tc.want {
			t.Errorf("queryTerms(%q) = %q, want %q", tc.q, got, tc.want)
		}
	}
}
