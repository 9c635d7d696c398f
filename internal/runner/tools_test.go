package runner

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"corral"
)

// args encodes a tool call's arguments as a model would.
func args(kv ...string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// writeScript is write_file's script; the path always comes after it as
// an argument.
const writeScript = `d=$(dirname -- "$1") && mkdir -p -- "$d" && cat > "$1"`

func TestParseTool(t *testing.T) {
	big := strings.Repeat("x", maxWriteBytes)
	tests := []struct {
		name      string
		tool      string
		arguments string
		argv      []string // nil: the call must be refused
		stdin     *string  // write_file only
	}{
		// shell
		{"shell", "shell", args("command", "ls -la | wc -l"), []string{"sh", "-c", "ls -la | wc -l"}, nil},
		{"shell without command", "shell", args(), nil, nil},
		{"shell with another argument only", "shell", args("path", "ls"), nil, nil},
		{"shell with an empty command", "shell", args("command", " \t\n"), nil, nil},
		{"shell with a NUL byte", "shell", args("command", "ls\x00-la"), nil, nil},
		{"shell with a non-string command", "shell", `{"command": 42}`, nil, nil},

		// read_file
		{"read a file", "read_file", args("path", "a.txt"), []string{"cat", "--", "a.txt"}, nil},
		{"read in a directory", "read_file", args("path", "src/./x/../main.go"), []string{"cat", "--", "src/main.go"}, nil},
		{"read by absolute workspace path", "read_file", args("path", "/workspace/a.txt"), []string{"cat", "--", "a.txt"}, nil},
		{"read a file named like an option", "read_file", args("path", "-rf"), []string{"cat", "--", "./-rf"}, nil},
		{"read ./-rf", "read_file", args("path", "./-rf"), []string{"cat", "--", "./-rf"}, nil},
		{"read without path", "read_file", args(), nil, nil},
		{"read ../x", "read_file", args("path", "../x"), nil, nil},
		{"read a/../../x", "read_file", args("path", "a/../../x"), nil, nil},
		{"read /workspace/../etc/passwd", "read_file", args("path", "/workspace/../etc/passwd"), nil, nil},
		{"read /etc/passwd", "read_file", args("path", "/etc/passwd"), nil, nil},
		{"read /workspacex/a", "read_file", args("path", "/workspacex/a"), nil, nil},
		{"read .", "read_file", args("path", "."), nil, nil},
		{"read the empty path", "read_file", args("path", ""), nil, nil},
		{"read /workspace", "read_file", args("path", "/workspace"), nil, nil},
		{"read a/..", "read_file", args("path", "a/.."), nil, nil},
		{"read with a NUL byte", "read_file", args("path", "a\x00b"), nil, nil},

		// write_file
		{"write a file", "write_file", args("path", "d/e/x.txt", "content", "hi\n"),
			[]string{"sh", "-c", writeScript, "write_file", "d/e/x.txt"}, ptr("hi\n")},
		{"write an empty file", "write_file", args("path", "x.txt", "content", ""),
			[]string{"sh", "-c", writeScript, "write_file", "x.txt"}, ptr("")},
		{"write a path that looks like shell", "write_file", args("path", "$(reboot); x", "content", "c"),
			[]string{"sh", "-c", writeScript, "write_file", "$(reboot); x"}, ptr("c")},
		{"write -rf", "write_file", args("path", "-rf", "content", "c"),
			[]string{"sh", "-c", writeScript, "write_file", "./-rf"}, ptr("c")},
		{"write /workspace/a.txt", "write_file", args("path", "/workspace/a.txt", "content", "c"),
			[]string{"sh", "-c", writeScript, "write_file", "a.txt"}, ptr("c")},
		{"write exactly the cap", "write_file", args("path", "big", "content", big),
			[]string{"sh", "-c", writeScript, "write_file", "big"}, ptr(big)},
		{"write one byte over the cap", "write_file", args("path", "big", "content", big+"x"), nil, nil},
		{"write without content", "write_file", args("path", "x.txt"), nil, nil},
		{"write without path", "write_file", args("content", "c"), nil, nil},
		{"write ../x", "write_file", args("path", "../x", "content", "c"), nil, nil},
		{"write /etc/passwd", "write_file", args("path", "/etc/passwd", "content", "c"), nil, nil},
		{"write .", "write_file", args("path", ".", "content", "c"), nil, nil},
		{"write content with a NUL byte", "write_file", args("path", "x", "content", "a\x00b"),
			[]string{"sh", "-c", writeScript, "write_file", "x"}, ptr("a\x00b")}, // stdin carries any bytes
		{"write a path with a NUL byte", "write_file", args("path", "x\x00y", "content", "c"), nil, nil},

		// list_files
		{"list the top by default", "list_files", args(), []string{"ls", "-1Ap", "--", "."}, nil},
		{"list .", "list_files", args("path", "."), []string{"ls", "-1Ap", "--", "."}, nil},
		{"list the empty path", "list_files", args("path", ""), []string{"ls", "-1Ap", "--", "."}, nil},
		{"list /workspace", "list_files", args("path", "/workspace"), []string{"ls", "-1Ap", "--", "."}, nil},
		{"list /workspace/", "list_files", args("path", "/workspace/"), []string{"ls", "-1Ap", "--", "."}, nil},
		{"list src/", "list_files", args("path", "src/"), []string{"ls", "-1Ap", "--", "src"}, nil},
		{"list -l", "list_files", args("path", "-l"), []string{"ls", "-1Ap", "--", "./-l"}, nil},
		{"list ..", "list_files", args("path", ".."), nil, nil},
		{"list /etc", "list_files", args("path", "/etc"), nil, nil},
		{"list with a NUL byte", "list_files", args("path", "a\x00b"), nil, nil},

		// not a call at all
		{"unknown tool", "rm_rf", args("path", "x"), nil, nil},
		{"empty tool name", "", args("command", "ls"), nil, nil},
		{"arguments not JSON", "shell", `{"command": "ls"`, nil, nil},
		{"arguments not an object", "shell", `["ls"]`, nil, nil},
		{"no arguments at all", "shell", ``, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := parseTool(corral.ToolCall{ID: "c1", Name: tt.tool, Arguments: tt.arguments})
			if tt.argv == nil {
				if err == nil {
					t.Fatalf("parseTool(%s %s) = %q, want an error", tt.tool, short(tt.arguments), spec.argv)
				}
				if err.Error() == "" {
					t.Fatalf("parseTool(%s %s): an empty error tells the model nothing", tt.tool, short(tt.arguments))
				}
				return
			}
			if err != nil {
				t.Fatalf("parseTool(%s %s): %v", tt.tool, short(tt.arguments), err)
			}
			if !reflect.DeepEqual(spec.argv, tt.argv) {
				t.Errorf("parseTool(%s %s) argv = %q, want %q", tt.tool, short(tt.arguments), spec.argv, tt.argv)
			}
			switch {
			case tt.stdin == nil && spec.stdin != nil:
				t.Errorf("parseTool(%s %s) stdin = %q, want none", tt.tool, short(tt.arguments), short(string(spec.stdin)))
			case tt.stdin != nil && (spec.stdin == nil || string(spec.stdin) != *tt.stdin):
				t.Errorf("parseTool(%s %s) stdin = %q, want %q", tt.tool, short(tt.arguments), short(string(spec.stdin)), short(*tt.stdin))
			}
		})
	}
}

