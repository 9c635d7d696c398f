package sanitize_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"corral"
	"corral/internal/sanitize"
)

// The fuzz targets check what each validator promises, written out again
// here rather than calling the package's own helpers, so that a mistake in
// a helper cannot hide itself. Seeds live in testdata/fuzz.

// mustCode fails unless err is a *corral.Error with one of codes.
func mustCode(t *testing.T, call string, err error, codes ...string) *corral.Error {
	t.Helper()
	var e *corral.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: error %T %v, want *corral.Error", call, err, err)
	}
	for _, c := range codes {
		if e.Code == c {
			return e
		}
	}
	t.Fatalf("%s: code %q, want one of %q", call, e.Code, codes)
	return nil
}

// hidden is the set of characters Name and DisplayName must refuse, as the
// brief for this package lists them.
func hidden(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069,
		r == 0x200E, r == 0x200F, r == 0x061C:
		return true
	case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF:
		return true
	}
	return false
}

func isDevice(s string) bool {
	base, _, _ := strings.Cut(s, ".")
	base = strings.ToUpper(strings.TrimRight(base, " "))
	for _, d := range deviceNames() {
		if base == d {
			return true
		}
	}
	return false
}

// namesGit reports whether s is .git to Windows: any case, trailing dots
// and spaces dropped, or the 8.3 short form GIT~<digits>.
func namesGit(s string) bool {
	l := strings.ToLower(strings.TrimRight(s, ". "))
	digits, short := strings.CutPrefix(l, "git~")
	return l == ".git" || short && digits != "" && strings.Trim(digits, "0123456789") == ""
}

func FuzzName(f *testing.F) {
	for _, s := range []string{"report.txt", "../etc/passwd", "CON.txt", ".git", "GIT~1", "e\u0301"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := sanitize.Name(s)
		if err != nil {
			e := mustCode(t, "Name", err, corral.ENAME)
			if !strings.HasPrefix(e.Message, "invalid name: ") {
				t.Fatalf("Name(%q) message = %q, want prefix %q", s, e.Message, "invalid name: ")
			}
			checkRuleHolds(t, s, sanitize.Rule(err))
			return
		}
		switch {
		case !utf8.ValidString(out):
			t.Fatalf("Name(%q) = %q, not valid UTF-8", s, out)
		case !norm.NFC.IsNormalString(out):
			t.Fatalf("Name(%q) = %q, not NFC", s, out)
		case out != norm.NFC.String(s):
			t.Fatalf("Name(%q) = %q, want the NFC form of the input", s, out)
		case out == "", len(out) > 255:
			t.Fatalf("Name(%q) = %q, %d bytes", s, out, len(out))
		case strings.ContainsAny(out, `/\`), strings.Contains(out, ".."):
			t.Fatalf("Name(%q) = %q, can leave its directory", s, out)
		case strings.IndexFunc(out, hidden) >= 0:
			t.Fatalf("Name(%q) = %q, has a control or invisible character", s, out)
		case strings.ContainsAny(out, `<>:"|?*`):
			t.Fatalf("Name(%q) = %q, has a Windows-reserved character", s, out)
		case strings.HasPrefix(out, "."), strings.HasSuffix(out, "."),
			strings.TrimSpace(out) != out:
			t.Fatalf("Name(%q) = %q, dot or space at an edge", s, out)
		case namesGit(out):
			t.Fatalf("Name(%q) = %q, names .git", s, out)
		case isDevice(out):
			t.Fatalf("Name(%q) = %q, a device name", s, out)
		}
		if again, err := sanitize.Name(out); err != nil || again != out {
			t.Fatalf("Name(%q) = %q, %v; want %q again (idempotent)", out, again, err, out)
		}
	})
}

