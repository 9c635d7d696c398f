package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral"
)

type entry struct {
	name string
	body string
	typ  byte
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	tw.Close()
	return buf.Bytes()
}

func TestDetect(t *testing.T) {
	tarHead := tarOf(t, entry{name: "a", body: "x"})
	var gz bytes.Buffer
	gzip.NewWriter(&gz).Close()
	var zb bytes.Buffer
	zip.NewWriter(&zb).Close()
	tests := []struct {
		name, ctype string
		head        []byte
		want        string
	}{
		{"tar by type", "application/x-tar", nil, Tar},
		{"gzip by type with a parameter", "application/gzip; charset=binary", nil, TarGz},
		{"zip by type", "Application/Zip", nil, Zip},
		{"tar by magic", "application/octet-stream", tarHead, Tar},
		{"gzip by magic", "", gz.Bytes(), TarGz},
		{"empty zip by magic", "application/json", zb.Bytes(), Zip},
		{"text", "text/plain", []byte("hello"), ""},
	}
	for _, tc := range tests {
		if got := Detect(tc.ctype, tc.head); got != tc.want {
			t.Errorf("%s: Detect(%q, ...) = %q, want %q", tc.name, tc.ctype, got, tc.want)
		}
	}
}

// TestLimits runs each limit with small values: the answer is a 413 naming
// the limit.
func TestLimits(t *testing.T) {
	many := make([]entry, 0, 20)
	for i := range 20 {
		many = append(many, entry{name: fmt.Sprintf("f%02d", i), body: "x"})
	}
	dirs := make([]entry, 0, 200)
	for i := range 200 {
		dirs = append(dirs, entry{name: fmt.Sprintf("directory-with-a-long-name-%03d/", i), typ: tar.TypeDir})
	}
	var bigZip bytes.Buffer
	zw := zip.NewWriter(&bigZip)
	for i := range 50 {
		w, _ := zw.Create(fmt.Sprintf("f%02d", i))
		io.WriteString(w, "x")
	}
	zw.Close()
	var dirZip bytes.Buffer // 200 directories and no data
	dw := zip.NewWriter(&dirZip)
	for i := range 200 {
		dw.Create(fmt.Sprintf("d%03d/", i))
	}
	dw.Close()
	noisy := make([]entry, 0, 20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		b := make([]byte, 500)
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		noisy = append(noisy, entry{name: fmt.Sprintf("n%02d", i), body: string(b)})
	}
	var gzBody bytes.Buffer
	gw := gzip.NewWriter(&gzBody)
	gw.Write(tarOf(t, noisy...))
	gw.Close()
	tests := []struct {
		name   string
		format string
		body   []byte
		lim    Limits
		says   string
	}{
		{"tar.gz archive size", TarGz, gzBody.Bytes(), Limits{MaxArchive: 4096}, "larger than the 4096-byte limit"},
		{"total bytes", Tar, tarOf(t, entry{name: "a", body: strings.Repeat("a", 600)}, entry{name: "b", body: strings.Repeat("b", 600)}), Limits{MaxBytes: 1000}, "more than 1000 bytes"},
		{"one file", Tar, tarOf(t, entry{name: "a", body: strings.Repeat("a", 2000)}), Limits{MaxFileSize: 1000}, `"a" is larger than the 1000-byte limit on one file`},
		{"file count", Tar, tarOf(t, many...), Limits{MaxFiles: 10}, "more than 10 files"},
		{"archive size", Tar, tarOf(t, many...), Limits{MaxArchive: 4096}, "larger than the 4096-byte limit"},
		{"zip archive size", Zip, bigZip.Bytes(), Limits{MaxArchive: 1000}, "larger than the 1000-byte limit"},
		{"names", Tar, tarOf(t, dirs...), Limits{MaxNameBytes: 4096}, "names are longer than the 4096-byte limit"},
		// The central directory is counted before archive/zip reads it:
		// 50 records where 10 files and 10 directories may be.
		{"zip directory", Zip, bigZip.Bytes(), Limits{MaxFiles: 10, MaxDirs: 10}, "more than 20 entries"},
		{"zip of directories", Zip, dirZip.Bytes(), Limits{MaxDirs: 100}, "more than 100 directories"},
		{"directories", Tar, tarOf(t, dirs...), Limits{MaxDirs: 100}, "more than 100 directories"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := t.TempDir()
			_, err := Extract(bytes.NewReader(tc.body), tc.format, dst, t.TempDir(), tc.lim)
			if corral.ErrorCode(err) != corral.ETOOLARGE {
				t.Fatalf("Extract = %v, want too_large", err)
			}
			if msg := corral.ErrorMessage(err); !strings.Contains(msg, tc.says) {
				t.Errorf("message %q does not say %q", msg, tc.says)
			}
		})
	}
}

