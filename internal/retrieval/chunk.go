package retrieval

import (
	"path"
	"strings"
	"unicode/utf8"
)

// Chunk is one passage of a document as it is indexed and retrieved.
type Chunk struct {
	Ord     int    // its place in the document, from 0
	Heading string // the Markdown headings it sits under, "Leave > Parental leave"
	Text    string
}

// Sizes of a chunk, in bytes: passages are packed up to target, never past
// limit (a longer block is cut at line ends, then at a rune), and a chunk
// that follows another in the same section begins with the end of the one
// before, up to overlap, so a fact split across the border is whole in one.
const (
	chunkTarget  = 900
	chunkLimit   = 1500
	chunkOverlap = 200
)

// block is a unit chunking never splits if it fits: a paragraph, a list,
// a fenced code block.
type block struct {
	heading string
	text    string
}

// Split cuts a document into chunks by its structure: Markdown headings
// start sections, and within a section paragraphs, lists and fenced code
// blocks are packed into chunks of about chunkTarget bytes, each beginning
// with the last part of the one before. Other text (and source code) has
// no headings: blank lines separate its blocks.
func Split(name, text string) []Chunk {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	var blocks []block
	if markdown(name) {
		blocks = markdownBlocks(text)
	} else {
		blocks = plainBlocks(text)
	}
	var out []Chunk
	var cur strings.Builder
	heading, last := "", ""
	emit := func() {
		if strings.TrimSpace(cur.String()) != "" {
			out = append(out, Chunk{Ord: len(out), Heading: heading, Text: strings.TrimSpace(cur.String())})
		}
		cur.Reset()
	}
	for _, b := range blocks {
		for _, piece := range pieces(b.text) {
			switch {
			case b.heading != heading:
				emit()
				heading, last = b.heading, ""
			case cur.Len() > 0 && cur.Len()+len(piece)+2 > chunkTarget:
				emit()
				// A block kept whole may leave less room than the
				// overlap: the chunk stays within the limit.
				if room := min(chunkOverlap, chunkLimit-len(piece)-2); last != "" && room > 0 {
					if t := tail(last, room); t != "" {
						cur.WriteString(t)
						cur.WriteString("\n\n")
					}
				}
			}
			if cur.Len() > 0 && !strings.HasSuffix(cur.String(), "\n\n") {
				cur.WriteString("\n\n")
			}
			cur.WriteString(piece)
			last = piece
		}
	}
	emit()
	return out
}

func markdown(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown", ".mdx":
		return true
	}
	return false
}

// markdownBlocks reads headings (ATX: "# ", "## ", ...), fenced code
// blocks and blank-line-separated paragraphs. A "#" inside a fence is code.
func markdownBlocks(text string) []block {
	var out []block
	var stack []string // the heading path
	var para []string
	fence := ""
	flush := func() {
		if len(para) > 0 {
			out = append(out, block{heading: strings.Join(stack, " > "), text: strings.Join(para, "\n")})
			para = nil
		}
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			para = append(para, line)
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
				flush()
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			flush()
			fence = f
			para = append(para, line)
			continue
		}
		if level, title := headingOf(trimmed); level > 0 {
			flush()
			if level > len(stack) {
				level = len(stack) + 1
			}
			stack = append(stack[:level-1], title)
			continue
		}
		if trimmed == "" {
			flush()
			continue
		}
		para = append(para, line)
	}
	flush()
	return out
}

func fenceOf(line string) string {
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(line, f) {
			return f
		}
	}
	return ""
}

func headingOf(line string) (int, string) {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (len(line) > n && line[n] != ' ' && line[n] != '\t') {
		return 0, ""
	}
	title := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[n:]), "#"))
	if title == "" {
		return 0, ""
	}
	return n, title
}

func plainBlocks(text string) []block {
	var out []block
	for _, p := range strings.Split(text, "\n\n") {
		if strings.TrimSpace(p) != "" {
			out = append(out, block{text: strings.Trim(p, "\n")})
		}
	}
	return out
}

// pieces is a block as chunks take it: whole when it fits in a chunk,
// else cut to leave room for the overlap before each piece.
func pieces(s string) []string {
	if len(s) <= chunkLimit {
		return []string{s}
	}
	return cut(s, chunkLimit-chunkOverlap-2)
}

// cut splits a block longer than max at line ends, and a line longer than
// max at its last space in the second half of max, or failing that at a
// rune boundary (a cut word would be found by neither half).
func cut(s string, max int) []string {
	if len(s) <= max {
		return []string{s}
	}
	var out []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		for len(line) > max {
			if cur.Len() > 0 {
				out = append(out, strings.TrimRight(cur.String(), "\n"))
				cur.Reset()
			}
			i := max
			for i > 0 && !utf8.RuneStart(line[i]) {
				i--
			}
			if sp := strings.LastIndexByte(line[:i], ' '); sp >= max/2 {
				i = sp + 1
			}
			out = append(out, line[:i])
			line = line[i:]
		}
		if cur.Len()+len(line) > max {
			out = append(out, strings.TrimRight(cur.String(), "\n"))
			cur.Reset()
		}
		cur.WriteString(line)
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, strings.TrimRight(cur.String(), "\n"))
	}
	return out
}

// tail is the end of s, at most n bytes, starting at a word.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexAny(s, " \n"); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
