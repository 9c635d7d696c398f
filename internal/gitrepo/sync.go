package gitrepo

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"corral"
	"corral/internal/sanitize"
)

// Sync statuses: what a sync did to the workspace.
const (
	SyncUpToDate    = "up_to_date"   // the workspace already contained upstream
	SyncFastForward = "fast_forward" // the workspace moved to upstream
	SyncRebased     = "rebased"      // the workspace's own commits were replayed onto upstream
)

// SyncResult is what a sync did.
type SyncResult struct {
	Head     string // the commit HEAD names after the sync
	Upstream string // the commit the remote's ref named
	Rebased  int    // the workspace's own commits replayed onto Upstream
	Status   string // SyncUpToDate, SyncFastForward or SyncRebased
}

// Fetch fetches ref (a branch) of the remote at rawURL into dir's
// repository, without touching its tree or its branch, and returns the
// commit it names. refs/remotes/origin/<ref> remembers it, as a push does.
// A fetch that grows the repository past Config.MaxBytes is stopped
// (ETOOLARGE).
func (c Config) Fetch(ctx context.Context, dir, rawURL, ref string, auth *Auth) (string, error) {
	c = c.withDefaults()
	u, err := sanitize.RepositoryURL(rawURL)
	if err != nil {
		return "", err
	}
	if err := sanitize.Branch(ref); err != nil {
		return "", err
	}
	rem, err := c.remote(ctx, u, auth)
	if err != nil {
		return "", err
	}
	tracking := "refs/remotes/origin/" + ref
	watched, stop := c.watchSize(ctx, filepath.Join(dir, ".git"))
	_, err = c.run(watched, dir, rem, nil, nil, "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head",
		"--", u.String(), "+refs/heads/"+ref+":"+tracking)
	if stop() {
		return "", c.tooLarge()
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", &corral.Error{Code: corral.EUNAVAIL, Message: "the sync was stopped", Op: "git fetch", Err: ctx.Err()}
		}
		return "", classify("git fetch", err)
	}
	out, err := c.run(ctx, dir, nil, nil, nil, "rev-parse", "--verify", "-q", tracking+"^{commit}")
	if err != nil {
		return "", corral.Internal("git rev-parse", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Rebase brings dir's branch to upstream (a commit Fetch brought): a
// fast-forward when HEAD is contained in upstream, nothing when upstream
// is contained in HEAD, and otherwise a rebase of the commits HEAD has and
// upstream lacks onto upstream, with Config.Committer committing (each
// keeps its author and message). A rebase that does not apply cleanly is
// aborted and refused (ECONFLICT, reason sync_conflict, naming the
// conflicting paths): the repository, its tree and its branch are as they
// were. A tree with changes not committed is refused before anything
// runs; so is an upstream tree past Config.Tree.
func (c Config) Rebase(ctx context.Context, dir, upstream string) (SyncResult, error) {
	c = c.withDefaults()
	res := SyncResult{Upstream: upstream}
	head, err := c.head(ctx, dir)
	if err != nil {
		return res, err
	}
	if err := c.clean(ctx, dir); err != nil {
		return res, err
	}
	switch {
	case head != "" && c.isAncestor(ctx, dir, upstream, head):
		res.Head, res.Status = head, SyncUpToDate
		return res, nil
	case head == "" || c.isAncestor(ctx, dir, head, upstream):
		if err := c.checkTree(ctx, dir, upstream); err != nil {
			return res, err
		}
		if err := c.fastForward(ctx, dir, head, upstream); err != nil {
			return res, err
		}
		res.Head, res.Status = upstream, SyncFastForward
		return res, nil
	}
	if err := c.checkTree(ctx, dir, upstream); err != nil {
		return res, err
	}
	branch := c.Branch(ctx, dir)
	if branch == "" {
		return res, corral.Errorf(corral.ECONFLICT, "the repository is on no branch: nothing to rebase")
	}
	env := []string{
		"GIT_COMMITTER_NAME=" + c.Committer.Name, "GIT_COMMITTER_EMAIL=" + c.Committer.Email,
		"GIT_EDITOR=true", "GIT_SEQUENCE_EDITOR=true",
	}
	_, rerr := c.run(ctx, dir, nil, nil, env, "rebase", "--quiet", "--no-autostash", "--no-autosquash", "--no-update-refs", "--no-verify", upstream)
	if rerr != nil {
		return res, c.undo(ctx, dir, branch, head, rerr)
	}
	if res.Head, err = c.head(ctx, dir); err != nil {
		return res, err
	}
	out, err := c.run(ctx, dir, nil, nil, nil, "rev-list", "--count", res.Head, "^"+upstream)
	if err != nil {
		return res, corral.Internal("git rev-list", err)
	}
	res.Rebased, _ = strconv.Atoi(strings.TrimSpace(string(out)))
	res.Status = SyncRebased
	return res, nil
}

// clean refuses a tree whose tracked files differ from HEAD (a commit
// that failed leaves its files applied): a sync would carry them along
// unrecorded, or lose them.
func (c Config) clean(ctx context.Context, dir string) error {
	out, err := c.run(ctx, dir, nil, nil, nil, "status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules")
	if err != nil {
		return corral.Internal("git status", err)
	}
	if paths := statusPaths(out); len(paths) > 0 {
		return &corral.Error{Code: corral.ECONFLICT, Reason: "uncommitted",
			Message: "the workspace has changes that are not committed (" + listPaths(paths) + "): commit them before a sync"}
	}
	return nil
}

// fastForward moves the branch (or an unborn HEAD) from head to upstream,
// updating the tree. git refuses before it writes anything when a file it
// does not track would be overwritten.
func (c Config) fastForward(ctx context.Context, dir, head, upstream string) error {
	var err error
	if head == "" {
		// An empty repository's unborn branch: read the tree in, then name it.
		if _, err = c.run(ctx, dir, nil, nil, nil, "read-tree", "-m", "-u", upstream); err == nil {
			_, err = c.run(ctx, dir, nil, nil, nil, "update-ref", "HEAD", upstream)
		}
	} else {
		_, err = c.run(ctx, dir, nil, nil, nil, "merge", "--ff-only", "--quiet", "--no-edit", upstream)
	}
	if err == nil {
		return nil
	}
	if ge := (*gitError)(nil); errors.As(err, &ge) && strings.Contains(ge.stderr, "would be overwritten") {
		return &corral.Error{Code: corral.ECONFLICT, Reason: "sync_conflict", Op: "git merge", Err: err,
			Message: "upstream adds files the workspace holds untracked (" + listPaths(overwritten(ge.stderr)) + "): nothing was changed"}
	}
	return corral.Internal("git merge", err)
}

// undo aborts a rebase that stopped, checks that the branch, HEAD and
// tree are back where they were, and answers the refusal: the paths in
// conflict, or why git stopped.
func (c Config) undo(ctx context.Context, dir, branch, head string, rerr error) error {
	out, _ := c.run(ctx, dir, nil, nil, nil, "diff", "--name-only", "--diff-filter=U", "-z")
	conflicts := set(out)
	var paths []string
	for p := range conflicts {
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		if ge := (*gitError)(nil); errors.As(rerr, &ge) && strings.Contains(ge.stderr, "would be overwritten") {
			paths = overwritten(ge.stderr)
		}
	}
	// Not the caller's context: a rebase half done must not stay so.
	rec := context.WithoutCancel(ctx)
	if _, err := c.run(rec, dir, nil, nil, nil, "rebase", "--abort"); err != nil && !strings.Contains(err.Error(), "No rebase in progress") {
		return corral.Internal("git rebase --abort", errors.Join(rerr, err))
	}
	now, _ := c.head(rec, dir)
	if now != head || c.Branch(rec, dir) != branch {
		return corral.Internal("git rebase --abort", errors.Join(rerr, errors.New("HEAD is at "+now+", not back at "+head)))
	}
	if err := c.clean(rec, dir); err != nil {
		return corral.Internal("git rebase --abort", errors.Join(rerr, err))
	}
	slices.Sort(paths)
	msg := "the workspace's commits do not apply cleanly onto upstream"
	if len(paths) > 0 {
		msg += ": conflict in " + listPaths(paths)
	}
	return &corral.Error{Code: corral.ECONFLICT, Reason: "sync_conflict", Op: "git rebase", Err: rerr,
		Message: msg + "; nothing was changed"}
}

// statusPaths reads the paths of git status --porcelain=v1 -z.
func statusPaths(z []byte) []string {
	var paths []string
	recs := strings.Split(string(z), "\x00")
	for i := 0; i < len(recs); i++ {
		r := recs[i]
		if len(r) < 4 {
			continue
		}
		paths = append(paths, r[3:])
		if r[0] == 'R' || r[0] == 'C' {
			i++ // the rename's source follows
		}
	}
	return paths
}

// overwritten reads the paths git lists (one per line, indented by a tab)
// after "would be overwritten".
func overwritten(stderr string) []string {
	var paths []string
	for _, line := range strings.Split(stderr, "\n") {
		if p, ok := strings.CutPrefix(line, "\t"); ok && p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

// listPaths names up to ten paths, quoted, and how many more there are.
func listPaths(paths []string) string {
	const most = 10
	q := make([]string, 0, most)
	for i, p := range paths {
		if i == most {
			break
		}
		q = append(q, strconv.Quote(p))
	}
	s := strings.Join(q, ", ")
	if len(paths) > most {
		s += " and " + strconv.Itoa(len(paths)-most) + " more"
	}
	return s
}
