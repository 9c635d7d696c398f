package service

import (
	"net/url"
	"path"
	"strings"

	"corral"
	"corral/internal/sanitize"
)

// Bounds of a credential's repositories.
const (
	maxRepositoryPatterns = 100
	maxRepositoryPattern  = 512
)

// RepositoryPatterns checks and normalises the repositories a credential
// for host may be used for (RepositoryPattern each), in their order, once
// each.
func RepositoryPatterns(patterns []string, host string) ([]string, error) {
	if len(patterns) > maxRepositoryPatterns {
		return nil, corral.Errorf(corral.EINVALID, "a credential may name at most %d repositories", maxRepositoryPatterns)
	}
	out := make([]string, 0, len(patterns))
	seen := map[string]bool{}
	for _, p := range patterns {
		n, err := RepositoryPattern(p, host)
		if err != nil {
			return nil, err
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// RepositoryPattern checks and normalises one pattern of the repositories
// a credential for host may be used for: host/path, the host the
// credential's (normalised as sanitize.Host does), the path a
// repository's, in which * stands for any part of one segment
// ("github.com/acme/*" is every repository of acme, not those of a
// subgroup). A leading https:// and a trailing .git or / are dropped.
func RepositoryPattern(s, host string) (string, error) {
	bad := func(why string) error {
		return corral.Errorf(corral.EINVALID, "repository %q %s: give host/owner/name, like github.com/acme/app or github.com/acme/*", s, why)
	}
	if len(s) > maxRepositoryPattern {
		return "", corral.Errorf(corral.EINVALID, "a repository pattern is longer than %d bytes", maxRepositoryPattern)
	}
	p := strings.TrimPrefix(strings.TrimSpace(s), "https://")
	h, rest, ok := strings.Cut(p, "/")
	if !ok {
		return "", bad("has no path")
	}
	h, err := sanitize.Host(h)
	if err != nil {
		return "", bad("has a host that is not valid")
	}
	if h != host {
		return "", bad("is not on the credential's host " + host)
	}
	rest = strings.TrimSuffix(strings.TrimSuffix(rest, "/"), ".git")
	if rest == "" || strings.ContainsAny(rest, "?#\\[]\x00\r\n") || strings.Contains(rest, "//") {
		return "", bad("has an empty or malformed path")
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == "." || seg == ".." {
			return "", bad("has a . or .. segment")
		}
	}
	if _, err := path.Match(rest, ""); err != nil {
		return "", bad("is not a valid pattern")
	}
	return h + "/" + rest, nil
}

// repositoryKey is a repository URL as patterns match it: the normalised
// host, then the path as the server reads it (cleaned), without .git.
func repositoryKey(u *url.URL) (string, error) {
	h, err := sanitize.Host(u.Host)
	if err != nil {
		return "", err
	}
	p := strings.TrimSuffix(path.Clean("/"+u.Path), "/")
	return h + strings.TrimSuffix(p, ".git"), nil
}

// allows reports whether a credential may be used for the repository at
// rawURL: one of its patterns matches it, host and every segment.
func allows(c corral.CodeCredential, rawURL string) bool {
	u, err := sanitize.RepositoryURL(rawURL)
	if err != nil {
		return false
	}
	key, err := repositoryKey(u)
	if err != nil {
		return false
	}
	host, rest, _ := strings.Cut(key, "/")
	for _, p := range c.Repositories {
		// The host is compared as it is: an IPv6 host's brackets are not
		// a pattern's character class.
		ph, pp, _ := strings.Cut(p, "/")
		if ok, err := path.Match(pp, rest); ph == host && err == nil && ok {
			return true
		}
	}
	return false
}
