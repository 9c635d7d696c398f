//go:build linux

package workspace

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStageManifestVsNaive compares, on the same workspace in the same
// run, what Corral does for one run that changes 10 files (stage, edit,
// manifest, classify, apply, close) with the naive way (cp -a of the whole
// workspace, the same edits, sha256sum of every file).
//
// The workspace is 5,000 files / 50 MB by default, 50,000 files / 500 MB
// with CORRAL_BENCH_FULL=1 (make bench); CORRAL_BENCH_FILES and
// CORRAL_BENCH_BYTES set it exactly. It is built once and kept under
// os.TempDir() for the next run. For example:
//
//	CORRAL_BENCH_FULL=1 go test -run '^$' -bench StageManifestVsNaive -benchtime 3x ./internal/workspace/
func BenchmarkStageManifestVsNaive(b *testing.B) {
	for _, tool := range []string{"cp", "sha256sum", "find", "xargs"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("the naive way needs %s: %v", tool, err)
		}
	}
	files, size := 5000, int64(50_000_000)
	if os.Getenv("CORRAL_BENCH_FULL") == "1" {
		files, size = 50_000, 500_000_000
	}
	if v, err := strconv.Atoi(os.Getenv("CORRAL_BENCH_FILES")); err == nil && v > 0 {
		files = v
	}
	if v, err := strconv.ParseInt(os.Getenv("CORRAL_BENCH_BYTES"), 10, 64); err == nil && v > 0 {
		size = v
	}
	ws := benchWorkspace(b, files, size)
	scratch := b.TempDir()
	run := newBenchRun(b, ws, files)

	var corralTime, naiveTime time.Duration
	overlay := true
	b.ResetTimer()
	for i := range b.N {
		// Corral. The workspace is applied to, then put back untimed.
		syscall.Sync()
		start := time.Now()
		s, err := NewStage(ws, filepath.Join(scratch, "stage"), StageOptions{})
		if err != nil {
			b.Fatal(err)
		}
		overlay = overlay && s.Overlay()
		run.edit(b, s.Tree())
		m, err := s.Manifest()
		if err != nil {
			b.Fatal(err)
		}
		if len(m) != 10 {
			b.Fatalf("manifest has %d entries, want 10: %q", len(m), entryOps(m))
		}
		m = ClassifyAll(m, ClassPolicy{})
		if err := Apply(ws, filepath.Join(scratch, "journal"), fmt.Sprintf("cs_%d", i), m, s.Source(), nil); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		corralTime += time.Since(start)
		run.revert(b, ws)

		// The naive way.
		naive := filepath.Join(scratch, "naive")
		syscall.Sync()
		start = time.Now()
		if out, err := exec.Command("cp", "-a", ws, naive).CombinedOutput(); err != nil {
			b.Fatalf("cp -a: %v: %s", err, out)
		}
		run.edit(b, naive)
		hash := exec.Command("sh", "-c", "find . -type f -print0 | xargs -0 sha256sum >/dev/null")
		hash.Dir = naive
		if out, err := hash.CombinedOutput(); err != nil {
			b.Fatalf("sha256sum: %v: %s", err, out)
		}
		naiveTime += time.Since(start)
		b.StopTimer()
		if err := os.RemoveAll(naive); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	cms := float64(corralTime.Microseconds()) / 1000 / n
	nms := float64(naiveTime.Microseconds()) / 1000 / n
	b.ReportMetric(cms, "corral-ms/op")
	b.ReportMetric(nms, "naive-ms/op")
	b.ReportMetric(nms/cms, "naive/corral")
	b.ReportMetric(float64(files), "files")
	b.ReportMetric(float64(size)/1e6, "MB")
	if !overlay {
		b.Logf("overlayfs unavailable: Corral used the copy fallback")
	}
}

// benchWorkspace builds (once) a workspace of files files totalling about
// size bytes, 100 files a directory, every file different.
func benchWorkspace(b *testing.B, files int, size int64) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("corral-bench-ws-%d-%d", files, size))
	done, dirty := dir+".complete", dir+".dirty"
	_, derr := os.Stat(done)
	_, dirtyErr := os.Stat(dirty)
	if derr == nil && dirtyErr != nil {
		markDirty(b, dirty)
		return dir
	}
	// Missing, or left changed by a benchmark that did not finish.
	for _, name := range []string{done, dir} {
		if err := os.RemoveAll(name); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	per := int(size / int64(files))
	// A pool of printable random bytes; each file is a window of it.
	pool := make([]byte, 4<<20+per)
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n"
	for i := range pool {
		pool[i] = alphabet[rng.IntN(len(alphabet))]
	}
	for i := range files {
		sub := filepath.Join(dir, fmt.Sprintf("d%04d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		off := rng.IntN(len(pool) - per)
		content := append([]byte(fmt.Sprintf("file %d\n", i)), pool[off:off+per]...)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%06d.txt", i)), content, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %s (%d files, %d bytes) in %v", dir, files, size, time.Since(start).Round(time.Millisecond))
	markDirty(b, dirty)
	return dir
}

// markDirty notes that the workspace is in use until the benchmark ends and
// puts it back: one interrupted leaves the mark, and the next rebuilds.
func markDirty(b *testing.B, dirty string) {
	if err := os.WriteFile(dirty, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if !b.Failed() {
			os.Remove(dirty)
		}
	})
}

// benchRun is one run's changes: 8 files modified, 1 created, 1 deleted.
type benchRun struct {
	modify   []string
	create   string
	delete   string
	original map[string][]byte // to put the workspace back
}

func newBenchRun(b *testing.B, ws string, files int) *benchRun {
	r := &benchRun{original: map[string][]byte{}}
	name := func(i int) string { return fmt.Sprintf("d%04d/f%06d.txt", i/100, i) }
	for k := range 9 {
		p := name(k * (files - 1) / 9)
		if k < 8 {
			r.modify = append(r.modify, p)
		} else {
			r.delete = p
		}
		c, err := os.ReadFile(filepath.Join(ws, p))
		if err != nil {
			b.Fatal(err)
		}
		r.original[p] = c
	}
	r.create = "new/dir/created.txt"
	return r
}

func (r *benchRun) edit(b *testing.B, tree string) {
	for _, p := range r.modify {
		if err := os.WriteFile(filepath.Join(tree, p), []byte("changed by the run\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(tree, "new/dir"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, r.create), []byte("created by the run\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(filepath.Join(tree, r.delete)); err != nil {
		b.Fatal(err)
	}
}

func (r *benchRun) revert(b *testing.B, ws string) {
	b.StopTimer()
	defer b.StartTimer()
	for p, c := range r.original {
		if err := os.WriteFile(filepath.Join(ws, p), c, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(ws, "new")); err != nil {
		b.Fatal(err)
	}
}
