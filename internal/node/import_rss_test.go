package node_test

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"corral"
	"corral/internal/node"
)

// The helper's input: an archive's path, its Content-Type, and the error
// code the import must end with ("" for none).
const (
	envRSSInput = "CORRAL_RSS_IMPORT"
	envRSSType  = "CORRAL_RSS_IMPORT_TYPE"
	envRSSWant  = "CORRAL_RSS_IMPORT_WANT"
)

// TestHelperImport is not a test: BenchmarkImportPeakRSS runs the test
// binary again with it, once per input, so that each import's peak RSS is
// that of a process of its own (a process's peak never goes down).
func TestHelperImport(t *testing.T) {
	path := os.Getenv(envRSSInput)
	if path == "" {
		t.Skip("run by BenchmarkImportPeakRSS")
	}
	l, err := node.New(node.Config{Data: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = l.Import(context.Background(), "agt_rss", os.Getenv(envRSSType), f, nil)
	if want := os.Getenv(envRSSWant); corral.ErrorCode(err) != want {
		t.Fatalf("Import(%s) = %v, want code %q", filepath.Base(path), err, want)
	}
	// The peak of this process's own memory, VmHWM: rusage's ru_maxrss
	// would not do, since exec carries the parent's peak into it (Go
	// starts children with vfork, and Linux keeps the larger of the old
	// and the new image's peaks), and the parent made the inputs.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status: peak RSS is measured on Linux")
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/self/status:\n%s", status)
	}
	fmt.Printf("%s %s\n", hwmMark, m[1])
}

// hwmMark starts the helper's line with its peak RSS in KiB.
const hwmMark = "import-peak-rss-kib"

// BenchmarkImportPeakRSS: the peak RSS of a hostile import, as the attacks
// on imports made them, over that of a benign 1 MB import, each measured
// in a fresh process of its own in the same run (rss-ratio; the target is
// 2 at most), with both peaks in MiB. The inputs are made in a temporary
// directory first (the tar.gz takes some seconds).
//
//	go test ./internal/node -run '^$' -bench BenchmarkImportPeakRSS -benchtime 3x -count 3
func BenchmarkImportPeakRSS(b *testing.B) {
	dir := b.TempDir()
	benign := makeInput(b, dir, "benign.tar.gz", benignTarGz)
	hostile := []struct {
		name, file, contentType string
		write                   func(io.Writer) error
	}{
		{"zip-of-1M-directory-records", "records.zip", "application/zip", zipOfRecords},
		{"tar.gz-of-2M-directories", "dirs.tar.gz", "application/gzip", tarGzOfDirs},
	}
	for _, h := range hostile {
		path := makeInput(b, dir, h.file, h.write)
		b.Run(h.name, func(b *testing.B) {
			// The worst of the iterations.
			var ratio, peak, base float64
			for b.Loop() {
				bs := peakRSS(b, benign, "application/gzip", "")
				pk := peakRSS(b, path, h.contentType, corral.ETOOLARGE)
				if pk/bs > ratio {
					ratio, peak, base = pk/bs, pk, bs
				}
			}
			b.ReportMetric(ratio, "rss-ratio")
			b.ReportMetric(peak/(1<<20), "hostile-MiB")
			b.ReportMetric(base/(1<<20), "benign-MiB")
		})
	}
}

// peakRSS runs TestHelperImport on one archive in a process of its own and
// returns that process's peak RSS in bytes.
func peakRSS(b *testing.B, path, contentType, want string) float64 {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperImport$", "-test.count=1")
	cmd.Env = append(os.Environ(), envRSSInput+"="+path, envRSSType+"="+contentType, envRSSWant+"="+want)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("import of %s: %v\n%s", filepath.Base(path), err, out)
	}
	m := regexp.MustCompile(`(?m)^` + hwmMark + ` (\d+)$`).FindSubmatch(out)
	if m == nil {
		b.Skipf("the helper measured no peak RSS:\n%s", out)
	}
	kib, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		b.Fatal(err)
	}
	return kib * 1024
}

// makeInput writes one archive into dir and reports its size.
func makeInput(b *testing.B, dir, name string, write func(io.Writer) error) string {
	b.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := write(w); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.Logf("%s: %.1f MB", name, float64(fi.Size())/1e6)
	return path
}

// benignTarGz is 64 files of 16 KiB of random bytes: 1 MiB that does not
// compress.
func benignTarGz(w io.Writer) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	body := make([]byte, 16<<10)
	for i := range 64 {
		rand.Read(body)
		h := &tar.Header{Name: fmt.Sprintf("src/pkg%d/file%02d.bin", i/8, i), Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// tarGzOfDirs is 2 million directory entries of distinct names and no
// data: about 15 MB that inflates to 1 GiB of headers.
func tarGzOfDirs(w io.Writer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for i := range 2_000_000 {
		h := &tar.Header{Name: fmt.Sprintf("d%07d/", i), Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// zipOfRecords is a zip of one empty local file and a central directory of
// a million records of no data that all point at it (47 bytes each: about
// 47 MB), closed by zip64 end records since the count passes 65,535.
func zipOfRecords(w io.Writer) error {
	const n = 1_000_000
	name := []byte("a")
	le := binary.LittleEndian
	local := make([]byte, 30)
	le.PutUint32(local[0:], 0x04034b50)
	le.PutUint16(local[4:], 20)
	le.PutUint16(local[26:], uint16(len(name)))
	if _, err := w.Write(append(local, name...)); err != nil {
		return err
	}
	cdStart := uint64(len(local) + len(name))
	rec := make([]byte, 46)
	le.PutUint32(rec[0:], 0x02014b50)
	le.PutUint16(rec[4:], 20)
	le.PutUint16(rec[6:], 20)
	le.PutUint16(rec[28:], uint16(len(name)))
	rec = append(rec, name...)
	for range n {
		if _, err := w.Write(rec); err != nil {
			return err
		}
	}
	cdSize := uint64(n * len(rec))
	end64 := make([]byte, 56)
	le.PutUint32(end64[0:], 0x06064b50)
	le.PutUint64(end64[4:], 44)
	le.PutUint16(end64[12:], 45)
	le.PutUint16(end64[14:], 45)
	le.PutUint64(end64[24:], n)
	le.PutUint64(end64[32:], n)
	le.PutUint64(end64[40:], cdSize)
	le.PutUint64(end64[48:], cdStart)
	locator := make([]byte, 20)
	le.PutUint32(locator[0:], 0x07064b50)
	le.PutUint64(locator[8:], cdStart+cdSize)
	le.PutUint32(locator[16:], 1)
	end := make([]byte, 22)
	le.PutUint32(end[0:], 0x06054b50)
	le.PutUint16(end[8:], 0xffff)
	le.PutUint16(end[10:], 0xffff)
	le.PutUint32(end[12:], 0xffffffff)
	le.PutUint32(end[16:], 0xffffffff)
	for _, p := range [][]byte{end64, locator, end} {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}