// checkRuleHolds fails unless the rule Name reported for s is one that s
// really breaks.
func checkRuleHolds(t *testing.T, s, rule string) {
	t.Helper()
	n := norm.NFC.String(s)
	var holds bool
	switch rule {
	case "invalid_utf8":
		holds = !utf8.ValidString(s)
	case "empty":
		holds = s == ""
	case "too_long":
		holds = len(n) > 255
	case "separator":
		holds = strings.ContainsAny(n, `/\`)
	case "dot_dot":
		holds = strings.Contains(n, "..")
	case "control":
		// Name also refuses the HFS+-ignorable U+206A-F and U+2028-9.
		holds = strings.IndexFunc(n, func(r rune) bool {
			return hidden(r) || r >= 0x206A && r <= 0x206F || r == 0x2028 || r == 0x2029
		}) >= 0
	case "reserved_char":
		holds = strings.ContainsAny(n, `<>:"|?*`)
	case "git_dir":
		holds = namesGit(n)
	case "edge_dot_or_space":
		r0, _ := utf8.DecodeRuneInString(n)
		r1, _ := utf8.DecodeLastRuneInString(n)
		holds = r0 == '.' || r1 == '.' || unicode.IsSpace(r0) || unicode.IsSpace(r1)
	case "device_name":
		holds = isDevice(n)
	default:
		t.Fatalf("Name(%q): unknown rule %q", s, rule)
	}
	if !holds {
		t.Fatalf("Name(%q) reported rule %q, which the input does not break", s, rule)
	}
}

func FuzzContent(f *testing.F) {
	f.Add("hello", 100)
	f.Add("a\x00b", 100)
	f.Add(" \n", 100)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		out, err := sanitize.Content(s, limit)
		valid := len(s) <= limit && utf8.ValidString(s) &&
			strings.IndexByte(s, 0) < 0 && strings.TrimSpace(s) != ""
		if err != nil {
			if valid {
				t.Fatalf("Content(%q, %d) = %v, want accepted", s, limit, err)
			}
			e := mustCode(t, "Content", err, corral.ECONTENT, corral.ETOOLARGE)
			if (e.Code == corral.ETOOLARGE) != (len(s) > limit) {
				t.Fatalf("Content(%q, %d) code %q for %d bytes", s, limit, e.Code, len(s))
			}
			return
		}
		if !valid {
			t.Fatalf("Content(%q, %d) accepted", s, limit)
		}
		if out != s {
			t.Fatalf("Content(%q, %d) = %q, want input unchanged", s, limit, out)
		}
	})
}

func FuzzText(f *testing.F) {
	f.Add("", 0)
	f.Add("be terse", 100)
	f.Add("\xff", 100)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		out, err := sanitize.Text("instructions", s, limit)
		valid := len(s) <= limit && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
		if err != nil {
			if valid {
				t.Fatalf("Text(%q, %d) = %v, want accepted", s, limit, err)
			}
			e := mustCode(t, "Text", err, corral.ECONTENT, corral.ETOOLARGE)
			if !strings.HasPrefix(e.Message, "instructions ") {
				t.Fatalf("Text(%q, %d) message %q does not name the field", s, limit, e.Message)
			}
			return
		}
		if !valid || out != s {
			t.Fatalf("Text(%q, %d) = %q, want rejected or unchanged", s, limit, out)
		}
	})
}

func FuzzEmail(f *testing.F) {
	f.Add("Ada@Example.com")
	f.Add("a@b@c.d")
	f.Add("H\u0331@x.se")
	f.Add("A\u030aSA@B\u00dcCHER.de")
	f.Fuzz(func(t *testing.T, s string) {
		out, err := sanitize.Email(s)
		if err != nil {
			e := mustCode(t, "Email", err, corral.EINVALID)
			if e.Message != "invalid email address" {
				t.Fatalf("Email(%q) message = %q", s, e.Message)
			}
			return
		}
		local, domain, _ := strings.Cut(out, "@")
		switch {
		case !utf8.ValidString(out):
			t.Fatalf("Email(%q) = %q, not valid UTF-8", s, out)
		case out != strings.ToLower(out):
			t.Fatalf("Email(%q) = %q, not lowercase", s, out)
		case !norm.NFC.IsNormalString(out):
			t.Fatalf("Email(%q) = %q, not NFC", s, out)
		case len(out) > 254:
			t.Fatalf("Email(%q) = %q, %d bytes", s, out, len(out))
		case strings.Count(out, "@") != 1, local == "", !strings.Contains(domain, "."):
			t.Fatalf("Email(%q) = %q, not local@domain.tld", s, out)
		case strings.IndexFunc(out, func(r rune) bool { return unicode.IsSpace(r) || hidden(r) }) >= 0:
			t.Fatalf("Email(%q) = %q, has whitespace or control characters", s, out)
		case strings.ContainsAny(out, `<>()[]\,;:"`):
			t.Fatalf("Email(%q) = %q, has a header delimiter", s, out)
		}
		if again, err := sanitize.Email(out); err != nil || again != out {
			t.Fatalf("Email(%q) = %q, %v; want %q again (idempotent)", out, again, err, out)
		}
	})
}

