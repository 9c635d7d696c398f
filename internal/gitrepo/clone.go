package gitrepo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"corral"
	"corral/internal/sanitize"
)

// Clone clones the repository at rawURL (ref: a branch or tag, "" for the
// remote's default) into dir, which must not exist. progress, when set,
// hears the percentage done (0 to 100). A clone that grows past
// Config.MaxBytes is killed (ETOOLARGE); a tree past Config.Tree is
// refused before it is checked out (ETOOLARGE naming the limit). On any
// failure dir is removed: the caller never finds half a clone.
func (c Config) Clone(ctx context.Context, rawURL, ref string, auth *Auth, dir string, progress func(int)) (err error) {
	c = c.withDefaults()
	u, err := sanitize.RepositoryURL(rawURL)
	if err != nil {
		return err
	}
	if ref != "" {
		if err := sanitize.RefName(ref); err != nil {
			return err
		}
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	rem, err := c.remote(ctx, u, auth)
	if err != nil {
		return err
	}
	watched, stop := c.watchSize(ctx, dir)
	err = c.clone(watched, u.String(), ref, rem, dir, progress)
	if stop() {
		return c.tooLarge()
	}
	if err != nil {
		if ctx.Err() != nil {
			return &corral.Error{Code: corral.EUNAVAIL, Message: "the clone was stopped", Op: "git clone", Err: ctx.Err()}
		}
		return err
	}
	if dirSize(dir) > c.MaxBytes {
		return c.tooLarge()
	}
	if progress != nil {
		progress(100)
	}
	return nil
}

// clone fetches without checking out, checks the tree it got against
// c.Tree, and only then checks it out: a tree past a limit is refused
// before a file of it is written.
func (c Config) clone(ctx context.Context, url, ref string, rem *remote, dir string, progress func(int)) error {
	args := []string{"clone", "--progress", "--no-checkout", "--no-recurse-submodules"}
	if ref != "" {
		args = append(args, "--branch", ref)
	}
	args = append(args, "--", url, dir)
	if err := c.runProgress(ctx, "", rem, progress, args...); err != nil {
		return classify("git clone", err)
	}
	head, err := c.head(ctx, dir)
	if err != nil || head == "" {
		return err // "": an empty repository, nothing to check out
	}
	if err := c.checkTree(ctx, dir, head); err != nil {
		return err
	}
	if err := c.runProgress(ctx, dir, nil, progress, "checkout", "--progress", "--force", "HEAD"); err != nil {
		return classifyCheckout(err)
	}
	return nil
}

// tooLarge is the answer for a clone past MaxBytes on disk.
func (c Config) tooLarge() error {
	return corral.Errorf(corral.ETOOLARGE, "the repository is too large: more than %d bytes on disk (--clone-max-bytes)", c.MaxBytes)
}

// watchSize watches dir's size while a clone runs: the returned context is
// cancelled (and git with it) when dir passes MaxBytes, so a repository
// larger than the limit is stopped on the way, not after it filled the
// disk. stop ends the watch and says whether it fired. A walk stats every
// file, so the watcher rests ten times as long as its last walk took (at
// least 200 ms): a tenth of a core at most, however large the clone (a
// fixed 200 ms made a 10,000-file clone 1.9 times as slow as git's own).
func (c Config) watchSize(ctx context.Context, dir string) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	fired := make(chan struct{})
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				start := time.Now()
				if dirSize(dir) > c.MaxBytes {
					close(fired)
					cancel()
					return
				}
				t.Reset(max(200*time.Millisecond, 10*time.Since(start)))
			}
		}
	}()
	return ctx, func() bool {
		close(quit)
		<-done
		cancel()
		select {
		case <-fired:
			return true
		default:
			return false
		}
	}
}

// runProgress runs git with its progress (standard error) turned into
// percentages for progress. A failure is a *gitError carrying the end of
// standard error, or noGit's answer.
func (c Config) runProgress(ctx context.Context, dir string, rem *remote, progress func(int), args ...string) error {
	cmd, cleanup, err := c.command(ctx, dir, rem, args...)
	if err != nil {
		return err
	}
	defer cleanup()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	cmd.Stderr = pw
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		readProgress(pr, &tail{max: 8 << 10, buf: &stderr}, progress)
	}()
	if err := cmd.Start(); err != nil {
		pw.Close()
		wg.Wait()
		return noGit(err)
	}
	werr := cmd.Wait()
	pw.Close()
	wg.Wait()
	if werr != nil {
		return &gitError{args: args[0], stderr: stderr.String(), err: werr}
	}
	return nil
}

// head is the commit HEAD names in a fresh clone, "" when the repository
// has none (git rev-parse --verify -q exits 1 and says nothing); any other
// failure is an error, never taken for an empty repository.
func (c Config) head(ctx context.Context, dir string) (string, error) {
	out, err := c.run(ctx, dir, nil, nil, nil, "rev-parse", "--verify", "-q", "HEAD")
	var exit *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimSpace(string(out)), nil
	case errors.As(err, &exit) && exit.ExitCode() == 1 && len(out) == 0 && ctx.Err() == nil:
		return "", nil
	}
	var ce *corral.Error
	if errors.As(err, &ce) {
		return "", err
	}
	return "", corral.Internal("git rev-parse", err)
}

