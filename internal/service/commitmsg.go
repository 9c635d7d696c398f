package service

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"corral"
)

// Bounds of an applied change set's commit message: a subject a log
// shows on one line, and a body a person reads at a glance.
const (
	maxSubject     = 72   // runes, the ellipsis included
	maxBodyLines   = 20   // of the agent's answer
	maxBodyBytes   = 2048 // of the agent's answer
	maxFilesListed = 50
	// maxThreadPages bounds how far back in the thread the request and
	// answer of a run are looked for (pages of maxThreadPage messages).
	maxThreadPages = 10
	maxThreadPage  = 1000
)

// changeSetMessage is what the commit of an applied change set says: the
// subject is the request that started the run, on one line; the body the
// agent's final answer and the files the commit changes, each bounded;
// then the trailers. Without a request, the subject names the change set
// and the run. Only the person's own request, the agent's answer and the
// paths go in, each cleaned of control characters.
type changeSetMessage struct {
	Request, Answer string
	RunID           string // "" when no run made the change set
	ChangeSetID     string
	ApprovedBy      string
	Entries         []corral.ChangeEntry // those this commit applies
}

func (m changeSetMessage) String() string {
	run := m.RunID
	if run == "" {
		run = "(none)"
	}
	var b strings.Builder
	subject := commitSubject(m.Request)
	if subject == "" {
		subject = fmt.Sprintf("Apply change set %s of run %s", m.ChangeSetID, run)
	}
	b.WriteString(subject + "\n\n")
	if body := commitBody(m.Answer); body != "" {
		b.WriteString(body + "\n\n")
	}
	if files := commitFiles(m.Entries); files != "" {
		b.WriteString(files + "\n\n")
	}
	fmt.Fprintf(&b, "Corral-Run: %s\nCorral-Change-Set: %s\nApproved-By: %s\n", run, m.ChangeSetID, m.ApprovedBy)
	return b.String()
}

// commitSubject is the first line of request that says something, its
// whitespace collapsed, at most maxSubject runes (an ellipsis ends one
// that was cut, at a word's end where it can); "" when it says nothing.
func commitSubject(request string) string {
	for _, line := range strings.Split(cleanText(request), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) <= maxSubject {
			return line
		}
		r := []rune(line)
		cut := maxSubject - 1
		// At the end of a word when one ends in the last third.
		if r[cut] != ' ' {
			for i := cut - 1; i > maxSubject*2/3; i-- {
				if r[i] == ' ' {
					cut = i
					break
				}
			}
		}
		return strings.TrimRightFunc(string(r[:cut]), unicode.IsSpace) + "…"
	}
	return ""
}

// commitBody is the answer as a body: its first maxBodyLines lines and
// at most maxBodyBytes, trailing spaces and runs of blank lines dropped,
// with a line saying so when more was left out.
func commitBody(answer string) string {
	var lines []string
	blank, cut, size := false, false, 0
	for _, line := range strings.Split(cleanText(answer), "\n") {
		line = strings.TrimRightFunc(line, unicode.IsSpace)
		if line == "" {
			blank = len(lines) > 0
			continue
		}
		if blank {
			line = "\n" + line // a paragraph break, kept as one blank line
			blank = false
		}
		if len(lines) == maxBodyLines || size+len(line) > maxBodyBytes {
			cut = true
			if len(lines) == 0 { // one very long first line: its start
				lines = append(lines, truncateUTF8(line, maxBodyBytes))
			}
			break
		}
		lines = append(lines, line)
		size += len(line) + 1
	}
	if cut {
		lines = append(lines, "(the answer goes on in the run)")
	}
	return strings.Join(lines, "\n")
}

// commitFiles lists the entries a commit applies, at most maxFilesListed
// of them, then how many more there are.
func commitFiles(entries []corral.ChangeEntry) string {
	if len(entries) == 0 {
		return ""
	}
	lines := []string{"Files:"}
	for i, e := range entries {
		if i == maxFilesListed {
			lines = append(lines, fmt.Sprintf("  and %d more", len(entries)-i))
			break
		}
		op := map[string]string{"create": "added", "modify": "modified", "delete": "deleted"}[e.Op]
		if op == "" {
			op = "changed"
		}
		lines = append(lines, fmt.Sprintf("  %-8s %s", op, strings.ReplaceAll(cleanText(e.Path), "\n", " ")))
	}
	return strings.Join(lines, "\n")
}

// cleanText keeps text fit for a commit message: line ends made "\n",
// tabs spaces, and every other control character, and every character
// that changes how the text around it reads (bidirectional overrides,
// zero-width characters), dropped; invalid UTF-8 becomes U+FFFD.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case r == '\t', r == '\r', r == 0x2028, r == 0x2029:
			return ' '
		case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r),
			r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF, r >= 0x206A && r <= 0x206F:
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// truncateUTF8 cuts s to at most n bytes, on a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// runTexts finds the request that started run and the final answer it
// added to its agent's thread, looking back at most maxThreadPages pages:
// "" for what is not found (a terminal run has no request, a run may end
// without an answer).
func (c *Repositories) runTexts(ctx context.Context, run corral.Run) (request, answer string) {
	before := ""
	for range maxThreadPages {
		msgs, err := c.repos.cfg.Store.Messages(ctx, run.AgentID, before, maxThreadPage)
		if err != nil || len(msgs) == 0 {
			return request, answer
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			m := msgs[i]
			switch {
			case m.RunID == run.ID && m.Role == corral.RoleAssistant && answer == "":
				answer = m.Content
			case m.ID == run.MessageID && run.MessageID != "":
				// The request comes before its answer: nothing older matters.
				return m.Content, answer
			}
		}
		if run.MessageID == "" || len(msgs) < maxThreadPage {
			return request, answer
		}
		before = msgs[0].ID
	}
	return request, answer
}