func FuzzDisplayName(f *testing.F) {
	f.Add(" Ada Lovelace ")
	f.Add("E\u0301mile")
	f.Fuzz(func(t *testing.T, s string) {
		out, err := sanitize.DisplayName(s)
		if err != nil {
			mustCode(t, "DisplayName", err, corral.EINVALID)
			return
		}
		n := utf8.RuneCountInString(out)
		switch {
		case !utf8.ValidString(out):
			t.Fatalf("DisplayName(%q) = %q, not valid UTF-8", s, out)
		case !norm.NFC.IsNormalString(out):
			t.Fatalf("DisplayName(%q) = %q, not NFC", s, out)
		case strings.TrimSpace(out) != out:
			t.Fatalf("DisplayName(%q) = %q, not trimmed", s, out)
		case n < 1, n > 100:
			t.Fatalf("DisplayName(%q) = %q, %d characters", s, out, n)
		case strings.IndexFunc(out, hidden) >= 0:
			t.Fatalf("DisplayName(%q) = %q, has a control or invisible character", s, out)
		}
		if again, err := sanitize.DisplayName(out); err != nil || again != out {
			t.Fatalf("DisplayName(%q) = %q, %v; want %q again (idempotent)", out, again, err, out)
		}
	})
}

func FuzzPassword(f *testing.F) {
	f.Add("correct horse")
	f.Add("hunter2")
	f.Fuzz(func(t *testing.T, s string) {
		err := sanitize.Password(s)
		valid := len(s) <= 1024 && utf8.ValidString(s) &&
			strings.IndexByte(s, 0) < 0 && utf8.RuneCountInString(s) >= 8
		if err == nil {
			if !valid {
				t.Fatalf("Password(%q) accepted", s)
			}
			return
		}
		if valid {
			t.Fatalf("Password(%q) = %v, want accepted", s, err)
		}
		mustCode(t, "Password", err, corral.EINVALID)
		if len(s) >= 8 && strings.Contains(err.Error(), s) {
			t.Fatalf("Password(%q) error %q contains the password", s, err)
		}
	})
}

func FuzzModelName(f *testing.F) {
	f.Add("")
	f.Add("openrouter/meta/llama3:8b")
	f.Add("gpt 4")
	f.Fuzz(func(t *testing.T, s string) {
		out, err := sanitize.ModelName(s)
		valid := len(s) <= 200 && strings.Trim(s,
			"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@+") == ""
		if err != nil {
			if valid {
				t.Fatalf("ModelName(%q) = %v, want accepted", s, err)
			}
			mustCode(t, "ModelName", err, corral.EINVALID)
			return
		}
		if !valid || out != s {
			t.Fatalf("ModelName(%q) = %q, want rejected or unchanged", s, out)
		}
	})
}

