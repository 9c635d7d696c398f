package retrieval

import (
	"strings"
	"sync"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// terms splits text into the index's terms: words and numbers, lower-cased,
// English stop words left out, each stemmed (Snowball English), so that
// "deployments" finds "deploy". Text and queries go through the same
// function, in Go, before FTS5 sees them: FTS5 then only splits on the
// spaces between terms, and the terms it counts (its vocabulary, for the
// confidence signal) are exactly the ones a query asks for.
func terms(text string, each func(term string)) {
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := strings.ToLower(text[start:end])
		start = -1
		if len(w) > maxTermBytes || english.IsStopWord(w) {
			return
		}
		if isASCIILetters(w) {
			w = stem(w)
		}
		if w != "" {
			each(w)
		}
	}
	for i, r := range text {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		flush(i)
	}
	flush(len(text))
}

// stems caches Snowball's stems: stemming is most of the cost of
// indexing, and a language has far fewer words than a corpus has. The
// cache is dropped whole when it reaches stemsMax words, so it stays
// bounded whatever is indexed.
var stems struct {
	sync.RWMutex
	m map[string]string
}

const stemsMax = 1 << 17

func stem(w string) string {
	stems.RLock()
	s, ok := stems.m[w]
	stems.RUnlock()
	if ok {
		return s
	}
	s = english.Stem(w, false)
	stems.Lock()
	if stems.m == nil || len(stems.m) >= stemsMax {
		stems.m = make(map[string]string, 1024)
	}
	stems.m[strings.Clone(w)] = s
	stems.Unlock()
	return s
}

// maxTermBytes leaves out what is not a word (a hash, base64), which would
// only bloat the index.
const maxTermBytes = 40

func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// indexText is text as the full-text index stores it: its terms, joined
// by spaces.
func indexText(text string) string {
	var b strings.Builder
	terms(text, func(t string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t)
	})
	return b.String()
}

// filler are words of how people ask, not of what they ask about
// (stemmed): left out of queries, where as missing terms they would only
// lower the confidence of a question the documents answer.
var filler = map[string]bool{
	"get": true, "got": true, "need": true, "want": true, "happen": true, "know": true, "tell": true,
	"pleas": true, "anyon": true, "someon": true, "someth": true, "thing": true, "way": true,
	"would": true, "could": true, "may": true, "might": true, "must": true, "shall": true,
	"can": true, "also": true, "ever": true, "actual": true, "realli": true, "exact": true,
}

// measures are the words that follow "how" in a question about a
// quantity or a duration ("how long does a rollback take?"): they say
// that a figure is asked for (asksFigures), not what about, and the
// answer seldom repeats them ("Rollbacks take about 4 minutes"), so as
// terms they would only count against the passage that answers.
// Dimensions ("how tall", "how old", "how big") are left in: an answer
// often names the dimension it gives ("30 m tall").
var measures = map[string]bool{"long": true, "many": true, "much": true, "often": true, "soon": true, "far": true}

// queryTerms is a query's distinct terms, in order of first appearance,
// at most maxQueryTerms, without filler and without the measure word of
// a "how long" question.
func queryTerms(q string) []string {
	var out []string
	seen := map[string]bool{}
	terms(dropMeasures(q), func(t string) {
		if !seen[t] && !filler[t] && len(out) < maxQueryTerms {
			seen[t] = true
			out = append(out, t)
		}
	})
	return out
}

// dropMeasures blanks the measure word after each "how" of q.
func dropMeasures(q string) string {
	b := []byte(q)
	prev := ""
	wordStart := -1
	word := func(end int) {
		if wordStart < 0 {
			return
		}
		w := strings.ToLower(q[wordStart:end])
		if prev == "how" && measures[w] {
			for i := wordStart; i < end; i++ {
				b[i] = ' '
			}
		}
		prev, wordStart = w, -1
	}
	for i, r := range q {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			if wordStart < 0 {
				wordStart = i
			}
			continue
		}
		word(i)
	}
	word(len(q))
	return string(b)
}

// maxQueryTerms bounds the work one query can ask for.
const maxQueryTerms = 32

// termSet is the distinct terms of a text.
func termSet(text string) map[string]bool {
	s := map[string]bool{}
	terms(text, func(t string) { s[t] = true })
	return s
}
