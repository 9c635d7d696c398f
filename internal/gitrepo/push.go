package gitrepo

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"corral"
	"corral/internal/sanitize"
)

// PushResult is what a push did.
type PushResult struct {
	Branch  string
	Head    string // the commit the remote branch now names
	Commits int    // commits the remote did not have
}

// Push pushes HEAD of dir to branch of the remote at rawURL, as a
// fast-forward only. When the remote branch moved to a commit HEAD does
// not contain, nothing is pushed: ECONFLICT naming the remote's head.
func (c Config) Push(ctx context.Context, dir, rawURL, branch string, auth *Auth) (PushResult, error) {
	c = c.withDefaults()
	u, err := sanitize.RepositoryURL(rawURL)
	if err != nil {
		return PushResult{}, err
	}
	if err := sanitize.Branch(branch); err != nil {
		return PushResult{}, err
	}
	head, err := c.Head(ctx, dir)
	if err != nil {
		return PushResult{}, err
	}
	if head == "" {
		return PushResult{}, corral.Errorf(corral.ECONFLICT, "the repository has no commit to push")
	}
	ref := "refs/heads/" + branch
	rem, err := c.remote(ctx, u, auth)
	if err != nil {
		return PushResult{}, err
	}
	out, err := c.run(ctx, dir, rem, nil, nil, "ls-remote", "--", u.String(), ref)
	if err != nil {
		return PushResult{}, classify("git ls-remote", err)
	}
	remote := ""
	if f := strings.Fields(string(out)); len(f) >= 2 && f[1] == ref {
		remote = f[0]
	}
	if remote != "" && !c.isAncestor(ctx, dir, remote, head) {
		return PushResult{}, nonFastForward(remote)
	}
	count := []string{"rev-list", "--count", head}
	if remote != "" {
		count = append(count, "^"+remote)
	} else {
		count = append(count, "--not", "--remotes")
	}
	out, err = c.run(ctx, dir, nil, nil, nil, count...)
	if err != nil {
		return PushResult{}, corral.Internal("git rev-list", err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if n == 0 && remote == head {
		return PushResult{Branch: branch, Head: head}, nil
	}
	if _, err := c.run(ctx, dir, rem, nil, nil, "push", "--porcelain", "--", u.String(), head+":"+ref); err != nil {
		if ge := (*gitError)(nil); errors.As(err, &ge) && (strings.Contains(ge.stderr, "non-fast-forward") || strings.Contains(ge.stderr, "[rejected]") || strings.Contains(ge.stderr, "fetch first")) {
			// The remote moved between ls-remote and push.
			out, lerr := c.run(ctx, dir, rem, nil, nil, "ls-remote", "--", u.String(), ref)
			if f := strings.Fields(string(out)); lerr == nil && len(f) >= 2 {
				return PushResult{}, nonFastForward(f[0])
			}
			return PushResult{}, nonFastForward("unknown")
		}
		return PushResult{}, classify("git push", err)
	}
	// Remember what the remote has, so the next push counts from there.
	if _, err := c.run(ctx, dir, nil, nil, nil, "update-ref", "refs/remotes/origin/"+branch, head); err != nil {
		return PushResult{}, corral.Internal("git update-ref", err)
	}
	return PushResult{Branch: branch, Head: head, Commits: n}, nil
}

func nonFastForward(remote string) error {
	return &corral.Error{Code: corral.ECONFLICT, Reason: "non_fast_forward",
		Message: "the remote branch moved to " + remote + ", which this repository does not contain: the push would not be a fast-forward"}
}

func (c Config) isAncestor(ctx context.Context, dir, a, b string) bool {
	if _, err := c.run(ctx, dir, nil, nil, nil, "cat-file", "-e", a+"^{commit}"); err != nil {
		return false
	}
	_, err := c.run(ctx, dir, nil, nil, nil, "merge-base", "--is-ancestor", a, b)
	return err == nil
}