// TestCollisions: two entries that would be one file on some file system
// (the same name, a case-insensitive or normalising one), or a file and a
// directory of one name, are refused naming the entry and the earlier
// one; a directory named again only as a parent, or spelled the same, is
// not a collision.
func TestCollisions(t *testing.T) {
	dir := func(name string) entry { return entry{name: name, typ: tar.TypeDir} }
	file := func(name string) entry { return entry{name: name, body: "x"} }
	tests := []struct {
		name    string
		entries []entry
		says    string // "": extracted
	}{
		{"a file twice", []entry{file("a"), file("a")}, `"a" appears twice`},
		{"a directory twice", []entry{dir("d/"), dir("d/")}, `"d/" appears twice`},
		{"files one apart in case", []entry{file("README.md"), file("readme.md")}, `"readme.md" is one file with "README.md"`},
		// sanitize.Path gives both one (NFC) form.
		{"files one apart in normal form", []entry{file("e\u0301.txt"), file("\u00e9.txt")}, "appears twice"},
		{"directories one apart in case", []entry{file("Src/a"), file("src/b")}, `"src/b" has a directory that is one with "Src"`},
		{"an explicit directory one apart in case", []entry{dir("Src/"), file("src/b")}, `has a directory that is one with "Src"`},
		{"inside a file", []entry{file("a"), file("a/b")}, `"a/b" is inside "a", which is a file`},
		{"a directory, then a file", []entry{dir("a/"), file("a")}, "both a file and a directory"},
		{"a file, then a directory", []entry{file("a"), dir("a/")}, "both a file and a directory"},
		{"a parent, then its entry", []entry{file("a/b"), dir("a/")}, ""},
		{"an entry, then its children", []entry{dir("Docs/"), file("Docs/a"), file("Docs/b")}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Extract(bytes.NewReader(tarOf(t, tc.entries...)), Tar, t.TempDir(), t.TempDir(), Limits{})
			if tc.says == "" {
				if err != nil {
					t.Fatalf("Extract = %v, want it extracted", err)
				}
				return
			}
			if corral.ErrorCode(err) != corral.ENAME || !strings.Contains(corral.ErrorMessage(err), tc.says) {
				t.Fatalf("Extract = %v (%s), want %s saying %q", err, corral.ErrorCode(err), corral.ENAME, tc.says)
			}
		})
	}
}

// TestRealBytesCount feeds an entry whose header declares nothing: only
// the bytes read count, and the copy stops just past the limit.
func TestRealBytesCount(t *testing.T) {
	dst := t.TempDir()
	root, err := os.OpenRoot(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	x := newExtractor(root, Limits{MaxFileSize: 1 << 20}.WithDefaults(), 32<<10)
	src := &countingZeros{left: 1 << 30}
	err = x.file("liar", 0o644, 0, func() (io.Reader, func(), error) { return src, func() {}, nil })
	if corral.ErrorCode(err) != corral.ETOOLARGE {
		t.Fatalf("file = %v, want too_large", err)
	}
	if read := 1<<30 - src.left; read > 2<<20 {
		t.Errorf("read %d bytes of the entry: the copy must stop just past the limit", read)
	}
}

type countingZeros struct{ left int64 }

func (c *countingZeros) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), c.left)
	clear(p[:n])
	c.left -= n
	return int(n), nil
}

func TestWriteSkipsLinksAndWhatKeepRefuses(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.MkdirAll(filepath.Join(dir, ".git"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "run.sh"), []byte("#!/bin/sh\n"), 0o4755)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o600)
	os.WriteFile(filepath.Join(dir, ".git", "config"), []byte("[core]"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "passwd"))
	os.Symlink("src", filepath.Join(dir, "alias"))
	var buf bytes.Buffer
	err := Write(&buf, dir, func(p string, isDir bool) bool { return p != ".git" })
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %c %o %d/%d", h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid))
	}
	want := []string{"a.txt 0 644 0/0", "src/ 5 755 0/0", "src/run.sh 0 755 0/0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("archive holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
