package api_test

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"corral"
	"corral/internal/api"
	"corral/internal/archive"
)

// tarEntry is one entry of a tar built by a test.
type tarEntry struct {
	name string
	typ  byte // tar.TypeReg when zero
	body string
	mode int64 // 0644 when zero
	link string
}

func tarOf(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if h.Size > 0 {
			io.WriteString(tw, e.body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipOf(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zipEntry is one entry of a zip built by a test. With declared set, the
// entry is written raw: its deflated body is inflate, and its header
// claims declared bytes whatever inflate really holds.
type zipEntry struct {
	name     string
	body     string
	mode     fs.FileMode
	declared uint64
	inflate  []byte
}

func zipOf(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		if e.declared > 0 {
			var raw bytes.Buffer
			fw, _ := flate.NewWriter(&raw, flate.BestCompression)
			fw.Write(e.inflate)
			fw.Close()
			h.CompressedSize64 = uint64(raw.Len())
			h.UncompressedSize64 = e.declared
			h.CRC32 = crc32.ChecksumIEEE(e.inflate)
			w, err := zw.CreateRaw(h)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(raw.Bytes())
			continue
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, e.body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// matrixTar is the import the authorization matrix sends.
func matrixTar() []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "imported.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3})
	io.WriteString(tw, "hi\n")
	tw.Close()
	return buf.Bytes()
}

// upload sends body as an archive import with the given Content-Type
// ("" sends none: the server must go by the first bytes).
func (c *client) upload(agentID, contentType string, body io.Reader) *response {
	c.e.t.Helper()
	req, err := http.NewRequest("POST", c.e.srv.URL+"/api/agents/"+agentID+"/workspace/import", body)
	if err != nil {
		c.e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.CookieName, Value: c.cookie})
	}
	res, err := c.e.srv.Client().Do(req)
	if err != nil {
		c.e.t.Fatalf("import: %v", err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return &response{t: c.e.t, status: res.StatusCode, header: res.Header, body: data, req: "POST import"}
}

// uploadRefused is upload for a body the server refuses before reading
// it all, reading the answer while the body is still being sent. The
// server then closes the connection with the rest unread, so the writes
// end in a reset: net/http's client gives that error instead of the
// answer unless its reader took the answer first, within the half second
// the server waits before the reset (http's rstAvoidanceDelay), which a
// loaded machine does not always give it. Here the answer is read from a
// connection of the test's own, apart from the writes, and whatever
// became of them: it is in the socket's buffer before the reset comes.
func (c *client) uploadRefused(agentID, contentType string, body io.Reader) *response {
	c.e.t.Helper()
	req, err := http.NewRequest("POST", c.e.srv.URL+"/api/agents/"+agentID+"/workspace/import", body)
	if err != nil {
		c.e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.CookieName, Value: c.cookie})
	}
	conn, err := net.Dial("tcp", c.e.srv.Listener.Addr().String())
	if err != nil {
		c.e.t.Fatal(err)
	}
	defer conn.Close()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		req.Write(conn) // chunked: the body's length is unknown; it ends in a reset, or when conn is closed below
	}()
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		c.e.t.Fatalf("import: no answer: %v", err)
	}
	data, err := io.ReadAll(res.Body)
	if err != nil {
		c.e.t.Fatalf("import: the answer's body: %v", err)
	}
	conn.Close()
	<-sent
	return &response{t: c.e.t, status: res.StatusCode, header: res.Header, body: data, req: "POST import"}
}

// tree lists every path under dir with what it is: a file's content and
// mode, a link's target, or "dir".
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out[rel] = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("%v %q", info.Mode(), b)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// noImportsLeft fails when an import left a temporary tree or spool.
func (e *env) noImportsLeft(t testing.TB) {
	t.Helper()
	left, _ := os.ReadDir(filepath.Join(e.dataDir, "imports"))
	for _, l := range left {
		t.Errorf("import left %s in the data directory", l.Name())
	}
}

func TestImportRefusesHostileArchives(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")

	good := tarEntry{name: "good.txt", body: "fine\n"}
	tests := []struct {
		name   string
		ctype  string
		body   []byte
		status int
		says   string // the message must hold this (the entry's name, the limit)
	}{
		{"absolute path", "application/x-tar", tarOf(t, good, tarEntry{name: "/etc/cron.d/evil", body: "x"}), 400, `"/etc/cron.d/evil"`},
		{"dot dot", "application/x-tar", tarOf(t, good, tarEntry{name: "../evil", body: "x"}), 400, `"../evil"`},
		{"dot dot inside", "application/x-tar", tarOf(t, tarEntry{name: "a/../../evil", body: "x"}), 400, `"a/../../evil"`},
		{"zip slip", "application/zip", zipOf(t, zipEntry{name: "ok.txt", body: "ok"}, zipEntry{name: "dir/../../../tmp/evil", body: "x"}), 400, `"dir/../../../tmp/evil"`},
		{"zip absolute", "application/zip", zipOf(t, zipEntry{name: "/tmp/evil", body: "x"}), 400, `"/tmp/evil"`},
		{"symbolic link", "application/x-tar", tarOf(t, good, tarEntry{name: "passwd", typ: tar.TypeSymlink, link: "/etc/passwd"}), 400, "links are not imported"},
		{"symbolic link inside the tree", "application/x-tar", tarOf(t, good, tarEntry{name: "alias", typ: tar.TypeSymlink, link: "good.txt"}), 400, `"alias"`},
		{"hard link", "application/x-tar", tarOf(t, good, tarEntry{name: "hard", typ: tar.TypeLink, link: "good.txt"}), 400, "links are not imported"},
		{"zip symbolic link", "application/zip", zipOf(t, zipEntry{name: "passwd", body: "/etc/passwd", mode: fs.ModeSymlink | 0o777}), 400, "links are not imported"},
		{"character device", "application/x-tar", tarOf(t, good, tarEntry{name: "null", typ: tar.TypeChar}), 400, `"null" is a device`},
		{"block device", "application/x-tar", tarOf(t, tarEntry{name: "sda", typ: tar.TypeBlock}), 400, `"sda" is a device`},
		{"fifo", "application/x-tar", tarOf(t, tarEntry{name: "pipe", typ: tar.TypeFifo}), 400, `"pipe" is a device or a FIFO`},
		{"duplicate entry", "application/x-tar", tarOf(t, good, tarEntry{name: "good.txt", body: "again\n"}), 400, `"good.txt" appears twice`},
		{"duplicate after ./", "application/x-tar", tarOf(t, good, tarEntry{name: "./good.txt", body: "again\n"}), 400, "appears twice"},
		{"case collision", "application/x-tar", tarOf(t, tarEntry{name: "README.md", body: "a"}, tarEntry{name: "readme.md", body: "b"}), 400, `"readme.md" is one file with "README.md"`},
		{"case collision of directories", "application/x-tar", tarOf(t, tarEntry{name: "Src/a.go", body: "a"}, tarEntry{name: "src/b.go", body: "b"}), 400, `"src/b.go"`},
		{"normalisation collision", "application/x-tar", tarOf(t, tarEntry{name: "caf\u00e9.txt", body: "a"}, tarEntry{name: "cafe\u0301.txt", body: "b"}), 400, "caf"},
		{"file then directory", "application/x-tar", tarOf(t, tarEntry{name: "a", body: "file"}, tarEntry{name: "a/b", body: "x"}), 400, `which is a file in the archive`},
		{"directory then file", "application/x-tar", tarOf(t, tarEntry{name: "a/", typ: tar.TypeDir, mode: 0o755}, tarEntry{name: "a", body: "x"}), 400, "both a file and a directory"},
		{"git directory", "application/x-tar", tarOf(t, good, tarEntry{name: ".git/config", body: "[core]"}), 400, `".git/config"`},
		{"git look-alike", "application/x-tar", tarOf(t, tarEntry{name: ".GIT/hooks/pre-commit", body: "#!/bin/sh", mode: 0o755}), 400, `".GIT/hooks/pre-commit"`},
		{"corral's own files", "application/x-tar", tarOf(t, tarEntry{name: ".corral/state", body: "x"}), 400, `".corral/state"`},
		{"corral's temporaries", "application/x-tar", tarOf(t, tarEntry{name: "src/.corral-tmp-x", body: "x"}), 400, `.corral-tmp-x"`},
		{"control character", "application/x-tar", tarOf(t, tarEntry{name: "bad\nname", body: "x"}), 400, `bad\\nname`},
		{"trailing space", "application/x-tar", tarOf(t, tarEntry{name: "name ", body: "x"}), 400, `"name "`},
		{"bad entry after good ones, gzipped", "application/gzip", gzipOf(t, tarOf(t, good, tarEntry{name: "sub/ok", body: "y"}, tarEntry{name: "../evil", body: "x"})), 400, `"../evil"`},
		{"zip bomb with a huge declared size", "application/zip", zipOf(t, zipEntry{name: "bomb", declared: 10 << 30, inflate: make([]byte, 1<<20)}), 413, "268435456-byte limit on one file"},
		{"zip whose entry holds more than it declares", "application/zip", zipOf(t, zipEntry{name: "liar", declared: 1024, inflate: make([]byte, 4<<20)}), 400, `"liar" is damaged or holds other bytes`},
		{"not an archive", "", []byte("just some text, long enough to look at\n"), 400, "not a tar, tar.gz or zip"},
		{"truncated gzip", "application/gzip", gzipOf(t, tarOf(t, good))[:30], 400, "cannot be read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := owner.createAgent("hostile")
			owner.do("PUT", "/api/agents/"+id+"/files?path=keep.txt", "kept\n").want(http.StatusOK)
			ws := filepath.Join(e.dataDir, "workspaces", id)
			before := tree(t, ws)
			res := owner.upload(id, tc.ctype, bytes.NewReader(tc.body))
			if res.status != tc.status {
				t.Fatalf("import = %d %s, want %d", res.status, res.body, tc.status)
			}
			var b api.ErrorBody
			res.decode(&b)
			if tc.status == 400 && b.Error.Code != corral.ENAME && b.Error.Code != corral.EINVALID {
				t.Errorf("code = %q, want %q or %q", b.Error.Code, corral.ENAME, corral.EINVALID)
			}
			if tc.status == 413 && b.Error.Code != corral.ETOOLARGE {
				t.Errorf("code = %q, want %q", b.Error.Code, corral.ETOOLARGE)
			}
			if !strings.Contains(b.Error.Message, tc.says) {
				t.Errorf("message %q does not say %q", b.Error.Message, tc.says)
			}
			if got := tree(t, ws); !equalTrees(got, before) {
				t.Errorf("the workspace changed: %v, want %v", got, before)
			}
			e.noImportsLeft(t)
		})
	}
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestImportRefusesTooManyEntries streams a tar of 200,000 tiny files,
// made on the fly so the test never holds it: the import must stop at
// entry 100,001 with a 413, having written nothing into the workspace.
func TestImportRefusesTooManyEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100,000 files into a temporary tree")
	}
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("many")
	pr, pw := io.Pipe()
	written := make(chan int, 1)
	go func() {
		tw := tar.NewWriter(pw)
		n := 0
		var err error
		for ; n < 200_000 && err == nil; n++ {
			if err = tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%03d/f%06d", n%1000, n), Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}); err == nil {
				_, err = tw.Write([]byte{'x'})
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
		written <- n
	}()
	res := owner.uploadRefused(id, "application/x-tar", pr)
	pr.CloseWithError(io.ErrClosedPipe) // the server stopped reading: let the writer end
	if res.status != http.StatusRequestEntityTooLarge || res.code() != corral.ETOOLARGE {
		t.Fatalf("import of 200,000 entries = %d %s, want 413 too_large", res.status, res.body)
	}
	if !strings.Contains(string(res.body), "more than 100000 files") {
		t.Errorf("answer %s does not name the file limit", res.body)
	}
	if n := <-written; n >= 200_000 {
		t.Errorf("the server read all %d entries: it must stop at the limit", n)
	}
	if got := tree(t, filepath.Join(e.dataDir, "workspaces", id)); len(got) != 0 {
		t.Errorf("the workspace has %d paths after a refused import, want none", len(got))
	}
	e.noImportsLeft(t)
}

