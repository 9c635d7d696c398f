// Package glob matches Corral's globs (a policy's protected, risky and
// secret paths) against slash-separated paths relative to a workspace root.
// It is pure: the services check a policy's globs with it when the policy
// is saved, and the machine that holds the workspace matches them.
//
// Every glob is matched against a slash-separated path relative to the
// workspace root:
//
//   - a glob without a slash matches a name at any depth, like .gitignore:
//     "*.pem" matches "a.pem" and "keys/b.pem";
//   - a glob with a slash is anchored at the root (a leading slash is
//     allowed and means the same): "secrets/*.pem" matches "secrets/a.pem"
//     and not "x/secrets/a.pem";
//   - "**" as a whole element matches any number of elements, none
//     included: "config/**/*.key";
//   - a glob that matches a directory matches everything under it:
//     "secrets" covers "secrets/a/b".
//
// The other metacharacters are path.Match's. Configured globs match case
// for case; workspace's built-in names match in any case (it lowers the
// path first), because a workspace is often checked out on a
// case-insensitive filesystem where ".GIT/config" is ".git/config".
package glob

import (
	"fmt"
	"path"
	"strings"
)

// Valid reports whether pattern is a glob this package can match: a
// policy should refuse the others when it is saved, since a malformed glob
// matches nothing.
func Valid(pattern string) error {
	p := strings.TrimPrefix(pattern, "/")
	if p == "" {
		return fmt.Errorf("empty glob")
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("glob %q: empty, . or .. element", pattern)
		}
		if _, err := path.Match(el, ""); err != nil {
			return fmt.Errorf("glob %q: %w", pattern, err)
		}
	}
	return nil
}

// Match reports whether the relative path p, or a directory above it,
// matches pattern (see the package comment).
func Match(pattern, p string) bool {
	if pattern == "" || p == "" {
		return false
	}
	names := strings.Split(p, "/")
	if !strings.Contains(pattern, "/") && pattern != "**" {
		for _, n := range names {
			if ok, _ := path.Match(pattern, n); ok {
				return true
			}
		}
		return false
	}
	pat := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	for i := 1; i <= len(names); i++ {
		if Elems(pat, names[:i]) {
			return true
		}
	}
	return false
}

// Elems matches whole paths, element by element, "**" matching any
// run of elements.
func Elems(pat, names []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := range len(names) + 1 {
				if Elems(pat, names[i:]) {
					return true
				}
			}
			return false
		}
		if len(names) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], names[0]); !ok {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	return len(names) == 0
}