// FuzzPath checks what Path promises: an accepted path is relative, has no
// empty, "." or ".." element, no hidden character, no element that is .git
// in any case, is in NFC, and is accepted again unchanged (StoredPath
// agrees); Escape of any input never holds a control or invisible
// character and tells different inputs apart.
func FuzzPath(f *testing.F) {
	for _, s := range []string{"a/b", ".gitignore", ".github/workflows/ci.yml", "a/../b", "/abs", "a\nb",
		".git/config", "GIT~1", "CON", "cafe\u0301", "a\xffb", "evil\u202etxt", ".", "a/", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		esc := sanitize.Escape(in)
		for _, r := range esc {
			if hidden(r) || r == 0x2028 || r == 0x2029 {
				t.Fatalf("Escape(%q) = %q holds %U", in, esc, r)
			}
		}
		if sanitize.Escape(in+"\n") == sanitize.Escape(in+`\n`) {
			t.Fatalf("Escape cannot tell a newline from a backslash-n after %q", in)
		}
		p, err := sanitize.Path(in)
		if err != nil {
			mustCode(t, "Path("+esc+")", err, corral.ENAME)
			if rule, _ := sanitize.StoredPath(in); rule == "" {
				t.Fatalf("StoredPath(%q) accepts what Path refuses: %v", in, err)
			}
			return
		}
		if strings.HasPrefix(p, "/") || !utf8.ValidString(p) || !norm.NFC.IsNormalString(p) {
			t.Fatalf("Path(%q) = %q: absolute, not UTF-8 or not NFC", in, p)
		}
		for _, el := range strings.Split(p, "/") {
			if el == "" || el == "." || el == ".." || strings.EqualFold(strings.TrimRight(el, ". "), ".git") {
				t.Fatalf("Path(%q) = %q has element %q", in, p, el)
			}
			for _, r := range el {
				if hidden(r) {
					t.Fatalf("Path(%q) = %q holds %U", in, p, r)
				}
			}
		}
		if again, err := sanitize.Path(p); err != nil || again != p {
			t.Fatalf("Path(Path(%q)) = %q, %v; want %q", in, again, err, p)
		}
		if rule, why := sanitize.StoredPath(p); rule != "" {
			t.Fatalf("StoredPath(%q) = %s (%s) for an accepted path", p, rule, why)
		}
	})
}

// FuzzID: ID accepts exactly 1 to 64 bytes of a-z, 0-9 and "_";
// CommandID exactly 1 to 64 ASCII letters, digits, ".", "_" and "-"
// starting with a letter or digit. Neither ever accepts a path.
func FuzzID(f *testing.F) {
	for _, s := range []string{"agt_abc", "m3-0", "..", "a/b", "Agt_a", "", "cli-1.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lower, command := len(s) >= 1 && len(s) <= 64, len(s) >= 1 && len(s) <= 64
		for i, r := range s {
			digit, letter := r >= '0' && r <= '9', r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
			lower = lower && (digit || r >= 'a' && r <= 'z' || r == '_')
			command = command && (digit || letter || i > 0 && strings.ContainsRune("._-", r))
		}
		err := sanitize.ID("agent", s)
		if err != nil {
			mustCode(t, "ID", err, corral.EINVALID)
		}
		if (err == nil) != lower {
			t.Fatalf("ID(%q) = %v, want ok %v", s, err, lower)
		}
		err = sanitize.CommandID(s)
		if err != nil {
			mustCode(t, "CommandID", err, corral.EINVALID)
		}
		if (err == nil) != command {
			t.Fatalf("CommandID(%q) = %v, want ok %v", s, err, command)
		}
		if err == nil && (s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00")) {
			t.Fatalf("CommandID(%q) accepted a path", s)
		}
	})
}

// FuzzHost: a host Host accepts comes back in its one form: lower-case
// ASCII letters, digits, ".", "-", ":", "[" and "]" only, and the same
// again when checked again.
func FuzzHost(f *testing.F) {
	for _, s := range []string{"GitHub.COM.:443", "[::1]:8443", "bücher.example", "10.0.0.5:3000", "1.2.3", "a@b", "x:0443"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := sanitize.Host(s)
		if err != nil {
			mustCode(t, "Host", err, corral.EINVALID)
			return
		}
		for _, r := range out {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(".-:[]", r)) {
				t.Fatalf("Host(%q) = %q: %q is not in a host's form", s, out, r)
			}
		}
		again, err := sanitize.Host(out)
		if err != nil || again != out {
			t.Fatalf("Host(%q) = %q, but Host(%q) = %q, %v", s, out, out, again, err)
		}
	})
}