// TestImportConfiguredLimits: the server's own limits (serve's
// --import-max-* flags) are what an import meets.
func TestImportConfiguredLimits(t *testing.T) {
	e := newEnv(t, envOptions{imports: archive.Limits{MaxFiles: 2, MaxFileSize: 10}})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("limited")
	tests := []struct {
		name   string
		body   []byte
		status int
		says   string
	}{
		{"within", tarOf(t, tarEntry{name: "a", body: "1"}, tarEntry{name: "b", body: "2"}), http.StatusOK, ""},
		{"one file too many", tarOf(t, tarEntry{name: "a", body: "1"}, tarEntry{name: "b", body: "2"}, tarEntry{name: "c", body: "3"}), http.StatusRequestEntityTooLarge, "more than 2 files"},
		{"one file too large", tarOf(t, tarEntry{name: "big", body: "0123456789x"}), http.StatusRequestEntityTooLarge, "is larger than the 10-byte limit on one file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := owner.upload(id, "application/x-tar", bytes.NewReader(tc.body))
			if res.status != tc.status || !strings.Contains(string(res.body), tc.says) {
				t.Fatalf("import = %d %s, want %d saying %q", res.status, res.body, tc.status, tc.says)
			}
		})
	}
}

// project is a small real project with dotfiles, as a developer would
// archive it.
var project = []struct {
	path, body string
	exec       bool
}{
	{".gitignore", "bin/\n*.o\n", false},
	{".github/workflows/ci.yml", "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n", false},
	{".env", "API_KEY=not-for-viewers\n", false},
	{"README.md", "# project\n", false},
	{"go.mod", "module example.com/p\n\ngo 1.26\n", false},
	{"cmd/p/main.go", "package main\n\nfunc main() {}\n", false},
	{"scripts/build.sh", "#!/bin/sh\ngo build ./...\n", true},
	{"data/blob.bin", string(bytes.Repeat([]byte{0, 1, 2, 0xff}, 70_000)), false},
	{"docs/caf\u00e9.md", "accents\n", false},
}

