package retrieval

import (
	"strings"
	"sync"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// terms splits text into the index's terms: words and numbers, lower-cased,
// English stop words left out, each stemmed (Snowball English), so that
// "deployments" finds "deploy". A phrasal verb written apart or with a
// hyphen is one term with its compound noun ("roll back", "rolled-back"
// and "rollbacks" are all "rollback": compounds). Text and queries go
// through the same function, in Go, before FTS5 sees them: FTS5 then only
// splits on the spaces between terms, and the terms it counts (its
// vocabulary, for the confidence signal) are exactly the ones a query
// asks for.
func terms(text string, each func(term string)) {
	var held, heldStem string // the last word's term, not yet given (it may join the next word), and its stem
	joinable := false         // only spaces and hyphens lie between the last word and this one
	give := func() {
		if held != "" {
			each(held)
		}
		held, heldStem = "", ""
	}
	word := func(w string) {
		w = strings.ToLower(w)
		if joinable && heldStem != "" && seconds[w] {
			if c, ok := compounds[heldStem+" "+w]; ok {
				held, heldStem = "", ""
				each(c)
				return
			}
		}
		give()
		switch {
		case len(w) > maxTermBytes:
		case english.IsStopWord(w):
			heldStem = w // "on" of "on call"
		case isASCIILetters(w):
			held = stem(w)
			heldStem = held
		default:
			held = w
		}
	}
	start := -1
	for i, r := range text {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			word(text[start:i])
			start = -1
			joinable = true
		}
		if r != ' ' && r != '-' && r != '\t' {
			joinable = false
		}
	}
	if start >= 0 {
		word(text[start:])
	}
	give()
}

// compounds are the phrasal verbs (and a few nouns) that a text writes
// apart, hyphenated or as one word, keyed by the first word's stem and
// the second word, to the one word's stem: "set up", "setting-up",
// "set-up" and "setup" are one term. The list is closed: joining every
// pair of words would double the index, and these are the ones
// documentation about software and work writes both ways. seconds are
// their second words, looked up before a pair is put together.
var compounds, seconds = func() (map[string]string, map[string]bool) {
	m, sec := map[string]string{}, map[string]bool{}
	for _, pair := range []string{
		"roll back", "roll out", "back up", "set up", "log in", "log out", "sign in", "sign up", "sign out",
		"check in", "check out", "shut down", "start up", "clean up", "look up", "fail over", "fall back",
		"hand off", "hand over", "take over", "tear down", "break down", "work around", "walk through",
		"lock out", "time out", "opt in", "opt out", "on call", "e mail", "web site", "file name",
		"user name", "host name", "time zone", "week end", "pay slip", "down time", "up time", "work flow",
		"check list", "key pair", "pass phrase", "hot fix", "road map",
	} {
		first, second, _ := strings.Cut(pair, " ")
		m[stem(first)+" "+second] = stem(first + second)
		sec[second] = true
	}
	return m, sec
}()

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
