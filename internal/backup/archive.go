package backup

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"
)

// errChanged says a file changed size while it was copied: the copy of
// its workspace is taken again.
var errChanged = errors.New("a file changed while it was copied")

// writer writes an archive: a tar, gzip or not, whose entries it lists
// with their hashes for the manifest.
type writer struct {
	out     *counter
	gz      *gzip.Writer // nil for a plain tar
	tw      *tar.Writer
	entries []Entry
	dirs    map[string]bool // directories in the archive already
}

func newWriter(f io.Writer, gz bool, p *progress) *writer {
	w := &writer{out: &counter{w: f, progress: p}, dirs: map[string]bool{}}
	var dst io.Writer = w.out
	if gz {
		// The fastest level: a backup shares the machine with runs.
		w.gz, _ = gzip.NewWriterLevel(w.out, gzip.BestSpeed)
		dst = w.gz
	}
	w.tw = tar.NewWriter(dst)
	return w
}

// written is how many bytes of archive are written so far.
func (w *writer) written() int64 { return w.out.n }

func (w *writer) close() error {
	err := w.tw.Close()
	if w.gz != nil {
		err = errors.Join(err, w.gz.Close())
	}
	return err
}

// file adds the regular file at path as name, with mode perm.
func (w *writer) file(name, path string, perm fs.FileMode) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return w.add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: int64(perm),
		ModTime: fi.ModTime(), Format: tar.FormatPAX}, f)
}

// parents adds the directories above name (a slash-separated path under
// data) that the archive does not hold yet, with their modes in data.
func (w *writer) parents(data, name string) error {
	dir := path.Dir(name)
	if dir == "." || w.dirs[dir] {
		return nil
	}
	if err := w.parents(data, dir); err != nil {
		return err
	}
	fi, err := os.Stat(filepath.Join(data, filepath.FromSlash(dir)))
	if err != nil {
		return err
	}
	return w.add(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: int64(fi.Mode().Perm()),
		ModTime: fi.ModTime(), Format: tar.FormatPAX}, nil)
}

// add writes hdr and, for a regular file, hdr.Size bytes of body, and
// lists the entry.
func (w *writer) add(hdr *tar.Header, body io.Reader) error {
	e, err := writeEntry(w.tw, hdr, body)
	if err != nil {
		return err
	}
	if e.Type == typeDir {
		w.dirs[e.Path] = true
	}
	w.entries = append(w.entries, e)
	return nil
}

// writeEntry writes one entry to tw and describes it.
func writeEntry(tw *tar.Writer, hdr *tar.Header, body io.Reader) (Entry, error) {
	if err := tw.WriteHeader(hdr); err != nil {
		return Entry{}, err
	}
	e := Entry{Path: hdr.Name}
	switch hdr.Typeflag {
	case tar.TypeDir:
		e.Type = typeDir
	case tar.TypeSymlink:
		e.Type, e.Link = typeSymlink, hdr.Linkname
	case tar.TypeReg:
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(body, hdr.Size))
		if err != nil {
			return Entry{}, err
		}
		if n != hdr.Size {
			return Entry{}, fmt.Errorf("%s: %w", hdr.Name, errChanged)
		}
		e.Type, e.Size, e.SHA256 = typeFile, n, hex.EncodeToString(h.Sum(nil))
	default:
		return Entry{}, fmt.Errorf("%s: tar type %q is never in a backup", hdr.Name, hdr.Typeflag)
	}
	return e, nil
}

// merge copies the entries of the tar at seg, listed as entries, into the
// archive.
func (w *writer) merge(seg string, entries []Entry) error {
	f, err := os.Open(seg)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := w.tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(w.tw, tr); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if e.Type == typeDir {
			w.dirs[e.Path] = true
		}
	}
	w.entries = append(w.entries, entries...)
	return nil
}

// manifest writes the manifest, the archive's last entry.
func (w *writer) manifest(m Manifest) error {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: manifestName, Size: int64(len(b)), Mode: 0o600,
		ModTime: m.CreatedAt, Format: tar.FormatPAX}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = w.tw.Write(b)
	return err
}

// counter counts the bytes written through it and tells progress.
type counter struct {
	w        io.Writer
	n        int64
	progress *progress
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.progress.written(c.n)
	return n, err
}

// progress prints what a long backup or restore is doing, a line at a
// time: each step, and the bytes written at most every two seconds.
type progress struct {
	w     io.Writer // nil: nothing is printed
	now   func() time.Time
	last  time.Time
	bytes int64 // what a restore wrote so far
}

func newProgress(w io.Writer, now func() time.Time) *progress {
	return &progress{w: w, now: now, last: now()}
}

func (p *progress) step(format string, args ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, format+"\n", args...)
	}
}

func (p *progress) written(n int64) {
	if p.w == nil || p.now().Sub(p.last) < 2*time.Second {
		return
	}
	p.last = p.now()
	fmt.Fprintf(p.w, "%s written\n", Size(n))
}

func (p *progress) done(n int64) {
	p.step("%s written", Size(n))
}

// Size writes a number of bytes for a person, as the listings do.
func Size(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
