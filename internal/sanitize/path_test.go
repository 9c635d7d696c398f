package sanitize

import (
	"testing"

	"corral"
)

func TestPath(t *testing.T) {
	tests := []struct {
		name, in, want, rule string
	}{
		{"plain", "src/main.go", "src/main.go", ""},
		{"dotfile", ".gitignore", ".gitignore", ""},
		{"dot directory", ".github/workflows/ci.yml", ".github/workflows/ci.yml", ""},
		{"env file", ".env", ".env", ""},
		{"dot then space inside", ". notes", ". notes", ""},
		{"nfc applied", "cafe\u0301.txt", "caf\u00e9.txt", ""},
		{"dot", "a/./b", "", "dot"},
		{"dot dot", "a/../b", "", "dot_dot"},
		{"leading dot dot", "../etc/passwd", "", "dot_dot"},
		{"triple dot", "...", "", "dot_dot"},
		{"absolute", "/etc/passwd", "", "absolute"},
		{"empty", "", "", ""},
		{"empty element", "a//b", "", "empty"},
		{"trailing slash", "a/", "", "empty"},
		{"trailing dot", "a/b.", "", "edge_dot_or_space"},
		{"dotfile with trailing dot", ".bashrc.", "", "edge_dot_or_space"},
		{"trailing space", "a/b ", "", "edge_dot_or_space"},
		{"leading space", " b", "", "edge_dot_or_space"},
		{"newline", "a\nb", "", "control"},
		{"escape", "\x1b[31mred", "", "control"},
		{"bidi override", "evil\u202etxt.exe", "", "control"},
		{"zero width", "a\u200bb", "", "control"},
		{"invalid utf-8", "a\xffb", "", "invalid_utf8"},
		{"git dir", ".git/config", "", "git_dir"},
		{"git dir upper", "sub/.GIT/hooks/pre-commit", "", "git_dir"},
		{"git dir trailing dot", ".git./config", "", "git_dir"},
		{"git short name", "GIT~1/config", "", "git_dir"},
		{"git with invisible", ".g\u200bit/config", "", "control"},
		{"git with hfs ignorable", ".g\u206ait/config", "", "control"},
		{"device", "docs/CON", "", "device_name"},
		{"device with extension", "nul.txt", "", "device_name"},
		{"device superscript", "COM\u00b9", "", "device_name"},
		{"reserved char", "a:b", "", "reserved_char"},
		{"backslash", `a\b`, "", "separator"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Path(tc.in)
			if tc.want != "" {
				if err != nil || got != tc.want {
					t.Fatalf("Path(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Path(%q) = %q, want an error", tc.in, got)
			}
			if corral.ErrorCode(err) != corral.ENAME {
				t.Errorf("Path(%q) code = %q, want %q", tc.in, corral.ErrorCode(err), corral.ENAME)
			}
			if tc.rule != "" && Rule(err) != tc.rule {
				t.Errorf("Path(%q) rule = %q (%v), want %q", tc.in, Rule(err), err, tc.rule)
			}
		})
	}
}

func TestStoredPath(t *testing.T) {
	tests := []struct{ name, in, rule string }{
		{"plain", "a/b.txt", ""},
		{"dotfile", ".envrc", ""},
		{"not nfc", "cafe\u0301.txt", "not_nfc"},
		{"control", "a\tb", "control"},
		{"invalid utf-8", "\xc3\x28", "invalid_utf8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rule, why := StoredPath(tc.in)
			if rule != tc.rule {
				t.Fatalf("StoredPath(%q) = %q (%s), want %q", tc.in, rule, why, tc.rule)
			}
			if (rule == "") != (why == "") {
				t.Fatalf("StoredPath(%q): rule %q with sentence %q", tc.in, rule, why)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain.txt", "plain.txt"},
		{"caf\u00e9", "caf\u00e9"},
		{"a\nb", `a\nb`},
		{"\x1b[31m", `\x1b[31m`},
		{"evil\u202etxt", `evil\u202etxt`},
		{"a\u200bb", `a\u200bb`},
		{"bad\xff", `bad\xff`},
		{`back\slash`, `back\\slash`},
		{"tab\t", `tab\t`},
	}
	seen := map[string]string{}
	for _, tc := range tests {
		if got := Escape(tc.in); got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if prev, ok := seen[Escape(tc.in)]; ok {
			t.Errorf("Escape(%q) = Escape(%q)", tc.in, prev)
		}
		seen[Escape(tc.in)] = tc.in
	}
	// A literal backslash-n and a newline must not look alike.
	if Escape(`a\nb`) == Escape("a\nb") {
		t.Errorf("a literal \\n escapes like a newline")
	}
}

func TestFold(t *testing.T) {
	tests := []struct {
		a, b    string
		collide bool
	}{
		{"README.md", "readme.MD", true},
		{"caf\u00e9", "cafe\u0301", true},
		{"Stra\u00dfe", "strasse", true},
		{"a.txt", "b.txt", false},
	}
	for _, tc := range tests {
		if got := Fold(tc.a) == Fold(tc.b); got != tc.collide {
			t.Errorf("Fold(%q) == Fold(%q) is %v, want %v", tc.a, tc.b, got, tc.collide)
		}
	}
}
