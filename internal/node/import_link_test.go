package node_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral"
)

// TestImportThroughLink: an archive whose path goes through a symbolic
// link of the workspace (one pointing out of it, or to a directory in it)
// is refused (400) saying so, never an internal error, and nothing is
// written through the link: Corral never follows links in a workspace.
func TestImportThroughLink(t *testing.T) {
	ctx := context.Background()
	l, data := newNode(t)
	const agent = "agt_links"
	ws := filepath.Join(data, "workspaces", agent)
	outside := t.TempDir()
	for _, d := range []string{ws, filepath.Join(ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(ws, "in")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"out/x.txt", "in/x.txt", "in/deeper/x.txt"} {
		t.Run(p, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
			tw.Write([]byte("x\n"))
			tw.Close()
			_, err := l.Import(ctx, agent, "application/x-tar", &buf, nil)
			if corral.ErrorCode(err) != corral.EINVALID || !strings.Contains(corral.ErrorMessage(err), "passes through a symbolic link") {
				t.Fatalf("Import of %s: %v (%s), want it refused as passing through a link", p, err, corral.ErrorCode(err))
			}
			for _, d := range []string{outside, filepath.Join(ws, "sub")} {
				if ents, _ := os.ReadDir(d); len(ents) != 0 {
					t.Fatalf("the import wrote through the link into %s", d)
				}
			}
		})
	}
}
