package gitrepo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"corral"
)

// Clone clones the repository at rawURL (ref: a branch or tag, "" for the
// remote's default) into dir, which must not exist. progress, when set,
// hears the percentage done (0 to 100). A clone that grows past
// Config.MaxBytes is killed (ETOOLARGE). On any failure dir is removed:
// the caller never finds half a clone.
func (c Config) Clone(ctx context.Context, rawURL, ref string, auth *Auth, dir string, progress func(int)) (err error) {
	c = c.withDefaults()
	u, err := CheckURL(rawURL)
	if err != nil {
		return err
	}
	if ref != "" {
		if err := c.CheckRef(ctx, ref); err != nil {
			return err
		}
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	args := []string{"clone", "--progress", "--no-recurse-submodules"}
	if ref != "" {
		args = append(args, "--branch", ref)
	}
	args = append(args, "--", u.String(), dir)
	rem, err := c.remote(ctx, u, auth)
	if err != nil {
		return err
	}
	cmd, cleanup, err := c.command(ctx, "", rem, args...)
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
	// The size is watched while git runs: a repository larger than the
	// limit is stopped on the way, not after it filled the disk. A walk
	// stats every file, so the watcher rests ten times as long as its last
	// walk took (at least 200 ms): a tenth of a core at most, however
	// large the clone (a fixed 200 ms made a 10,000-file clone 1.9 times
	// as slow as git's own).
	tooLarge := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		t := time.NewTimer(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				start := time.Now()
				if dirSize(dir) > c.MaxBytes {
					close(tooLarge)
					cmd.Cancel()
					return
				}
				t.Reset(max(200*time.Millisecond, 10*time.Since(start)))
			}
		}
	}()
	werr := cmd.Wait()
	close(stop)
	pw.Close()
	wg.Wait()
	select {
	case <-tooLarge:
		return corral.Errorf(corral.ETOOLARGE, "the repository is too large: more than %d bytes on disk", c.MaxBytes)
	default:
	}
	if werr != nil {
		if ctx.Err() != nil {
			return &corral.Error{Code: corral.EUNAVAIL, Message: "the clone was stopped", Op: "git clone", Err: ctx.Err()}
		}
		return classify("git clone", &gitError{args: "clone", stderr: stderr.String(), err: werr})
	}
	if dirSize(dir) > c.MaxBytes {
		return corral.Errorf(corral.ETOOLARGE, "the repository is too large: more than %d bytes on disk", c.MaxBytes)
	}
	if progress != nil {
		progress(100)
	}
	return nil
}

// CheckRef validates a branch or tag name to clone: git would read some
// as an option or a pattern.
func (c Config) CheckRef(ctx context.Context, ref string) error {
	c = c.withDefaults()
	bad := corral.Errorf(corral.EINVALID, "ref is not a valid branch or tag name")
	if len(ref) > 255 || strings.HasPrefix(ref, "-") {
		return bad
	}
	if _, err := c.run(ctx, "", nil, nil, nil, "check-ref-format", "--allow-onelevel", "refs/x/"+ref); err != nil {
		return bad
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