func ptr(s string) *string { return &s }

// short keeps huge arguments out of failure messages.
func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func TestCapText(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		n         int
		want      string
		truncated bool
	}{
		{"empty", "", 0, "", false},
		{"shorter", "abc", 4, "abc", false},
		{"exactly n", "abcd", 4, "abcd", false},
		{"one over", "abcde", 4, "abcd\n[... 1 more bytes not shown]", true},
		{"cut to nothing", "abc", 0, "\n[... 3 more bytes not shown]", true},
		// é is 2 bytes: a cut in its middle moves back before it.
		{"inside a 2-byte rune", "aé", 2, "a\n[... 2 more bytes not shown]", true},
		{"after a 2-byte rune", "aéb", 3, "aé\n[... 1 more bytes not shown]", true},
		// 😀 is 4 bytes.
		{"inside a 4-byte rune, first byte", "x😀y", 2, "x\n[... 5 more bytes not shown]", true},
		{"inside a 4-byte rune, last byte", "x😀y", 4, "x\n[... 5 more bytes not shown]", true},
		{"after a 4-byte rune", "x😀y", 5, "x😀\n[... 1 more bytes not shown]", true},
		{"only a 4-byte rune", "😀😀", 3, "\n[... 8 more bytes not shown]", true},
		{"multibyte fits whole", "日本語", 9, "日本語", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated := capText(tt.in, tt.n)
			if got != tt.want || truncated != tt.truncated {
				t.Errorf("capText(%q, %d) = %q, %v; want %q, %v", tt.in, tt.n, got, truncated, tt.want, tt.truncated)
			}
			// What is kept of s is a prefix of it, at most n bytes, cut
			// between runes.
			if kept, _, _ := strings.Cut(got, "\n[... "); truncated &&
				(!strings.HasPrefix(tt.in, kept) || len(kept) > tt.n || !utf8.ValidString(kept)) {
				t.Errorf("capText(%q, %d) kept %q, want a whole-rune prefix of at most %d bytes", tt.in, tt.n, kept, tt.n)
			}
		})
	}
}

// TestOutputKeepsOnlyItsHead: a command's output is counted whole but
// held only as far as the model reads it, and what the model reads says
// how much more there was.
func TestOutputKeepsOnlyItsHead(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string // the text, up to its marker
		cut    bool
		more   int64
	}{
		{"short", []string{"hello\n"}, "hello\n", false, 0},
		{"exactly the cap", []string{strings.Repeat("a", maxToolOutput)}, strings.Repeat("a", maxToolOutput), false, 0},
		{"64 MiB in pieces", []string{strings.Repeat("x", 1<<20)}, strings.Repeat("x", maxToolOutput), true, 64<<20 - maxToolOutput},
		{"cut on a character", []string{strings.Repeat("a", maxToolOutput-1) + "é" + "tail"}, strings.Repeat("a", maxToolOutput-1), true, int64(len("é") + len("tail"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o output
			n := 1
			if tt.name == "64 MiB in pieces" {
				n = 64
			}
			for i := 0; i < n; i++ {
				for _, w := range tt.writes {
					o.Write([]byte(w))
				}
			}
			if o.buf.Len() > outputKept {
				t.Fatalf("held %d bytes, want at most %d", o.buf.Len(), outputKept)
			}
			got, cut := o.text(maxToolOutput)
			if cut != tt.cut || !strings.HasPrefix(got, tt.want) {
				t.Fatalf("text = %.40q… (cut %v), want %.40q… (cut %v)", got, cut, tt.want, tt.cut)
			}
			if tt.cut && !strings.HasSuffix(got, fmt.Sprintf("[... %d more bytes not shown]", tt.more)) {
				t.Fatalf("text ends %q, want %d more bytes", got[len(got)-40:], tt.more)
			}
		})
	}
}
