package retrieval

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitHeadings(t *testing.T) {
	for _, tc := range []struct {
		name, doc, text string
		want            []string // the heading of each chunk, in order
	}{
		{
			name: "nested",
			doc:  "# Leave\n\nIntro.\n\n## Parental leave\n\nSixteen weeks.\n\n### Fathers\n\nAlso sixteen.\n\n## Sick leave\n\nTen days.\n",
			want: []string{"Leave", "Leave > Parental leave", "Leave > Parental leave > Fathers", "Leave > Sick leave"},
		},
		{
			name: "text before the first heading",
			doc:  "Preamble.\n\n# A\n\nBody.\n",
			want: []string{"", "A"},
		},
		{
			name: "a skipped level nests under the last",
			doc:  "# A\n\nOne.\n\n### C\n\nTwo.\n\n# B\n\nThree.\n",
			want: []string{"A", "A > C", "B"},
		},
		{
			name: "closing hashes and indentation",
			doc:  "  ## Title ##\n\nBody.\n",
			want: []string{"Title"},
		},
		{
			name: "not headings: no space, seven hashes, a bare hash",
			doc:  "#hashtag\n\n####### seven\n\n#\n",
			want: []string{""},
		},
		{
			name: "a heading in a fenced block is code",
			doc:  "# Real\n\n```sh\n# not a heading\necho hi\n```\n\nAfter the fence.\n",
			want: []string{"Real"},
		},
		{
			name: "a heading in a tilde fence is code",
			doc:  "# Real\n\n~~~\n## nor this\n~~~\n",
			want: []string{"Real"},
		},
		{
			name: "an unclosed fence runs to the end",
			doc:  "# Real\n\n```\n# still code\n",
			want: []string{"Real"},
		},
		{
			name: "not Markdown: a hash is text",
			doc:  "# a comment\n\nx = 1\n",
			want: []string{""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := "doc.md"
			if tc.name == "not Markdown: a hash is text" {
				file = "script.py"
			}
			var got []string
			for _, c := range Split(file, tc.doc) {
				got = append(got, c.Heading)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("headings of Split(%q, %q) = %q, want %q", file, tc.doc, got, tc.want)
			}
		})
	}
}

func TestSplitFenceKeptWhole(t *testing.T) {
	// Fenced blocks just under the target, just over it, and just under
	// the limit: each must be in one chunk whole, whatever is around it.
	for _, size := range []int{chunkTarget - 50, chunkTarget + 100, chunkLimit - 120, chunkLimit - 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			fence := "```go\n"
			for i := 0; len(fence) < size-4; i++ {
				fence += fmt.Sprintf("x%d := %d\n", i, i)
			}
			fence += "```"
			if len(fence) > chunkLimit {
				t.Fatalf("the fence is %d bytes, over the limit", len(fence))
			}
			before := strings.Repeat("Some prose before the code. ", 20)
			doc := "# Code\n\n" + before + "\n\n" + fence + "\n\nAnd prose after it.\n"
			whole := 0
			for _, c := range Split("doc.md", doc) {
				if strings.Contains(c.Text, fence) {
					whole++
				}
			}
			if whole == 0 {
				t.Errorf("no chunk holds the %d-byte fence whole: %q", len(fence), texts(Split("doc.md", doc)))
			}
		})
	}
}

func texts(cs []Chunk) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Text
	}
	return out
}

