package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"corral"
)

// Commit stages paths (all changes of the tree when paths is nil) and
// commits them as author, Config.Committer committing. It returns the new
// commit, or "" when there was nothing to commit. The paths go to git on
// its standard input, never as arguments: a path is the user's text.
func (c Config) Commit(ctx context.Context, dir string, author Identity, message string, paths []string) (string, error) {
	c = c.withDefaults()
	if paths == nil {
		if _, err := c.run(ctx, dir, nil, nil, nil, "add", "-A"); err != nil {
			return "", corral.Internal("git add", err)
		}
	} else if paths, err := c.committable(ctx, dir, paths); err != nil {
		return "", err
	} else if len(paths) > 0 {
		if _, err := c.run(ctx, dir, nil, nulList(paths), literal, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return "", corral.Internal("git add", err)
		}
	}
	if _, err := c.run(ctx, dir, nil, nil, nil, "diff", "--cached", "--quiet"); err == nil {
		return "", nil
	}
	env := []string{
		"GIT_AUTHOR_NAME=" + author.Name, "GIT_AUTHOR_EMAIL=" + author.Email,
		"GIT_COMMITTER_NAME=" + c.Committer.Name, "GIT_COMMITTER_EMAIL=" + c.Committer.Email,
	}
	if _, err := c.run(ctx, dir, nil, strings.NewReader(message), env, "commit", "-q", "--no-verify", "--no-gpg-sign", "--cleanup=verbatim", "-F", "-"); err != nil {
		return "", corral.Internal("git commit", err)
	}
	return c.Head(ctx, dir)
}

// literal makes git read a path as the user's text: "*" or ":(glob)x"
// never means more. (check-ignore takes paths, not pathspecs, and refuses it.)
var literal = []string{"GIT_LITERAL_PATHSPECS=1"}

// committable keeps the paths git can stage: not ignored by the
// repository's .gitignore (what the project keeps out of git stays out,
// such as build output), and either on disk or tracked (a deletion).
// git add fails on the others, and one odd path must not lose a commit.
func (c Config) committable(ctx context.Context, dir string, paths []string) ([]string, error) {
	out, err := c.run(ctx, dir, nil, nulList(paths), nil, "check-ignore", "-z", "--stdin")
	if err != nil && exitCode(err) != 1 { // 1: none is ignored
		return nil, corral.Internal("git check-ignore", err)
	}
	ignored := set(out)
	// The whole index: ls-files takes no pathspec file, and argv is bounded.
	out, err = c.run(ctx, dir, nil, nil, nil, "ls-files", "-z", "--cached")
	if err != nil {
		return nil, corral.Internal("git ls-files", err)
	}
	tracked := set(out)
	var keep []string
	for _, p := range paths {
		if ignored[p] {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p))); err == nil || tracked[p] || trackedUnder(tracked, p) {
			keep = append(keep, p)
		}
	}
	return keep, nil
}

// trackedUnder reports whether a tracked file is under directory p (a
// directory deleted with everything in it).
func trackedUnder(tracked map[string]bool, p string) bool {
	for f := range tracked {
		if strings.HasPrefix(f, p+"/") {
			return true
		}
	}
	return false
}

func nulList(paths []string) *bytes.Buffer {
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return &b
}

func set(nul []byte) map[string]bool {
	m := map[string]bool{}
	for _, p := range strings.Split(string(nul), "\x00") {
		if p != "" {
			m[p] = true
		}
	}
	return m
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Commit is one commit of the history.
type Commit struct {
	SHA         string
	Author      Identity
	CommittedAt time.Time
	Message     string
}

// Log returns up to n commits reachable from HEAD, newest first.
func (c Config) Log(ctx context.Context, dir string, n int) ([]Commit, error) {
	c = c.withDefaults()
	if h, _ := c.Head(ctx, dir); h == "" {
		return nil, nil
	}
	out, err := c.run(ctx, dir, nil, nil, nil, "log", "-z", "-n", strconv.Itoa(max(1, n)), "--format=%H%x1f%an%x1f%ae%x1f%cI%x1f%B")
	if err != nil {
		return nil, corral.Internal("git log", err)
	}
	var list []Commit
	for _, rec := range strings.Split(string(out), "\x00") {
		f := strings.SplitN(rec, "\x1f", 5)
		if len(f) != 5 {
			continue
		}
		at, _ := time.Parse(time.RFC3339, f[3])
		list = append(list, Commit{SHA: strings.TrimSpace(f[0]), Author: Identity{Name: f[1], Email: f[2]}, CommittedAt: at.UTC(), Message: strings.TrimRight(f[4], "\n")})
	}
	return list, nil
}
