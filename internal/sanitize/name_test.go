package sanitize_test

import (
	"errors"
	"strings"
	"testing"

	"corral"
	"corral/internal/sanitize"
)

func TestNameAccepts(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "report.txt", "report.txt"},
		{"inner space", "my agent", "my agent"},
		{"unicode", "Ünïcødé", "Ünïcødé"},
		{"cjk", "日本語のファイル.txt", "日本語のファイル.txt"},
		{"emoji", "🚀 launch", "🚀 launch"},
		{"decomposed e acute", "e\u0301", "\u00e9"},
		{"decomposed inside", "cafe\u0301.md", "caf\u00e9.md"},
		{"percent-encoded traversal is just text", "%2e%2e%2f", "%2e%2e%2f"},
		{"single dots", "a.b.c", "a.b.c"},
		{"255 bytes", strings.Repeat("a", 255), strings.Repeat("a", 255)},
		{"255 bytes after NFC", strings.Repeat("e\u0301", 127) + "a", strings.Repeat("\u00e9", 127) + "a"},
		{"con prefix", "con-tractor", "con-tractor"},
		{"console", "console.log", "console.log"},
		{"COM10", "COM10", "COM10"},
		{"LPT alone", "LPT", "LPT"},
		{"COM alone", "COM.txt", "COM.txt"},
		{"CONIN without dollar", "CONIN", "CONIN"},
		{"device then letter", "com1x.txt", "com1x.txt"},
		{"device then space and word", "NUL x.txt", "NUL x.txt"},
		{"superscript four", "COM⁴", "COM⁴"},
		{"nul in word", "nullable", "nullable"},
		{"gitignore without dot", "gitignore", "gitignore"},
		{"git", "git", "git"},
		{"git dir inside name", "x.git", "x.git"},
		{"git tilde no digits", "git~", "git~"},
		{"git tilde letter", "git~a", "git~a"},
		{"git short form with extension", "git~1.txt", "git~1.txt"},
		{"tilde", "~", "~"},
		{"dollar", "$HOME", "$HOME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sanitize.Name(tt.in)
			if err != nil {
				t.Fatalf("Name(%q) error %v, want %q", tt.in, err, tt.want)
			}
			if got != tt.want {
				t.Errorf("Name(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNameRejects(t *testing.T) {
	tests := []struct {
		name, in, rule string
	}{
		{"invalid byte", "\xff", "invalid_utf8"},
		{"truncated sequence", "a\xc3", "invalid_utf8"},
		{"encoded surrogate", "\xed\xa0\x80", "invalid_utf8"},
		{"overlong slash", "\xc0\xaf", "invalid_utf8"},

		{"empty", "", "empty"},
		{"256 bytes", strings.Repeat("a", 256), "too_long"},
		{"256 bytes of two-byte runes", strings.Repeat("é", 128), "too_long"},
		{"256 bytes after NFC", strings.Repeat("e\u0301", 128), "too_long"},

		{"dotdot slash passwd", "../etc/passwd", "separator"},
		{"dotdot backslash windows", `..\..\windows`, "separator"},
		{"four dots two slashes", "....//", "separator"},
		{"absolute unix", "/etc/passwd", "separator"},
		{"absolute windows", `C:\Windows\System32`, "separator"},
		{"unc", `\\server\share`, "separator"},
		{"slash", "a/b", "separator"},
		{"trailing slash", "a/", "separator"},
		{"backslash", `a\b`, "separator"},
		{"dotdot", "..", "dot_dot"},
		{"three dots", "...", "dot_dot"},
		{"four dots", "....", "dot_dot"},
		{"dotdot inside", "a..b", "dot_dot"},
		{"git dir with dotdot", ".git..", "dot_dot"},

		{"NUL in the middle", "a\x00b", "control"},
		{"newline", "a\nb", "control"},
		{"carriage return", "a\rb", "control"},
		{"tab", "a\tb", "control"},
		{"escape", "a\x1b[31mb", "control"},
		{"DEL", "a\x7fb", "control"},
		{"NEL U+0085", "a\u0085b", "control"},
		{"C1 U+009B", "a\u009bb", "control"},
		{"RLO U+202E", "invoice\u202Efdp.exe", "control"},
		{"LRE U+202A", "a\u202Ab", "control"},
		{"isolate U+2066", "a\u2066b", "control"},
		{"pop isolate U+2069", "a\u2069b", "control"},
		{"LRM U+200E", "a\u200Eb", "control"},
		{"RLM U+200F", "a\u200Fb", "control"},
		{"ALM U+061C", "a\u061Cb", "control"},
		{"zero-width space", "a\u200Bb", "control"},
		{"zero-width joiner", "a\u200Db", "control"},
		{"word joiner", "a\u2060b", "control"},
		{"BOM", "\uFEFFa", "control"},
		{"HFS+ ignorable in git", ".g\u206Ait", "control"},
		{"line separator", "a\u2028b", "control"},
		{"leading newline", "\nname", "control"},
		{"trailing NUL", "name\x00", "control"},

		{"less than", "a<b", "reserved_char"},
		{"greater than", "a>b", "reserved_char"},
		{"colon", "a:b", "reserved_char"},
		{"drive", "C:", "reserved_char"},
		{"stream", "file.txt:hidden", "reserved_char"},
		{"git stream", ".git::$INDEX_ALLOCATION", "reserved_char"},
		{"quote", `a"b`, "reserved_char"},
		{"pipe", "a|b", "reserved_char"},
		{"question", "a?b", "reserved_char"},
		{"star", "*", "reserved_char"},

		{".git", ".git", "git_dir"},
		{".GIT", ".GIT", "git_dir"},
		{".Git", ".Git", "git_dir"},
		{".git trailing dot", ".git.", "git_dir"},
		{".git trailing space", ".git ", "git_dir"},
		{".git trailing dots and spaces", ".GiT . .", "git_dir"},
		{"git~1", "git~1", "git_dir"},
		{"GIT~1", "GIT~1", "git_dir"},
		{"GIT~9", "GIT~9", "git_dir"},
		{"Git~12", "Git~12", "git_dir"},
		{"git~1 trailing dot", "git~1.", "git_dir"},

		{"leading dot", ".hidden", "edge_dot_or_space"},
		{"dotfile", ".gitignore", "edge_dot_or_space"},
		{"dot", ".", "edge_dot_or_space"},
		{"trailing dot", "name.", "edge_dot_or_space"},
		{"leading space", " name", "edge_dot_or_space"},
		{"trailing space", "name ", "edge_dot_or_space"},
		{"only space", " ", "edge_dot_or_space"},
		{"trailing no-break space", "name\u00a0", "edge_dot_or_space"},
		{"leading ideographic space", "\u3000name", "edge_dot_or_space"},
		{"device with trailing space", "CON ", "edge_dot_or_space"},
		{"device with trailing dot", "nul.", "edge_dot_or_space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkNameRule(t, tt.in, tt.rule)
		})
	}
}

// TestNameDevices tries every Windows device name in three cases, bare and
// with extensions, with and without the spaces Windows ignores before the
// extension.
func TestNameDevices(t *testing.T) {
	for _, dev := range deviceNames() {
		for _, base := range []string{strings.ToLower(dev), strings.ToUpper(dev), mixedCase(dev)} {
			for _, ext := range []string{"", ".txt", ".tar.gz", " .txt", "  .tar.gz"} {
				in := base + ext
				t.Run(in, func(t *testing.T) {
					checkNameRule(t, in, "device_name")
				})
			}
		}
	}
	for _, in := range []string{"Com¹.log", "lPt³.tar.gz", "CONOUT$ .txt", "conin$.x.y.z", "Aux.c", "prn. .txt"} {
		t.Run(in, func(t *testing.T) {
			checkNameRule(t, in, "device_name")
		})
	}
}

// deviceNames lists every Windows device name in upper case.
func deviceNames() []string {
	names := []string{"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
	for _, p := range []string{"COM", "LPT"} {
		for _, d := range strings.Split("0123456789¹²³", "") {
			names = append(names, p+d)
		}
	}
	return names
}

// mixedCase upper-cases every other letter of s: "con" becomes "CoN".
func mixedCase(s string) string {
	var b strings.Builder
	for i, r := range strings.ToLower(s) {
		if i%2 == 0 {
			r = []rune(strings.ToUpper(string(r)))[0]
		}
		b.WriteRune(r)
	}
	return b.String()
}

func checkNameRule(t *testing.T, in, rule string) {
	t.Helper()
	got, err := sanitize.Name(in)
	if err == nil {
		t.Fatalf("Name(%q) = %q, want rule %q", in, got, rule)
	}
	var e *corral.Error
	if !errors.As(err, &e) {
		t.Fatalf("Name(%q) error %T %v, want *corral.Error", in, err, err)
	}
	if e.Code != corral.ENAME {
		t.Errorf("Name(%q) code = %q, want %q", in, e.Code, corral.ENAME)
	}
	if !strings.HasPrefix(e.Message, "invalid name: ") {
		t.Errorf("Name(%q) message = %q, want prefix %q", in, e.Message, "invalid name: ")
	}
	if got := sanitize.Rule(err); got != rule {
		t.Errorf("Rule(Name(%q)) = %q, want %q (message %q)", in, got, rule, e.Message)
	}
	if got != "" {
		t.Errorf("Name(%q) = %q with an error, want \"\"", in, got)
	}
}

func TestNameMessages(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"a/b", `invalid name: contains a path separator ("/" or "\")`},
		{"a..b", `invalid name: contains ".."`},
		{"a\u202Eb", "invalid name: contains a control or invisible character (U+202E)"},
		{"con.txt", `invalid name: "CON" is a Windows device name`},
		{"Com¹.log", `invalid name: "COM¹" is a Windows device name`},
	}
	for _, tt := range tests {
		_, err := sanitize.Name(tt.in)
		if got := corral.ErrorMessage(err); got != tt.want {
			t.Errorf("Name(%q) message = %q, want %q", tt.in, got, tt.want)
		}
		// The log line carries the rule id after the message.
		if got, want := err.Error(), tt.want+": rule "+sanitize.Rule(err); got != want {
			t.Errorf("Name(%q) error = %q, want %q", tt.in, got, want)
		}
	}
}

func TestRuleOfOtherErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"nil", nil},
		{"plain", errors.New("boom")},
		{"corral error", corral.Errorf(corral.ENAME, "invalid name: made up")},
	}
	for _, tt := range tests {
		if got := sanitize.Rule(tt.err); got != "" {
			t.Errorf("%s: Rule(%v) = %q, want \"\"", tt.name, tt.err, got)
		}
	}
}