func projectTarGz(t testing.TB, prefix string) []byte {
	var entries []tarEntry
	entries = append(entries, tarEntry{name: prefix, typ: tar.TypeDir, mode: 0o755})
	for _, f := range project {
		mode := int64(0o644)
		if f.exec {
			mode = 0o755
		}
		entries = append(entries, tarEntry{name: prefix + f.path, body: f.body, mode: mode})
	}
	return gzipOf(t, tarOf(t, entries...))
}

// untar reads a tar.gz into path → "mode content" (directories left out).
func untar(t testing.TB, b []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the archive is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("the archive is not a tar: %v", err)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			t.Errorf("the archive holds %q of type %q: only files and directories belong", h.Name, h.Typeflag)
		}
		body, _ := io.ReadAll(tr)
		out[h.Name] = fmt.Sprintf("%o %q", h.Mode, body)
	}
}

func TestWorkspaceRoundTrip(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	viewer := e.signup("viewer@example.com", "Viewer")
	editor := e.signup("editor@example.com", "Editor")
	want := map[string]string{}
	for _, f := range project {
		mode := 0o644
		if f.exec {
			mode = 0o755
		}
		want[f.path] = fmt.Sprintf("%o %q", mode, f.body)
	}
	var size int64
	for _, f := range project {
		size += int64(len(f.body))
	}
	archives := []struct {
		name, ctype string
		body        []byte
	}{
		{"tar.gz by Content-Type", "application/gzip", projectTarGz(t, "")},
		{"tar.gz with ./ by magic", "", projectTarGz(t, "./")},
		{"tar by Content-Type", "application/x-tar", func() []byte {
			b, _ := io.ReadAll(must(gzip.NewReader(bytes.NewReader(projectTarGz(t, "")))))
			return b
		}()},
		{"zip by magic", "application/octet-stream", func() []byte {
			var entries []zipEntry
			for _, f := range project {
				mode := fs.FileMode(0o644)
				if f.exec {
					mode = 0o755
				}
				entries = append(entries, zipEntry{name: f.path, body: f.body, mode: mode})
			}
			return zipOf(t, entries...)
		}()},
	}
	for _, a := range archives {
		t.Run(a.name, func(t *testing.T) {
			id := owner.createAgent("project")
			owner.grant(id, viewer.user.ID, "viewer")
			owner.grant(id, editor.user.ID, "editor")
			res := editor.upload(id, a.ctype, bytes.NewReader(a.body)).want(http.StatusOK)
			var got api.ImportView
			res.decode(&got)
			if got.Files != len(project) || got.Bytes != size {
				t.Errorf("import = %+v, want %d files, %d bytes", got, len(project), size)
			}
			e.noImportsLeft(t)

			// What an archive leaves out: .git (a clone's), links.
			ws := filepath.Join(e.dataDir, "workspaces", id)
			write(t, filepath.Join(ws, ".git", "config"), "[core]\n")
			if err := os.Symlink("/etc/passwd", filepath.Join(ws, "passwd")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("cmd", filepath.Join(ws, "cmd-alias")); err != nil {
				t.Fatal(err)
			}
			down := owner.do("GET", "/api/agents/"+id+"/workspace/archive", nil).want(http.StatusOK)
			if ct := down.header.Get("Content-Type"); ct != "application/gzip" {
				t.Errorf("Content-Type = %q, want application/gzip", ct)
			}
			_, params, err := mime.ParseMediaType(down.header.Get("Content-Disposition"))
			if err != nil || params["filename"] != "project.tar.gz" {
				t.Errorf("Content-Disposition = %q, want attachment; filename=\"project.tar.gz\"", down.header.Get("Content-Disposition"))
			}
			compare(t, "owner's archive", untar(t, down.body), want)

			noSecret := map[string]string{}
			for k, v := range want {
				if k != ".env" {
					noSecret[k] = v
				}
			}
			compare(t, "viewer's archive", untar(t, viewer.do("GET", "/api/agents/"+id+"/workspace/archive", nil).want(http.StatusOK).body), noSecret)

			// The owner's archive imports again into another agent as it is.
			other := owner.createAgent("copy")
			owner.upload(other, "application/gzip", bytes.NewReader(down.body)).want(http.StatusOK)
			compare(t, "archive of the copy", untar(t, owner.do("GET", "/api/agents/"+other+"/workspace/archive", nil).want(http.StatusOK).body), want)
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func compare(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if g, w := got[k], want[k]; g != w {
			t.Errorf("%s: %s = %.80s, want %.80s", what, k, g, w)
		}
	}
}

func TestImportReplacesAndKeeps(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("again")
	ws := filepath.Join(e.dataDir, "workspaces", id)
	owner.do("PUT", "/api/agents/"+id+"/files?path=only-here.txt", "stays\n").want(http.StatusOK)
	owner.do("PUT", "/api/agents/"+id+"/files?path=a.txt", "old\n").want(http.StatusOK)
	owner.upload(id, "application/x-tar", bytes.NewReader(tarOf(t,
		tarEntry{name: "a.txt", body: "new\n", mode: 0o755},
		tarEntry{name: "suid", body: "#!/bin/sh\n", mode: 0o4755},
		tarEntry{name: "empty/", typ: tar.TypeDir, mode: 0o755},
	))).want(http.StatusOK)
	got := tree(t, ws)
	want := map[string]string{
		"only-here.txt": `-rw-r--r-- "stays\n"`, // import never deletes
		"a.txt":         `-rwxr-xr-x "new\n"`,   // replaced, x bit kept
		"suid":          `-rwxr-xr-x "#!/bin/sh\n"`,
	}
	compare(t, "workspace", got, want)
	// The same archive again changes nothing and succeeds.
	owner.upload(id, "application/x-tar", bytes.NewReader(tarOf(t, tarEntry{name: "a.txt", body: "new\n", mode: 0o755}))).want(http.StatusOK)
	compare(t, "workspace after the same import", tree(t, ws), want)
	// A directory where the archive has a file is a conflict, and nothing
	// is written.
	owner.do("PUT", "/api/agents/"+id+"/files?path=d/x.txt", "x").want(http.StatusOK)
	before := tree(t, ws)
	res := owner.upload(id, "application/x-tar", bytes.NewReader(tarOf(t, tarEntry{name: "b.txt", body: "b"}, tarEntry{name: "d", body: "file"})))
	if res.status != http.StatusConflict || !strings.Contains(string(res.body), `\"d\" is a directory`) {
		t.Errorf("import of a file over a directory = %d %s, want 409 naming d", res.status, res.body)
	}
	compare(t, "workspace after a conflicting import", tree(t, ws), before)
	e.noImportsLeft(t)
}

// An import while a run works on the workspace is allowed; the run's
// change to the same file then conflicts when approved.
func TestImportDuringARunConflictsOnApproval(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("busy")
	owner.do("PUT", "/api/agents/"+id+"/files?path=f.txt", "one\n").want(http.StatusOK)
	cs := e.propose(t, id, func(staged string) {
		write(t, filepath.Join(staged, "f.txt"), "from the run\n")
		owner.upload(id, "application/x-tar", bytes.NewReader(tarOf(t, tarEntry{name: "f.txt", body: "from the import\n"}))).want(http.StatusOK)
	})
	res := owner.do("POST", "/api/changes/"+cs.ID+"/approve", nil)
	if res.status != http.StatusConflict {
		t.Fatalf("approve after an import = %d %s, want 409", res.status, res.body)
	}
	b, _ := os.ReadFile(filepath.Join(e.dataDir, "workspaces", id, "f.txt"))
	if string(b) != "from the import\n" {
		t.Errorf("f.txt = %q, want the import's content", b)
	}
}

func TestDeleteFile(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	seed := func(t *testing.T) (string, string) {
		id := owner.createAgent("delete")
		for _, p := range []string{"a.txt", "dir/b.txt", "dir/sub/c.txt", ".github/workflows/ci.yml", "keep/x.txt"} {
			owner.do("PUT", "/api/agents/"+id+"/files?path="+p, "content of "+p).want(http.StatusOK)
		}
		ws := filepath.Join(e.dataDir, "workspaces", id)
		if err := os.MkdirAll(filepath.Join(ws, "dir", "empty"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc/passwd", filepath.Join(ws, "link")); err != nil {
			t.Fatal(err)
		}
		return id, ws
	}
	tests := []struct {
		name   string
		query  string
		status int
		gone   []string // paths that must no longer exist
		says   string
	}{
		{"a file", "?path=a.txt", 204, []string{"a.txt"}, ""},
		{"a dotfile", "?path=.github/workflows/ci.yml", 204, []string{".github/workflows/ci.yml"}, ""},
		{"a directory without recursive", "?path=dir", 409, nil, "recursive=true"},
		{"a directory, recursively", "?path=dir&recursive=true", 204, []string{"dir"}, ""},
		{"a dot-directory, recursively", "?path=.github&recursive=true", 204, []string{".github"}, ""},
		{"a missing file", "?path=nope.txt", 404, nil, "not found"},
		{"under a file", "?path=a.txt/x", 404, nil, "not found"},
		{"the root", "?path=", 400, nil, "give the path"},
		{"dot dot", "?path=../x", 400, nil, ".."},
		{"git", "?path=.git&recursive=true", 400, nil, ".git"},
		{"a symbolic link", "?path=link", 409, nil, "symbolic link"},
		{"bad recursive", "?path=dir&recursive=maybe", 400, nil, "recursive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, ws := seed(t)
			before := tree(t, ws)
			res := owner.do("DELETE", "/api/agents/"+id+"/files"+tc.query, nil)
			if res.status != tc.status {
				t.Fatalf("DELETE %s = %d %s, want %d", tc.query, res.status, res.body, tc.status)
			}
			if !strings.Contains(string(res.body), tc.says) {
				t.Errorf("answer %s does not say %q", res.body, tc.says)
			}
			want := map[string]string{}
			for k, v := range before {
				removed := false
				for _, g := range tc.gone {
					if k == g || strings.HasPrefix(k, g+"/") {
						removed = true
					}
				}
				if !removed {
					want[k] = v
				}
			}
			compare(t, "workspace", tree(t, ws), want)
		})
	}

	t.Run("a directory holding a link", func(t *testing.T) {
		id, ws := seed(t)
		if err := os.Symlink("../a.txt", filepath.Join(ws, "dir", "sub", "alias")); err != nil {
			t.Fatal(err)
		}
		before := tree(t, ws)
		res := owner.do("DELETE", "/api/agents/"+id+"/files?path=dir&recursive=true", nil)
		if res.status != http.StatusConflict || !strings.Contains(string(res.body), "dir/sub/alias") {
			t.Errorf("DELETE of a directory holding a link = %d %s, want 409 naming it", res.status, res.body)
		}
		compare(t, "workspace", tree(t, ws), before)
	})
}