func TestSplitOverlap(t *testing.T) {
	// Paragraphs of distinct numbered words, so a chunk's beginning can be
	// found in the one before.
	var paras []string
	for p := 0; p < 12; p++ {
		var words []string
		for w := 0; w < 40; w++ {
			words = append(words, fmt.Sprintf("p%dw%d", p, w))
		}
		paras = append(paras, strings.Join(words, " ")+".")
	}
	for _, tc := range []struct{ name, file, doc string }{
		{"markdown section", "doc.md", "# One section\n\n" + strings.Join(paras, "\n\n")},
		{"plain text", "notes.txt", strings.Join(paras, "\n\n")},
		{"one long line", "notes.txt", strings.Join(paras, " ")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := Split(tc.file, tc.doc)
			if len(cs) < 3 {
				t.Fatalf("Split gave %d chunks, want several", len(cs))
			}
			for i := 1; i < len(cs); i++ {
				prev, cur := cs[i-1].Text, cs[i].Text
				// The next begins with a run of the previous one's last
				// words: its first word is among them, and the previous
				// chunk ends with what comes before the blank line.
				first := strings.Fields(cur)[0]
				head, _, _ := strings.Cut(cur, "\n\n")
				head = strings.TrimSpace(head)
				if !strings.HasSuffix(prev, head) {
					t.Errorf("chunk %d begins with %q, which is not in chunk %d (%q)", i, head, i-1, tail(prev, 300))
				}
				if strings.Index(prev, first) < len(prev)-chunkOverlap-len(first)-1 {
					t.Errorf("chunk %d begins with %q, found in chunk %d outside its last %d bytes", i, first, i-1, chunkOverlap)
				}
			}
		})
	}
}

func TestSplitSectionsDoNotOverlap(t *testing.T) {
	long := strings.Repeat("Words of the first section. ", 30)
	cs := Split("doc.md", "# A\n\n"+long+"\n\n# B\n\nSecond section alone.\n")
	last := cs[len(cs)-1]
	if last.Heading != "B" || last.Text != "Second section alone." {
		t.Errorf("the last chunk is %q under %q, want only the second section's text", last.Text, last.Heading)
	}
}

func TestSplitPlainBlocks(t *testing.T) {
	// Source and text have no headings: blank lines separate blocks, and
	// small blocks are packed together.
	src := "package main\n\n// A comment.\nfunc main() {\n\tprintln(\"# not a heading\")\n}\n"
	for _, tc := range []struct {
		name, file, doc string
		want            []string
	}{
		{"go source", "main.go", src, []string{"package main\n\n// A comment.\nfunc main() {\n\tprintln(\"# not a heading\")\n}"}},
		{"text", "a.txt", "one\ntwo\n\n\n\nthree", []string{"one\ntwo\n\nthree"}},
		{"crlf text", "a.txt", "one\r\ntwo\r\n\r\nthree\r\n", []string{"one\ntwo\n\nthree"}},
		{"crlf markdown", "a.md", "# T\r\n\r\nbody\r\n", []string{"body"}},
		{"empty", "a.md", "", nil},
		{"whitespace", "a.md", " \n\t\n\r\n  ", nil},
		{"whitespace text", "a.txt", "\n\n \n\n", nil},
		{"headings only", "a.md", "# A\n\n## B\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := texts(Split(tc.file, tc.doc))
			if len(got) == 0 {
				got = nil
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
				t.Errorf("Split(%q, %q) = %q, want %q", tc.file, tc.doc, got, tc.want)
			}
			for _, c := range Split(tc.file, tc.doc) {
				if strings.Contains(c.Text, "\r") || strings.Contains(c.Heading, "\r") {
					t.Errorf("chunk %q under %q keeps a carriage return", c.Text, c.Heading)
				}
			}
		})
	}
}

func TestSplitPlainBlocksSplitLarge(t *testing.T) {
	// Two blocks that together pass the target are two chunks, the
	// second beginning with the end of the first.
	a := strings.Repeat("alpha ", 100)
	b := strings.Repeat("beta ", 100)
	cs := Split("main.go", a+"\n\n"+b)
	if len(cs) != 2 {
		t.Fatalf("Split gave %d chunks, want 2: %q", len(cs), texts(cs))
	}
	if !strings.HasPrefix(cs[1].Text, "alpha") || !strings.HasSuffix(cs[1].Text, "beta") {
		t.Errorf("the second chunk is %q, want the end of the first block then the second", cs[1].Text)
	}
}

