package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func TestNewToken(t *testing.T) {
	for _, prefix := range []string{"cs", "cat", "csl", "cin"} {
		t.Run(prefix, func(t *testing.T) {
			seen := make(map[string]bool)
			for range 1000 {
				tok, hash := NewToken(prefix)
				if seen[tok] {
					t.Fatalf("NewToken(%q) repeated %q", prefix, tok)
				}
				seen[tok] = true
				enc, ok := strings.CutPrefix(tok, prefix+"_")
				if !ok {
					t.Fatalf("NewToken(%q) = %q, want prefix %q", prefix, tok, prefix+"_")
				}
				if len(enc) != 43 {
					t.Fatalf("NewToken(%q) = %q: %d characters after the prefix, want 43", prefix, tok, len(enc))
				}
				raw, err := base64.RawURLEncoding.DecodeString(enc)
				if err != nil || len(raw) != 32 {
					t.Fatalf("NewToken(%q) = %q: decodes to %d bytes, %v; want 32 bytes", prefix, tok, len(raw), err)
				}
				if !bytes.Equal(HashToken(tok), hash) {
					t.Fatalf("HashToken(%q) = %x, NewToken returned %x", tok, HashToken(tok), hash)
				}
				if !WellFormed(prefix, tok) {
					t.Fatalf("WellFormed(%q, %q) = false, want true", prefix, tok)
				}
			}
		})
	}
}

func TestHashToken(t *testing.T) {
	tests := []struct {
		token string
		want  string // SHA-256, from sha256sum
	}{
		{"cs_x", "b1d20a29022aebb1cc2c3f99ba1e910e7bf7665a30f7d36c3515022f26d7026d"},
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	for _, tt := range tests {
		if got := hex.EncodeToString(HashToken(tt.token)); got != tt.want {
			t.Errorf("HashToken(%q) = %s, want %s", tt.token, got, tt.want)
		}
	}
	if bytes.Equal(HashToken("cs_x"), HashToken("cat_x")) {
		t.Errorf("HashToken ignores the prefix")
	}
}

func TestWellFormed(t *testing.T) {
	tok, _ := NewToken("cs")
	body := strings.TrimPrefix(tok, "cs_")
	valid := "cs_" + strings.Repeat("A", 43)
	tests := []struct {
		name   string
		prefix string
		token  string
		want   bool
	}{
		{"fresh token", "cs", tok, true},
		{"all A", "cs", valid, true},
		{"every character class", "cs", "cs_" + "AZaz09-_" + strings.Repeat("A", 35), true},
		{"empty", "cs", "", false},
		{"prefix only", "cs", "cs_", false},
		{"no underscore", "cs", "cs" + body, false},
		{"wrong prefix", "cat", tok, false},
		{"longer prefix", "cs", "csl_" + body, false},
		{"shorter prefix", "csl", "cs_" + body, false},
		{"prefix in other case", "cs", "CS_" + body, false},
		{"no prefix", "cs", body, false},
		{"short", "cs", tok[:len(tok)-1], false},
		{"long", "cs", tok + "A", false},
		{"padded", "cs", tok + "=", false},
		{"standard alphabet plus", "cs", "cs_+" + strings.Repeat("A", 42), false},
		{"standard alphabet slash", "cs", "cs_/" + strings.Repeat("A", 42), false},
		{"dot", "cs", "cs_." + strings.Repeat("A", 42), false},
		{"space", "cs", "cs_ " + strings.Repeat("A", 42), false},
		{"newline", "cs", "cs_" + strings.Repeat("A", 42) + "\n", false},
		{"non-ASCII", "cs", "cs_é" + strings.Repeat("A", 41), false},
		{"nul", "cs", "cs_\x00" + strings.Repeat("A", 42), false},
		{"trailing bits set", "cs", "cs_" + strings.Repeat("A", 42) + "B", false},
		{"trailing bits clear", "cs", "cs_" + strings.Repeat("A", 42) + "E", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WellFormed(tt.prefix, tt.token); got != tt.want {
				t.Errorf("WellFormed(%q, %q) = %v, want %v", tt.prefix, tt.token, got, tt.want)
			}
		})
	}
}

func BenchmarkWellFormed(b *testing.B) {
	tok, _ := NewToken("cs")
	for b.Loop() {
		WellFormed("cs", tok)
	}
}
