package service

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"corral"
)

func TestCommitSubject(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for _, tt := range []struct {
		name, in, want string
	}{
		{"one line", "tidy up the README", "tidy up the README"},
		{"first line that says something", "\n  \n  fix   the\tbuild  \nthen the tests", "fix the build"},
		{"cut at a word's end", long, strings.TrimSpace(long[:70]) + "…"},
		{"cut in a word too long", strings.Repeat("abcdefghij", 10), strings.Repeat("abcdefghij", 7) + "a…"},
		{"exactly the bound", strings.Repeat("x", 72), strings.Repeat("x", 72)},
		{"control characters and overrides dropped", "fix\x1b[31m \u202ethe\u200b bug\x00", "fix[31m the bug"},
		{"nothing", " \n\t\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := commitSubject(tt.in)
			if got != tt.want {
				t.Fatalf("commitSubject(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > maxSubject {
				t.Fatalf("commitSubject(%q) has %d runes, more than %d", tt.in, n, maxSubject)
			}
		})
	}
}

func TestCommitBody(t *testing.T) {
	var many []string
	for i := range 30 {
		many = append(many, fmt.Sprintf("line %d", i))
	}
	for _, tt := range []struct {
		name, in, want string
	}{
		{"kept", "Done.\r\n\r\n\r\nI changed two files.  \n", "Done.\n\nI changed two files."},
		{"first lines", strings.Join(many, "\n"), strings.Join(many[:maxBodyLines], "\n") + "\n(the answer goes on in the run)"},
		{"bounded in bytes", strings.Repeat("é", 3000), strings.Repeat("é", maxBodyBytes/2) + "\n(the answer goes on in the run)"},
		{"control characters dropped", "ok\x07\x1b]0;title\x07 done", "ok]0;title done"},
		{"none", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := commitBody(tt.in); got != tt.want {
				t.Fatalf("commitBody(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestChangeSetMessage(t *testing.T) {
	entries := []corral.ChangeEntry{{Path: "README.md", Op: "modify"}, {Path: "src/new.go", Op: "create"}, {Path: "old.txt", Op: "delete"}}
	var many []corral.ChangeEntry
	for i := range 53 {
		many = append(many, corral.ChangeEntry{Path: fmt.Sprintf("f%02d", i), Op: "create"})
	}
	for _, tt := range []struct {
		name string
		m    changeSetMessage
		want string
	}{
		{"request, answer and files",
			changeSetMessage{Request: "Tidy up\nand more", Answer: "Done: tidied.\nCorral-Change-Set: chg_forged", RunID: "run_1", ChangeSetID: "chg_1", ApprovedBy: "Ed <ed@x>", Entries: entries},
			"Tidy up\n\nDone: tidied.\nCorral-Change-Set: chg_forged\n\nFiles:\n  modified README.md\n  added    src/new.go\n  deleted  old.txt\n\n" +
				"Corral-Run: run_1\nCorral-Change-Set: chg_1\nApproved-By: Ed <ed@x>\n"},
		{"no request: today's subject",
			changeSetMessage{ChangeSetID: "chg_2", ApprovedBy: autoApprover},
			"Apply change set chg_2 of run (none)\n\nCorral-Run: (none)\nCorral-Change-Set: chg_2\nApproved-By: Corral (auto mode)\n"},
		{"files bounded",
			changeSetMessage{Request: "many", RunID: "run_3", ChangeSetID: "chg_3", ApprovedBy: "Ed", Entries: many},
			"many\n\nFiles:\n" + func() string {
				var b strings.Builder
				for i := range maxFilesListed {
					fmt.Fprintf(&b, "  added    f%02d\n", i)
				}
				return b.String()
			}() + "  and 3 more\n\nCorral-Run: run_3\nCorral-Change-Set: chg_3\nApproved-By: Ed\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.m.String()
			if got != tt.want {
				t.Fatalf("message =\n%s\nwant\n%s", got, tt.want)
			}
			// The trailers the commits list reads are the last ones.
			c := corral.GitCommit{Message: got}
			if cs := c.Trailer("Corral-Change-Set"); cs != tt.m.ChangeSetID {
				t.Fatalf("Corral-Change-Set = %q, want %q", cs, tt.m.ChangeSetID)
			}
		})
	}
}
