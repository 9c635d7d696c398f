package api_test

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchChildEnv names the archive a child process of BenchmarkImport
// imports (see TestBenchImportChild).
const benchChildEnv = "CORRAL_BENCH_IMPORT_CHILD"

// BenchmarkImport compares an archive import through the API (extract,
// check, journaled apply) with tar -xzf of the same file, each in a child
// process of its own so that its peak RSS can be read from wait4. The
// archive has CORRAL_BENCH_IMPORT_FILES files (default 5,000) and about
// CORRAL_BENCH_IMPORT_BYTES bytes (default 50 MB); the figure is
// 50,000 files and 500 MB:
//
//	CORRAL_BENCH_IMPORT_FILES=50000 CORRAL_BENCH_IMPORT_BYTES=500000000 \
//	  go test -run '^$' -bench BenchmarkImport -benchtime 1x ./internal/api/
func BenchmarkImport(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		b.Skip("no tar to compare with")
	}
	files := envInt(b, "CORRAL_BENCH_IMPORT_FILES", 5_000)
	total := envInt(b, "CORRAL_BENCH_IMPORT_BYTES", 50_000_000)
	dir := b.TempDir()
	arch := filepath.Join(dir, "bench.tar.gz")
	writeBenchArchive(b, arch, files, total)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var corralTime, tarTime time.Duration
	var corralRSS, tarRSS int64
	for b.Loop() {
		// Each side starts with nothing left to write back of the other.
		syscall.Sync()
		// Corral: the child prints the import's own wall time.
		child := measured(self, "-test.run=^TestBenchImportChild$", "-test.count=1")
		child.Env = append(os.Environ(), benchChildEnv+"="+arch)
		out, err := child.CombinedOutput()
		if err != nil {
			b.Fatalf("import child: %v\n%s", err, out)
		}
		d, ok := childTime(string(out))
		if !ok {
			b.Fatalf("import child said no time:\n%s", out)
		}
		corralTime += d
		corralRSS = max(corralRSS, maxRSS(child, string(out)))

		dst := filepath.Join(dir, "tar-"+strconv.Itoa(b.N))
		os.RemoveAll(dst)
		if err := os.Mkdir(dst, 0o755); err != nil {
			b.Fatal(err)
		}
		t := measured("tar", "-xzf", arch, "-C", dst)
		syscall.Sync()
		start := time.Now()
		out, err = t.CombinedOutput()
		if err != nil {
			b.Fatalf("tar: %v\n%s", err, out)
		}
		tarTime += time.Since(start)
		tarRSS = max(tarRSS, maxRSS(t, string(out)))
		os.RemoveAll(dst)
	}
	n := float64(b.N)
	b.ReportMetric(corralTime.Seconds()/n, "corral-s")
	b.ReportMetric(tarTime.Seconds()/n, "tar-s")
	b.ReportMetric(corralTime.Seconds()/tarTime.Seconds(), "time-ratio")
	b.ReportMetric(float64(corralRSS)/1024, "corral-maxrss-MiB")
	b.ReportMetric(float64(tarRSS)/1024, "tar-maxrss-MiB")
}

// TestBenchImportChild is BenchmarkImport's child: it imports the archive
// named by CORRAL_BENCH_IMPORT_CHILD through a real server and prints how
// long the import took. It does nothing in a normal test run.
func TestBenchImportChild(t *testing.T) {
	arch := os.Getenv(benchChildEnv)
	if arch == "" {
		t.Skip("run by BenchmarkImport only")
	}
	e := newEnv(t, envOptions{})
	owner := e.signup("bench@example.com", "Bench")
	id := owner.createAgent("bench")
	f, err := os.Open(arch)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	owner.upload(id, "application/gzip", f).want(http.StatusOK)
	fmt.Printf("child-time-ns %d\n", time.Since(start).Nanoseconds())
}

func childTime(out string) (time.Duration, bool) {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "child-time-ns "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(n), err == nil
		}
	}
	return 0, false
}

// measured runs a command under GNU time when it is installed: the peak
// RSS that wait4 reports for a child of this (large) process counts the
// parent's pages the child had before it exec'd, so a small tar would look
// as big as the benchmark; time, a small process, forks it instead.
func measured(name string, args ...string) *exec.Cmd {
	if _, err := os.Stat("/usr/bin/time"); err == nil {
		return exec.Command("/usr/bin/time", append([]string{"-f", "maxrss-kb %M", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// maxRSS is a finished child's peak resident set in KiB, from GNU time's
// line in out, or else from wait4 (an upper bound, see measured).
func maxRSS(c *exec.Cmd, out string) int64 {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "maxrss-kb "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return int64(ru.Maxrss)
	}
	return 0
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// writeBenchArchive writes a tar.gz of files files of about total bytes in
// all, spread over directories, with text-like content (it compresses
// about as source code does).
func writeBenchArchive(b *testing.B, name string, files, total int) {
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("func return if else for range package import var const type struct map string int error nil true false the a of to in")
	size := total / files
	var buf []byte
	for i := range files {
		buf = buf[:0]
		for len(buf) < size {
			buf = append(buf, words[rng.IntN(len(words))]...)
			if rng.IntN(8) == 0 {
				buf = append(buf, '\n')
			} else {
				buf = append(buf, ' ')
			}
		}
		buf = buf[:size]
		h := &tar.Header{Name: fmt.Sprintf("src/d%03d/file%06d.go", i%500, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(buf))}
		if err := tw.WriteHeader(h); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
}
