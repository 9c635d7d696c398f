package sanitize

import (
	"strings"

	"corral"
)

// maxRef bounds a branch or tag name: git allows more, a person types less.
const maxRef = 255

// RefName checks a branch or tag name to clone (git clone --branch): what
// git check-ref-format --allow-onelevel accepts under a refs/ prefix (see
// gitRefName: git's rules written out here, so that no process is started
// for it), at most 255 bytes, and not starting with "-", which git would
// read as an option. Code EINVALID.
func RefName(ref string) error {
	if len(ref) > maxRef || strings.HasPrefix(ref, "-") || !gitRefName("refs/x/"+ref) {
		return corral.Errorf(corral.EINVALID, "ref is not a valid branch or tag name")
	}
	return nil
}

// Branch checks a branch name to push to: what git check-ref-format
// --branch accepts (a valid ref name under refs/heads, not starting with
// "-", not "HEAD"), at most 255 bytes, and by Corral's own rule a plain
// name under refs/heads, so that a name that would say something else in a
// push's refspec ("refs/tags/x", which would make a tag; "+main", a forced
// push; "@", HEAD's branch) is refused too. Code EINVALID.
func Branch(name string) error {
	if name == "" || len(name) > maxRef || name == "@" || name == "HEAD" ||
		strings.HasPrefix(name, "-") || strings.HasPrefix(name, "+") || strings.HasPrefix(name, "refs/") ||
		!gitRefName("refs/heads/"+name) {
		return corral.Errorf(corral.EINVALID, "branch %q is not a valid git branch name", Escape(name))
	}
	return nil
}

// gitRefName reports whether name is a valid ref name by git's rules
// (git-check-ref-format(1), and refs.c's check_refname_format, which
// enforces them), numbered as the manual numbers them:
//
//  1. no slash-separated component begins with "." or ends with ".lock";
//  2. it has at least one "/" (callers always pass one: "refs/...");
//  3. no ".." anywhere;
//  4. no ASCII control character (below 0x20, or 0x7f), space, "~", "^"
//     or ":" anywhere;
//  5. no "?", "*" or "[" anywhere;
//  6. it does not begin or end with "/", nor hold "//";
//  7. it does not end with ".";
//  8. no "@{" anywhere;
//  9. it is not "@";
//  10. no "\" anywhere.
//
// Bytes from 0x80 up, UTF-8 or not, are git's to allow and allowed.
func gitRefName(name string) bool {
	if name == "" || name == "@" || // 9
		!strings.Contains(name, "/") || // 2
		strings.Contains(name, "..") || // 3
		strings.HasSuffix(name, ".") || // 7
		strings.Contains(name, "@{") { // 8
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:", c) >= 0 || // 4
			strings.IndexByte("?*[", c) >= 0 || // 5
			c == '\\' { // 10
			return false
		}
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || // 6: a leading, trailing or doubled "/"
			strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") { // 1
			return false
		}
	}
	return true
}
