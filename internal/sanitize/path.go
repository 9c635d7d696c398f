package sanitize

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"corral"
)

// PathElement checks one element of a workspace path and returns it in NFC
// form. The rules are Name's, with one difference: an element may start
// with a dot, so that .gitignore and .github are ordinary paths. It may not
// be "." or "..", and every other rule of Name stays (no trailing dot, no
// leading or trailing space, not .git or a name that resolves to it, no
// device name, no control, bidi or invisible character).
func PathElement(s string) (string, error) {
	if s == "." {
		return "", nameError("dot", `is "."`)
	}
	n, err := Name(s)
	if err == nil || Rule(err) != "edge_dot_or_space" || !strings.HasPrefix(s, ".") {
		return n, err
	}
	// Name stopped at the leading dot, which is allowed here. The rules it
	// checks after that one are the trailing dot or space and the device
	// names, and a name starting with a dot is never a device (Windows
	// looks at what comes before the first dot).
	n = norm.NFC.String(s)
	if last, _ := utf8.DecodeLastRuneInString(n); last == '.' || unicode.IsSpace(last) {
		return "", nameError("edge_dot_or_space", "ends with a dot or a space")
	}
	return n, nil
}

// Path checks a workspace path: relative, slash-separated, clean (no empty,
// "." or ".." element, no leading or trailing slash), every element a valid
// PathElement, at most 4096 bytes. It returns the path with each element in
// NFC form. "" is not a path: callers that mean the root say so
// themselves. The error is Name's, prefixed with the element it concerns.
func Path(p string) (string, error) {
	if p == "" {
		return "", nameErrorWrap("empty", "invalid path: empty")
	}
	if len(p) > maxPath {
		return "", nameErrorWrap("too_long", fmt.Sprintf("invalid path: longer than %d bytes", maxPath))
	}
	if strings.HasPrefix(p, "/") {
		return "", nameErrorWrap("absolute", "invalid path: must be relative to the workspace")
	}
	els := strings.Split(p, "/")
	for i, el := range els {
		if el == "" {
			return "", nameErrorWrap("empty", "invalid path: empty element (a doubled or trailing slash)")
		}
		if el == ".." {
			return "", nameErrorWrap("dot_dot", `invalid path: ".." leaves the workspace`)
		}
		n, err := PathElement(el)
		if err != nil {
			return "", &corral.Error{Code: corral.ENAME, Err: err,
				Message: fmt.Sprintf("invalid path: element %q: %s", Escape(el), strings.TrimPrefix(corral.ErrorMessage(err), "invalid name: "))}
		}
		els[i] = n
	}
	return strings.Join(els, "/"), nil
}

// maxPath is the longest workspace path: Linux's PATH_MAX.
const maxPath = 4096

func nameErrorWrap(rule, msg string) *corral.Error {
	return &corral.Error{Code: corral.ENAME, Message: msg, Err: &ruleError{rule: rule}}
}

// StoredPath checks a path found on disk (in a staged tree an agent wrote,
// or in an archive): it must pass Path and already be in the form Path
// returns, because applying it would otherwise write a different name than
// the one a person reviewed. It returns the rule broken ("" when none) and
// a sentence saying so.
func StoredPath(p string) (rule, why string) {
	n, err := Path(p)
	if err != nil {
		return Rule(err), corral.ErrorMessage(err)
	}
	if n != p {
		return "not_nfc", "invalid path: not in Unicode normal form C (it would be written under another name than the one shown)"
	}
	return "", ""
}

// Fold is the form under which two paths are one file on a case-insensitive
// or normalising file system (macOS, Windows): NFC, then Unicode case
// folding. Two different paths with the same Fold collide there.
func Fold(p string) string {
	return folder.String(norm.NFC.String(p))
}

var folder = cases.Fold()

// Escape shows a name exactly as its bytes are, in printable ASCII-safe
// form: a valid, printable, non-invisible character stands for itself; a
// control, bidi or invisible character is \n, \t, \x1b or \u202e; a byte
// that is not UTF-8 is \xff; a backslash is \\. Two different byte strings
// never escape to the same text, so a reviewer sees the name as it is on
// disk, and a newline in a name cannot start a new line of a diff.
func Escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case invisible(r) || !strconv.IsPrint(r):
			q := strconv.QuoteRune(r) // 'x' with Go escapes
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
