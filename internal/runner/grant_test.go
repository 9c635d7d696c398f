package runner

import (
	"strings"
	"testing"
)

// TestRedactTokens: a run token never passes through what a CLI printed,
// whole or cut between two pieces of its output.
func TestRedactTokens(t *testing.T) {
	tok, _ := newToken()
	tests := []struct{ name, in string }{
		{"alone", tok},
		{"in a line", "OPENAI_API_KEY=" + tok + "\n"},
		{"two", tok + " " + tok},
	}
	for _, tt := range tests {
		if got := string(redactTokens([]byte(tt.in))); strings.Contains(got, tok[len(tokenPrefix):]) || !strings.Contains(got, "crt_[redacted]") {
			t.Errorf("%s: %q", tt.name, got)
		}
	}
}

// TestRedactorAcrossPieces: a token cut anywhere between pieces is still
// redacted, and nothing else is lost or changed.
func TestRedactorAcrossPieces(t *testing.T) {
	tok, _ := newToken()
	text := "before " + tok + " middle " + tok + " after"
	want := strings.ReplaceAll(text, tok, "crt_[redacted]")
	for cut := 1; cut < len(text); cut++ {
		var r redactor
		got := string(r.next([]byte(text[:cut]), false)) + string(r.next([]byte(text[cut:]), true))
		if got != want {
			t.Fatalf("cut at %d: %q, want %q", cut, got, want)
		}
	}
}