// checkTree lists rev's tree as git reads it (ls-tree, consumed as it
// comes: a tree of millions of entries costs no memory here) and refuses
// it at the first entry past a limit of c.Tree. git is stopped there.
func (c Config) checkTree(ctx context.Context, dir, rev string) error {
	if c.Tree == (TreeLimits{}) {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, cleanup, err := c.command(ctx, dir, nil, "ls-tree", "-r", "-t", "-l", "-z", "--full-tree", rev)
	if err != nil {
		return err
	}
	defer cleanup()
	var stderr bytes.Buffer
	cmd.Stderr = &tail{max: 8 << 10, buf: &stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return corral.Internal("git ls-tree", err)
	}
	if err := cmd.Start(); err != nil {
		return noGit(err)
	}
	lerr := c.Tree.check(out)
	if lerr != nil {
		cancel() // git need not list the rest
	}
	werr := cmd.Wait()
	switch {
	case lerr != nil:
		return lerr
	case werr != nil:
		return corral.Internal("git ls-tree", &gitError{args: "ls-tree", stderr: stderr.String(), err: werr})
	}
	return nil
}

// check reads a listing of git ls-tree -r -t -l -z, one record at a time
// ("<mode> <type> <object> <size>\t<path>\0"), and refuses the tree at the
// first record that passes a limit. Only the record's head is kept; the
// path is skipped, however long.
func (lim TreeLimits) check(r io.Reader) error {
	br := bufio.NewReaderSize(r, 4096)
	var files, dirs, size int64
	for {
		head, err := br.ReadSlice('\t')
		if err == io.EOF && len(head) == 0 {
			return nil
		}
		f := strings.Fields(string(head))
		if err != nil || len(f) != 4 {
			return corral.Internal("git ls-tree", fmt.Errorf("unexpected listing %q: %v", head, err))
		}
		switch f[1] {
		case "blob":
			n, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil || n < 0 {
				return corral.Internal("git ls-tree", fmt.Errorf("unexpected size in %q", head))
			}
			files++
			size += n
		case "tree", "commit":
			dirs++
		}
		if err := lim.passed(files, dirs, size); err != nil {
			return err
		}
		for {
			_, err := br.ReadSlice(0)
			if err == nil {
				break
			}
			if err != bufio.ErrBufferFull {
				return corral.Internal("git ls-tree", fmt.Errorf("unterminated path: %v", err))
			}
		}
	}
}

// passed is the answer for counts past a limit, nil within them. The
// limits are the import caps: the message names their flags.
func (lim TreeLimits) passed(files, dirs, size int64) error {
	switch {
	case lim.MaxFiles > 0 && files > lim.MaxFiles:
		return corral.Errorf(corral.ETOOLARGE, "the repository holds more than %d files (--import-max-files); nothing was cloned", lim.MaxFiles)
	case lim.MaxDirs > 0 && dirs > lim.MaxDirs:
		return corral.Errorf(corral.ETOOLARGE, "the repository holds more than %d directories (--import-max-dirs); nothing was cloned", lim.MaxDirs)
	case lim.MaxBytes > 0 && size > lim.MaxBytes:
		return corral.Errorf(corral.ETOOLARGE, "the repository's files hold more than %d bytes (--import-max-bytes); nothing was cloned", lim.MaxBytes)
	}
	return nil
}

var progressLine = regexp.MustCompile(`^(Receiving objects|Resolving deltas|Checking out files|Updating files):\s+(\d+)%`)

// readProgress splits git's progress output (lines ended by \r or \n)
// into a percentage of the whole clone: receiving is most of the work.
func readProgress(r io.Reader, keep io.Writer, progress func(int)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	last := -1
	for sc.Scan() {
		line := sc.Text()
		m := progressLine.FindStringSubmatch(strings.TrimPrefix(line, "remote: "))
		if m == nil {
			keep.Write([]byte(line + "\n"))
			continue
		}
		pct, _ := strconv.Atoi(m[2])
		var total int
		switch m[1] {
		case "Receiving objects":
			total = pct * 80 / 100
		case "Resolving deltas":
			total = 80 + pct*15/100
		default:
			total = 95 + pct*4/100
		}
		if progress != nil && total > last {
			last = total
			progress(total)
		}
	}
	io.Copy(io.Discard, r)
}

// dirSize is the bytes of the regular files under dir (0 while it does
// not exist yet).
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// Head returns the commit HEAD names in dir ("" in a repository with no
// commit yet).
func (c Config) Head(ctx context.Context, dir string) (string, error) {
	c = c.withDefaults()
	out, err := c.run(ctx, dir, nil, nil, nil, "rev-parse", "--verify", "-q", "HEAD")
	if err != nil {
		return "", nil
	}
	return strings.TrimSpace(string(out)), nil
}

// Branch returns the branch HEAD is on in dir ("" when detached).
func (c Config) Branch(ctx context.Context, dir string) string {
	c = c.withDefaults()
	out, err := c.run(ctx, dir, nil, nil, nil, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
