//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStageDisk measures what a stage's own filesystem costs: NewStage
// then Close of a small workspace, with the filesystem (mke2fs, a loop
// device, two mounts) and without, alternated in the same run, for an
// overlay and for a copy. Read disk/plain; each ms/op is one stage made
// and removed.
//
//	go test -run '^$' -bench StageDisk -benchtime 40x ./internal/workspace/
func BenchmarkStageDisk(b *testing.B) {
	needDisk(b)
	ws := b.TempDir()
	files := map[string]string{}
	for _, p := range []string{"README.md", "go.mod", "main.go", "internal/a/a.go", "internal/b/b.go", ".env"} {
		files[p] = "content of " + p + "\n"
	}
	writeFilesB(b, ws, files)
	for _, m := range stageModes {
		b.Run(m.name, func(b *testing.B) {
			scratch := b.TempDir()
			var disk, plain time.Duration
			overlay := true
			for i := range b.N {
				for _, noDisk := range []bool{i%2 == 0, i%2 != 0} { // alternate which goes first
					start := time.Now()
					s, err := NewStage(ws, filepath.Join(scratch, "stage"), StageOptions{NoOverlay: m.noOverlay, noDisk: noDisk})
					if err != nil {
						b.Fatal(err)
					}
					overlay = overlay && s.Overlay()
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
					if noDisk {
						plain += time.Since(start)
					} else {
						disk += time.Since(start)
					}
				}
			}
			n := float64(b.N)
			dms := float64(disk.Microseconds()) / 1000 / n
			pms := float64(plain.Microseconds()) / 1000 / n
			b.ReportMetric(dms, "disk-ms/op")
			b.ReportMetric(pms, "plain-ms/op")
			b.ReportMetric(dms/pms, "disk/plain")
			if !m.noOverlay && !overlay {
				b.Logf("overlayfs unavailable: the copy fallback was used")
			}
		})
	}
}

// writeFilesB is writeFiles for a benchmark.
func writeFilesB(b *testing.B, root string, files map[string]string) {
	b.Helper()
	for p, c := range files {
		name := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(c), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
