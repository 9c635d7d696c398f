package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"

	"corral"
	"corral/internal/sanitize"
	"corral/internal/workspace"
)

// Diff bounds: a text file larger than maxDiff is not diffed, and a change
// set keeps at most maxDiffTotal bytes of diffs (the first entries, by
// path): enough to review, bounded in what one run can make the store keep.
const (
	maxDiff      = 1 << 20
	maxDiffTotal = 8 << 20
)

// addDiffs gives each text entry its unified diff, old content from old
// (the persistent workspace) and new from cur (the stage), when the run
// ends: the staged tree goes when the set is decided, the diff stays. The
// old side is used only when it still has the hash the entry was measured
// against, so a diff never shows content the run did not see. Headers
// carry the escaped name, so a newline in a name cannot forge a hunk.
func addDiffs(entries []corral.ChangeEntry, old, cur workspace.Source) {
	total := 0
	for i := range entries {
		e := &entries[i]
		if e.Class == workspace.ClassProtected || e.Size > maxDiff || total >= maxDiffTotal {
			continue
		}
		a, okA := readText(old, e.Path, e.Op != workspace.OpCreate, e.OldSHA256)
		b, okB := readText(cur, e.Path, e.Op != workspace.OpDelete, e.NewSHA256)
		if !okA || !okB {
			continue
		}
		name := sanitize.Escape(e.Path)
		d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: splitLines(a), B: splitLines(b),
			FromFile: "a/" + name, ToFile: "b/" + name, Context: 3,
		})
		if err != nil || total+len(d) > maxDiffTotal {
			continue
		}
		e.Diff = d
		total += len(d)
	}
}

// splitLines cuts text into lines that keep their "\n". Unlike
// difflib.SplitLines it adds no empty line after a final newline; a last
// line without one gets one, so the diff stays line-based.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}

// readText reads a small text file from src whose SHA-256 must be sha;
// want false means the file is not expected to exist and reads as empty.
func readText(src workspace.Source, path string, want bool, sha string) (string, bool) {
	if !want {
		return "", true
	}
	r, err := src.Open(path)
	if err != nil {
		return "", false
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxDiff+1))
	if err != nil || len(b) > maxDiff || bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return "", false
	}
	sum := sha256.Sum256(b)
	if !strings.EqualFold(hex.EncodeToString(sum[:]), sha) {
		return "", false
	}
	return string(b), true
}
