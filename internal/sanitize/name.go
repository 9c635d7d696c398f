package sanitize

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"corral"
)

// maxName is the longest name in bytes. Most file systems stop at 255 bytes
// (ext4) or 255 UTF-16 units (NTFS); a UTF-8 string of 255 bytes fits both.
const maxName = 255

// Name checks the name of an agent, a document or a file and returns it in
// NFC form. Such a name may become a path on any operating system, so it must
// be a single, harmless path element everywhere:
//
//   - valid UTF-8, and compared in NFC so that "é" typed two ways is one
//     name, not two objects that look the same;
//   - 1 to 255 bytes, the limit of common file systems;
//   - no "/" or "\" and no "..", so it can never leave its directory;
//   - no control, bidirectional or invisible characters, which break logs
//     and terminals and make one name look like another ("evil\u202Etxt.exe");
//   - none of < > : " | ? *, which Windows refuses or reads as a stream name;
//   - not .git, nor a name Windows or macOS treats as .git (".GIT.", "GIT~1"),
//     because writing into a repository's .git can make git run code;
//   - no dot or space at either end: Windows drops them, so "a." and "a"
//     would be one file, and a leading dot hides files;
//   - not a Windows device name (CON, NUL, COM1, ...), with or without an
//     extension, because opening such a file on Windows opens the device.
//
// The rules are checked in that order and the error reports the first one
// broken: a *corral.Error with code ENAME whose Message says the rule in
// words; Rule returns its stable id.
func Name(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", nameError("invalid_utf8", "not valid UTF-8")
	}
	s = norm.NFC.String(s)
	switch {
	case s == "":
		return "", nameError("empty", "must not be empty")
	case len(s) > maxName:
		return "", nameError("too_long", fmt.Sprintf("longer than %d bytes", maxName))
	case strings.ContainsAny(s, `/\`):
		return "", nameError("separator", `contains a path separator ("/" or "\")`)
	case strings.Contains(s, ".."):
		return "", nameError("dot_dot", `contains ".."`)
	}
	for _, r := range s {
		if invisible(r) {
			return "", nameError("control", fmt.Sprintf("contains a control or invisible character (%U)", r))
		}
	}
	if strings.ContainsAny(s, `<>:"|?*`) {
		return "", nameError("reserved_char", `contains a character Windows reserves (< > : " | ? *)`)
	}
	if isGitDir(s) {
		return "", nameError("git_dir", `names git's directory (".git" or a short form like "GIT~1")`)
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if first == '.' || last == '.' || unicode.IsSpace(first) || unicode.IsSpace(last) {
		return "", nameError("edge_dot_or_space", "starts or ends with a dot or a space")
	}
	if dev := deviceName(s); dev != "" {
		return "", nameError("device_name", fmt.Sprintf("%q is a Windows device name", dev))
	}
	return s, nil
}

// Rule returns the id of the name rule that err reports: one of
// "invalid_utf8", "empty", "too_long", "separator", "dot_dot", "control",
// "reserved_char", "git_dir", "edge_dot_or_space", "device_name". The ids
// never change meaning, so callers and tests may match on them. Rule returns
// "" for an error that did not come from Name.
func Rule(err error) string {
	var re *ruleError
	if errors.As(err, &re) {
		return re.rule
	}
	return ""
}

// ruleError is the cause inside a Name error. It keeps the rule id off the
// user-facing message, so that Rule never has to read text.
type ruleError struct{ rule string }

func (e *ruleError) Error() string { return "rule " + e.rule }

func nameError(rule, msg string) *corral.Error {
	return &corral.Error{
		Code:    corral.ENAME,
		Message: "invalid name: " + msg,
		Err:     &ruleError{rule: rule},
	}
}

// invisible reports whether r is a control character, or a character that
// changes how the text around it looks without being seen itself.
func invisible(r rune) bool {
	switch {
	case unicode.IsControl(r): // C0, DEL and C1, U+0085 among them
		return true
	case unicode.Is(unicode.Bidi_Control, r): // U+061C, U+200E-F, U+202A-E, U+2066-9
		return true
	case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF: // zero-width
		return true
	case r >= 0x206A && r <= 0x206F: // HFS+ ignores these, so ".g\u206Ait" is .git on a Mac
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators: newlines to many readers
		return true
	}
	return false
}

// isGitDir reports whether s is a name that Windows or macOS resolves to
// ".git": any case, trailing dots and spaces ignored (Windows drops them),
// or an NTFS 8.3 short name "GIT~<digits>".
func isGitDir(s string) bool {
	s = strings.ToLower(strings.TrimRight(s, ". "))
	if s == ".git" {
		return true
	}
	digits, ok := strings.CutPrefix(s, "git~")
	return ok && digits != "" && strings.Trim(digits, "0123456789") == ""
}

// devices are the names Windows opens as devices in any directory.
var devices = func() map[string]bool {
	m := map[string]bool{"CON": true, "PRN": true, "AUX": true, "NUL": true, "CONIN$": true, "CONOUT$": true}
	for _, d := range []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³"} {
		m["COM"+d] = true
		m["LPT"+d] = true
	}
	return m
}()

// deviceName returns the device s names, or "". Windows looks only at the
// part before the first dot and ignores the spaces that end it, so
// "con .txt" and "NUL.tar.gz" open devices too.
func deviceName(s string) string {
	base, _, _ := strings.Cut(s, ".")
	base = strings.ToUpper(strings.TrimRight(base, " "))
	if devices[base] {
		return base
	}
	return ""
}
