package node_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral"
	"corral/internal/archive"
	"corral/internal/egress"
	"corral/internal/gitrepo"
	"corral/internal/gittest"
	"corral/internal/node"
)

// TestCloneObeysImportCaps: a clone is bounded by the import caps on
// files, directories and bytes (counted from git's listing of the tree,
// before a file is checked out); a repository past one is refused with a
// 413 naming the cap's flag, and nothing of it is left in the workspace or
// the node's clones directory. A repository exactly at the caps lands.
func TestCloneObeysImportCaps(t *testing.T) {
	// 4,100 bytes in five files.
	fourKB := gittest.Options{Files: map[string]string{"f.txt": strings.Repeat("x", 100)}, GenerateFiles: 4, GenerateBytes: 1000}
	tests := []struct {
		name   string
		repo   gittest.Options
		caps   archive.Limits
		landed string // a file the workspace has after the clone ("": refused)
		substr string // what the refusal says
	}{
		// GenerateFiles adds to the README every repository has.
		{"files at the cap", gittest.Options{GenerateFiles: 49, GenerateBytes: 8}, archive.Limits{MaxFiles: 50}, "README.md", ""},
		{"files past the cap", gittest.Options{GenerateFiles: 50, GenerateBytes: 8}, archive.Limits{MaxFiles: 50}, "",
			"more than 50 files (--import-max-files)"},
		{"bytes at the cap", fourKB, archive.Limits{MaxBytes: 4100}, "f.txt", ""},
		{"bytes past the cap", fourKB, archive.Limits{MaxBytes: 4099}, "",
			"more than 4099 bytes (--import-max-bytes)"},
		{"directories at the cap", gittest.Options{Files: map[string]string{"a/b/c/f.txt": "x\n"}}, archive.Limits{MaxDirs: 3}, "a/b/c/f.txt", ""},
		{"directories past the cap", gittest.Options{Files: map[string]string{"a/b/c/d/f.txt": "x\n"}}, archive.Limits{MaxDirs: 3}, "",
			"more than 3 directories (--import-max-dirs)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := gittest.New(t, tt.repo)
			data := t.TempDir()
			l, err := node.New(node.Config{Data: data, Imports: tt.caps, Git: gitrepo.Config{CAFile: s.CAFile, Egress: loopback}})
			if err != nil {
				t.Fatal(err)
			}
			const agent = "agt_clone"
			_, err = l.Clone(context.Background(), agent, corral.CloneSpec{URL: s.URL()}, nil)
			ws := filepath.Join(data, "workspaces", agent)
			if tt.landed != "" {
				if err != nil {
					t.Fatalf("Clone: %v", err)
				}
				if _, err := os.Stat(filepath.Join(ws, tt.landed)); err != nil {
					t.Fatalf("after the clone: %v", err)
				}
				return
			}
			if corral.ErrorCode(err) != corral.ETOOLARGE || !strings.Contains(corral.ErrorMessage(err), tt.substr) {
				t.Fatalf("Clone = %v (%s), want %s with %q", err, corral.ErrorCode(err), corral.ETOOLARGE, tt.substr)
			}
			for _, dir := range []string{ws, filepath.Join(data, "clones")} {
				if ents, _ := os.ReadDir(dir); len(ents) != 0 {
					t.Fatalf("a refused clone left %d entries in %s", len(ents), dir)
				}
			}
		})
	}
}

// loopback lets the test's git server on 127.0.0.1 be reached.
var loopback = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
