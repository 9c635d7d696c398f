package node_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"corral"
)

// TestMoveWorkspace: a workspace exported from one node and imported on
// another is the same tree: files with their bytes and modes, nested and
// empty directories, a symbolic link as a link, .git and a secret file.
// The source keeps its copy (the mover drops it); the target refuses a
// second import over the workspace it now has.
func TestMoveWorkspace(t *testing.T) {
	ctx := context.Background()
	src, srcData := newNode(t)
	dst, dstData := newNode(t)
	const agent = "agt_moved"
	files := map[string]string{"README.md": "hello\n", "src/app/main.go": "package main\n", ".env": "TOKEN=x\n", ".git/HEAD": "ref: refs/heads/main\n"}
	for p, c := range files {
		if _, err := src.WriteFile(ctx, corral.FileWrite{AgentID: agent, Path: p, Content: []byte(c)}); err != nil {
			// The files API refuses .git: write it as a clone would.
			full := filepath.Join(srcData, "workspaces", agent, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ws := filepath.Join(srcData, "workspaces", agent)
	if err := os.Chmod(filepath.Join(ws, "src/app/main.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/app/main.go", filepath.Join(ws, "main-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "empty/dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	var tarball bytes.Buffer
	if err := src.ExportWorkspace(ctx, agent, &tarball); err != nil {
		t.Fatal(err)
	}
	if err := dst.ImportWorkspace(ctx, agent, bytes.NewReader(tarball.Bytes())); err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(dstData, "workspaces", agent)
	for p, c := range files {
		b, err := os.ReadFile(filepath.Join(got, p))
		if err != nil || string(b) != c {
			t.Errorf("%s on the target: %q, %v; want %q", p, b, err, c)
		}
	}
	if st, err := os.Stat(filepath.Join(got, "src/app/main.go")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("main.go's mode on the target: %v, %v; want 0755", st, err)
	}
	if l, err := os.Readlink(filepath.Join(got, "main-link")); err != nil || l != "src/app/main.go" {
		t.Errorf("the link on the target: %q, %v", l, err)
	}
	if st, err := os.Stat(filepath.Join(got, "empty/dir")); err != nil || !st.IsDir() {
		t.Errorf("the empty directory on the target: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dstData, "moves", agent)); !os.IsNotExist(err) {
		t.Errorf("the move's temporary tree is left (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "README.md")); err != nil {
		t.Errorf("the source lost its copy: %v", err)
	}
	if err := dst.ImportWorkspace(ctx, agent, bytes.NewReader(tarball.Bytes())); corral.ErrorCode(err) != corral.ECONFLICT {
		t.Fatalf("a second import over the workspace: %v, want ECONFLICT", err)
	}
	if err := src.ExportWorkspace(ctx, "agt_never", io.Discard); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("exporting a workspace the node does not hold: %v, want ENOTFOUND", err)
	}
}

// TestImportRefusesAnEscape: a moved workspace comes from another node,
// which is not trusted with this one's disk: no entry lands outside the
// workspace, through a path or a link, and a refused tar leaves nothing.
func TestImportRefusesAnEscape(t *testing.T) {
	ctx := context.Background()
	type entry struct {
		name, link string
		typ        byte
		body       string
	}
	tests := []struct {
		name    string
		entries []entry
	}{
		{"a path that climbs out", []entry{{name: "../escaped", typ: tar.TypeReg, body: "x"}}},
		{"an absolute path", []entry{{name: "/tmp/escaped", typ: tar.TypeReg, body: "x"}}},
		{"a path that climbs out midway", []entry{{name: "a/../../escaped", typ: tar.TypeReg, body: "x"}}},
		{"a file written through a link out", []entry{{name: "out", link: "/tmp", typ: tar.TypeSymlink}, {name: "out/escaped", typ: tar.TypeReg, body: "x"}}},
		{"a file written over a link", []entry{{name: "l", link: "/tmp/escaped", typ: tar.TypeSymlink}, {name: "l", typ: tar.TypeReg, body: "x"}}},
		{"a device", []entry{{name: "dev", typ: tar.TypeChar}}},
		{"a hard link", []entry{{name: "f", typ: tar.TypeReg, body: "x"}, {name: "h", link: "f", typ: tar.TypeLink}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, data := newNode(t)
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, e := range tt.entries {
				tw.WriteHeader(&tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))})
				io.WriteString(tw, e.body)
			}
			tw.Close()
			if err := l.ImportWorkspace(ctx, "agt_target", &buf); err == nil {
				t.Fatal("the import was taken")
			}
			for _, p := range []string{filepath.Join(data, "escaped"), filepath.Join(data, "workspaces", "escaped"), "/tmp/escaped"} {
				if _, err := os.Lstat(p); err == nil {
					os.Remove(p)
					t.Fatalf("%s was written", p)
				}
			}
			ents, _ := os.ReadDir(filepath.Join(data, "workspaces", "agt_target"))
			if len(ents) != 0 {
				t.Fatalf("the refused import left %d entries in the workspace", len(ents))
			}
		})
	}
}