// TestSplitProperties generates Markdown, text and source (long lines,
// unicode, no newlines at all, fences, headings, CRLF) and checks what
// must hold of every split: no chunk past chunkLimit, valid UTF-8, no
// empty chunk, ords in order, and no text lost: every word of the input
// is whole in some chunk (or heading), and a run of letters too long for
// any chunk is there in full across them.
func TestSplitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 15))
	words := []string{"leave", "week", "Zürich", "naïve", "日本語", "данные", "emoji😀", "x", "deploy", "42", "ß", "ǅ",
		"a-very-long-word-without-any-break-at-all-" + strings.Repeat("z", 60)}
	const run = "長"
	gen := func() (string, string) {
		var b strings.Builder
		file := []string{"doc.md", "notes.txt", "main.go"}[r.IntN(3)]
		noNewlines := r.IntN(5) == 0
		word := func() string { return words[r.IntN(len(words))] }
		for n := r.IntN(600); n > 0; n-- {
			switch k := r.IntN(40); {
			case k == 0 && !noNewlines:
				b.WriteString("\n\n" + strings.Repeat("#", 1+r.IntN(7)) + " " + word() + "\n\n" + word() + " ")
			case k == 1 && !noNewlines:
				b.WriteString("\n\n```\n# code\n" + word() + "\n") // a heading when it closes a fence
			case k == 2 && !noNewlines:
				b.WriteString("\n```\n\n")
			case k == 3 && !noNewlines:
				b.WriteString([]string{"\n", "\n\n", "\r\n", "\r\n\r\n"}[r.IntN(4)])
			case k == 4:
				// letters with no space, up to three chunks long: cut
				// inside, wherever it falls
				b.WriteString(strings.Repeat(run, r.IntN(1500)) + " ")
			default:
				b.WriteString(word() + " ")
			}
		}
		return file, b.String()
	}
	for i := 0; i < 1000; i++ {
		file, doc := gen()
		cs := Split(file, doc)
		var all strings.Builder
		runs := 0
		for j, c := range cs {
			if len(c.Text) > chunkLimit {
				t.Fatalf("case %d (%s): chunk %d is %d bytes, over %d", i, file, j, len(c.Text), chunkLimit)
			}
			if !utf8.ValidString(c.Text) {
				t.Fatalf("case %d (%s): chunk %d is not valid UTF-8: %q", i, file, j, c.Text)
			}
			if strings.TrimSpace(c.Text) == "" {
				t.Fatalf("case %d (%s): chunk %d is empty", i, file, j)
			}
			if c.Ord != j {
				t.Fatalf("case %d (%s): chunk %d has Ord %d", i, file, j, c.Ord)
			}
			all.WriteString(c.Heading + "\n" + c.Text + "\n")
			runs += strings.Count(c.Text, run) // overlap repeats some: at least all
		}
		got := all.String()
		for _, w := range strings.Fields(strings.ReplaceAll(doc, "#", " ")) {
			if w == "```" || strings.Contains(w, run) {
				continue
			}
			if !strings.Contains(got, w) {
				t.Fatalf("case %d (%s): %q is in no chunk", i, file, w)
			}
		}
		if want := strings.Count(doc, run); runs < want {
			t.Fatalf("case %d (%s): the chunks hold %d of the %d letters of the long runs", i, file, runs, want)
		}
	}
}

// TestSplitKeepsAllText checks the stronger form of "nothing is lost" on
// a document of distinct words: each appears, in order, in the chunks.
func TestSplitKeepsAllText(t *testing.T) {
	var b strings.Builder
	var want []string
	for s := 0; s < 5; s++ {
		fmt.Fprintf(&b, "## S%d\n\n", s)
		for p := 0; p < 8; p++ {
			for w := 0; w < 30+p*40; w++ { // the last paragraphs are longer than a chunk
				word := fmt.Sprintf("s%dp%dw%d", s, p, w)
				want = append(want, word)
				b.WriteString(word + " ")
			}
			b.WriteString("\n\n")
		}
	}
	seen := map[string]bool{}
	for _, c := range Split("doc.md", b.String()) {
		for _, w := range strings.Fields(c.Text) {
			seen[w] = true
		}
	}
	for _, w := range want {
		if !seen[w] {
			t.Fatalf("%q is in no chunk", w)
		}
	}
}
