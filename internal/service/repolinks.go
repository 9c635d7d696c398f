package service

import (
	"net/url"
	"strings"
)

// Bounds of a suggested branch's parts.
const (
	maxBranchSlug = 40
	branchIDChars = 6
)

// SuggestedBranch is the branch a push of agent id named name goes to
// when the person names none: corral/<slug of the name>-<the start of
// the id's random part>. The same agent gets the same branch every time,
// and two agents of one name get two.
func SuggestedBranch(id, name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			if b.Len() >= maxBranchSlug {
				break
			}
			continue
		}
		dash = true
	}
	slug := b.String()
	if slug == "" {
		slug = "agent"
	}
	short := id
	if _, rest, ok := strings.Cut(id, "_"); ok {
		short = rest
	}
	short = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.ToLower(short))
	if len(short) > branchIDChars {
		short = short[:branchIDChars]
	}
	if short == "" {
		return "corral/" + slug
	}
	return "corral/" + slug + "-" + short
}

// PullRequestURL is the page where a person opens a pull (or merge)
// request of branch into base on the host of the repository at repoURL,
// for the hosts whose URLs are known: GitHub, GitLab, Gitea and Forgejo
// (Codeberg), Bitbucket. "" for any other host, or when there is nothing
// to ask (the branch is base). It is a link, made without asking the
// host anything.
func PullRequestURL(repoURL, base, branch string) string {
	u, err := url.Parse(repoURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || branch == "" || branch == base {
		return ""
	}
	host := strings.ToLower(u.Hostname())
	path := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	segs := strings.Split(path, "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return ""
		}
	}
	repo := "https://" + strings.ToLower(u.Host) + "/" + escapePath(segs)
	b, br := escapePath(strings.Split(base, "/")), escapePath(strings.Split(branch, "/"))
	switch {
	case host == "github.com" && len(segs) == 2:
		if base == "" {
			return repo + "/compare/" + br + "?expand=1"
		}
		return repo + "/compare/" + b + "..." + br + "?expand=1"
	case (host == "gitlab.com" || strings.Contains(host, "gitlab")) && len(segs) >= 2:
		q := "merge_request%5Bsource_branch%5D=" + url.QueryEscape(branch)
		if base != "" {
			q += "&merge_request%5Btarget_branch%5D=" + url.QueryEscape(base)
		}
		return repo + "/-/merge_requests/new?" + q
	case (host == "codeberg.org" || strings.Contains(host, "gitea") || strings.Contains(host, "forgejo")) && len(segs) == 2 && base != "":
		return repo + "/compare/" + b + "..." + br
	case host == "bitbucket.org" && len(segs) == 2:
		q := "source=" + url.QueryEscape(branch)
		if base != "" {
			q += "&dest=" + url.QueryEscape(base)
		}
		return repo + "/pull-requests/new?" + q
	}
	return ""
}

// escapePath escapes each segment of a path, keeping the slashes: a
// branch corral/x stays readable in a compare URL.
func escapePath(segs []string) string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = url.PathEscape(s)
	}
	return strings.Join(out, "/")
}
