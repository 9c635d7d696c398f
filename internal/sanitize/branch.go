package sanitize

import (
	"strings"

	"corral"
)

// maxBranch bounds a branch name: git allows more, a person types less.
const maxBranch = 255

// Branch checks a branch name to push to, by git's own rules for a ref
// name (git check-ref-format --branch, written out here so that no
// process is started for it) and Corral's: a branch is a plain name under
// refs/heads, so a name that would say something else in a push's refspec
// ("refs/tags/x", which would make a tag; "+main", a forced push; "HEAD")
// is refused too. Code EINVALID.
//
// git's rules: no component (between slashes) starts with "." or ends
// with ".lock"; no "..", "@{", "//" or "\"; no control character, space,
// "~", "^", ":", "?", "*" or "["; it does not start or end with "/", end
// with ".", start with "-", or equal "@".
func Branch(name string) error {
	bad := func() error {
		return corral.Errorf(corral.EINVALID, "branch %q is not a valid git branch name", Escape(name))
	}
	if name == "" || len(name) > maxBranch || name == "@" || name == "HEAD" ||
		strings.HasPrefix(name, "-") || strings.HasPrefix(name, "+") || strings.HasPrefix(name, "refs/") ||
		strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//") {
		return bad()
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return bad()
		}
	}
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return bad()
		}
	}
	return nil
}
