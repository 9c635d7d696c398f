package noderpc_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/kerneltest"
	"corral/internal/node"
	"corral/internal/relay/noderpc"
	"corral/internal/sandbox"
	"corral/internal/workspace"
)

// local is node.Local over a fresh data directory, served over loopback
// TCP: the tests call it through the client and, to compare, directly.
type local struct {
	*node.Local
	data    string
	outputs inFlight // its Output calls running now
}

func (l *local) Output(ctx context.Context, sessionID, commandID string, offset int64, wait bool) (corral.CommandOutput, error) {
	defer l.outputs.enter()()
	return l.Local.Output(ctx, sessionID, commandID, offset, wait)
}

func newLocal(t testing.TB) (*local, *noderpc.Client) {
	t.Helper()
	return newLocalWith(t, nil)
}

// newLocalWith is newLocal with its node's configuration tuned.
func newLocalWith(t testing.TB, tune func(*node.Config)) (*local, *noderpc.Client) {
	t.Helper()
	data := t.TempDir()
	// The sandbox's user must reach staged trees under it; t.TempDir
	// makes its parent private.
	if err := os.Chmod(filepath.Dir(data), 0o711); err != nil {
		t.Fatal(err)
	}
	uid := 0
	if os.Geteuid() == 0 {
		uid = 65534 // the sandbox's host user owns workspaces
	}
	// Staged trees keep their mounts; they go before the temp dir does.
	t.Cleanup(func() {
		stages, _ := filepath.Glob(filepath.Join(data, "stages", "*"))
		for _, st := range stages {
			workspace.RemoveStage(st)
		}
	})
	cfg := node.Config{Data: data, UID: uid, GID: uid}
	if tune != nil {
		tune(&cfg)
	}
	l, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.EndAll(acting)
		l.Close()
	})
	n := &local{Local: l, data: data}
	return n, serve(t, n).client()
}

func stage(t testing.TB, c corral.Trees, spec corral.StageSpec) {
	t.Helper()
	if err := c.Stage(acting, spec); err != nil {
		kerneltest.Skip(t, "staging needs overlayfs or a copy: %v", err)
	}
}

// TestTrees: a run's tree, from staging to apply, through the relay.
func TestTrees(t *testing.T) {
	ctx := acting
	l, c := newLocal(t)
	const agent, stg = "agt_rpc", "chg_rpc"
	scope := corral.FileScope{AgentID: agent}
	if _, err := c.WriteFile(ctx, corral.FileWrite{AgentID: agent, Path: "notes.txt", Content: []byte("one\n")}); err != nil {
		t.Fatal(err)
	}
	if files, data, err := c.ReadFile(ctx, scope, "notes.txt"); err != nil || files != nil || string(data) != "one\n" {
		t.Fatalf("ReadFile(notes.txt) = %v, %q, %v", files, data, err)
	}
	stage(t, c, corral.StageSpec{ID: stg, AgentID: agent})
	// The run edits its tree.
	tree := filepath.Join(l.data, "stages", stg, "tree")
	if err := os.WriteFile(filepath.Join(tree, "notes.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := c.Manifest(ctx, agent, stg, corral.ClassPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 2 || m.Entries[0].Path != "new.txt" || m.Entries[1].Path != "notes.txt" {
		t.Fatalf("manifest = %+v, want new.txt and notes.txt", m.Entries)
	}
	for _, e := range m.Entries {
		if e.Class != corral.ClassOrdinary || e.Diff == "" {
			t.Errorf("entry %s: class %q, diff %q; want an ordinary entry with a diff", e.Path, e.Class, e.Diff)
		}
	}
	// The diffs of entries made before diffs were kept.
	bare := append([]corral.ChangeEntry(nil), m.Entries...)
	for i := range bare {
		bare[i].Diff = ""
	}
	diffs, err := c.Diffs(ctx, agent, stg, bare)
	if err != nil || !reflect.DeepEqual(diffs, m.Entries) {
		t.Fatalf("Diffs = %+v, %v; want the manifest's %+v", diffs, err, m.Entries)
	}
	if _, err := c.Apply(ctx, corral.ApplyRequest{AgentID: agent, StageID: stg, ID: stg, Entries: m.Entries}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for p, want := range map[string]string{"notes.txt": "one\ntwo\n", "new.txt": "new\n"} {
		if _, data, err := c.ReadFile(ctx, scope, p); err != nil || string(data) != want {
			t.Errorf("after the apply, %s = %q, %v; want %q", p, data, err, want)
		}
	}
	files, _, err := c.ReadFile(ctx, scope, "")
	if err != nil || len(files) != 2 {
		t.Errorf("listing = %+v, %v; want two files", files, err)
	}
	if err := c.DiscardStage(ctx, stg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.data, "stages", stg)); !os.IsNotExist(err) {
		t.Fatalf("the discarded stage is still there (%v)", err)
	}
	if err := c.ReopenStage(ctx, agent, stg); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("ReopenStage of a discarded stage = %v, want ENOTFOUND", err)
	}
}

// TestSameErrorsAsTheNode: a call that fails on the node fails the same
// through the relay, code and message: a Session of no session is
// ENOTFOUND, which the runner depends on.
func TestSameErrorsAsTheNode(t *testing.T) {
	ctx := acting
	l, c := newLocal(t)
	calls := []struct {
		name string
		call func(n noderpc.Node) error
		want string
	}{
		{"Session of no session", func(n noderpc.Node) error { _, err := n.Session(ctx, "run_none"); return err }, corral.ENOTFOUND},
		{"Session of no id", func(n noderpc.Node) error { _, err := n.Session(ctx, "../x"); return err }, corral.EINVALID},
		{"Exec in no session", func(n noderpc.Node) error {
			return n.Exec(ctx, "run_none", corral.Command{ID: "c1", Argv: []string{"/bin/true"}})
		}, corral.EUNAVAIL},
		{"Terminal of no session", func(n noderpc.Node) error { _, err := n.Terminal(ctx, "run_none", 80, 24); return err }, corral.EUNAVAIL},
		{"ReadFile of no file", func(n noderpc.Node) error {
			_, _, err := n.ReadFile(ctx, corral.FileScope{AgentID: "agt_none"}, "nothing.txt")
			return err
		}, corral.ENOTFOUND},
		{"Manifest of no stage", func(n noderpc.Node) error {
			_, err := n.Manifest(ctx, "agt_none", "chg_none", corral.ClassPolicy{})
			return err
		}, corral.ENOTFOUND},
		{"Import of no archive", func(n noderpc.Node) error {
			_, err := n.Import(ctx, "agt_none", "", strings.NewReader("not an archive"), nil)
			return err
		}, corral.EINVALID},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			direct, relayed := tt.call(l.Local), tt.call(c)
			if corral.ErrorCode(direct) != tt.want {
				t.Fatalf("the node itself: %v, want %s", direct, tt.want)
			}
			if corral.ErrorCode(relayed) != tt.want || corral.ErrorMessage(relayed) != corral.ErrorMessage(direct) {
				t.Fatalf("through the relay: %v, want %s %q as from the node", relayed, tt.want, corral.ErrorMessage(direct))
			}
		})
	}
}

func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, content)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// filesOf lists the regular files of a tar.gz with their contents.
func filesOf(t *testing.T, tgz []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatalf("the archive is not gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("the archive is broken: %v", err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = string(b)
		}
	}
}

// TestImportAndArchive: a tar imported through the relay lands in the
// workspace, and the workspace's archive comes back whole, byte for byte
// what the node makes.
func TestImportAndArchive(t *testing.T) {
	ctx := acting
	l, c := newLocal(t)
	const agent = "agt_io"
	files := map[string]string{"readme.md": "hello\n", "src/main.go": "package main\n", "src/big.bin": strings.Repeat("0123456789", 200<<10)}
	res, err := c.Import(ctx, agent, "application/x-tar", bytes.NewReader(tarOf(t, files)), nil)
	if err != nil || res.Files != 3 || res.Changed != 3 {
		t.Fatalf("Import = %+v, %v; want 3 files, all changed", res, err)
	}
	scope := corral.FileScope{AgentID: agent, Name: "agent"}
	var relayed, direct bytes.Buffer
	if err := c.Archive(ctx, scope, &relayed); err != nil {
		t.Fatal(err)
	}
	if got := filesOf(t, relayed.Bytes()); !reflect.DeepEqual(got, files) {
		t.Errorf("the archive holds %d files, want what was imported", len(got))
	}
	if err := l.Local.Archive(ctx, scope, &direct); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(relayed.Bytes(), direct.Bytes()) {
		t.Errorf("the relayed archive (%d bytes) differs from the node's own (%d bytes)", relayed.Len(), direct.Len())
	}
}

// needSessions skips where the sandbox cannot run.
func needSessions(t testing.TB) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "sessions need the sandbox: %v", err)
	}
}

// startSession stages a tree for the run and starts its session.
func startSession(t testing.TB, c noderpc.Node, run string) {
	t.Helper()
	stage(t, c, corral.StageSpec{ID: "chg_" + run, AgentID: "agt_" + run})
	if err := c.StartSession(acting, corral.SessionSpec{ID: run, StageID: "chg_" + run, Wall: 10 * time.Minute}); err != nil {
		t.Fatalf("StartSession: %v", err)
	}
}

// outputUntilExit reads a command's output to its exit.
func outputUntilExit(t *testing.T, c corral.Sessions, run, cmd string) (string, *corral.CommandExit) {
	t.Helper()
	var out []byte
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		o, err := c.Output(acting, run, cmd, int64(len(out)), true)
		if err != nil {
			t.Fatalf("Output(%s): %v", cmd, err)
		}
		out = append(out, o.Data...)
		if o.Exit != nil {
			return string(out), o.Exit
		}
	}
	t.Fatalf("command %s did not end; output %q", cmd, out)
	return "", nil
}

var env = []string{"PATH=/usr/bin:/bin"}

// TestSessions: a run's session through the relay: commands, their output
// to the exit, a wait cancelled by its caller that ends on the node too,
// signals, the end.
func TestSessions(t *testing.T) {
	needSessions(t)
	ctx := acting
	l, c := newLocal(t)
	const run = "run_rpc"
	startSession(t, c, run)
	if st, err := c.Session(ctx, run); err != nil || !st.Running {
		t.Fatalf("Session = %+v, %v; want running", st, err)
	}

	if err := c.Exec(ctx, run, corral.Command{ID: "c1", Argv: []string{"/bin/sh", "-c", "echo hello; exit 3"}, Env: env}); err != nil {
		t.Fatal(err)
	}
	if out, exit := outputUntilExit(t, c, run, "c1"); out != "hello\n" || exit.Code != 3 {
		t.Fatalf("c1 wrote %q and exited %+v, want hello and 3", out, exit)
	}

	// A caller that stops waiting (a browser gone): its call returns, and
	// the node's wait ends with it.
	if err := c.Exec(ctx, run, corral.Command{ID: "c2", Argv: []string{"/bin/sleep", "600"}, Env: env}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Output(wctx, run, "c2", 0, true)
		done <- err
	}()
	waitFor(t, "the node to wait for c2's output", func() bool { return l.outputs.n.Load() == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled Output returned %v, want context.Canceled", err)
		}
	case <-time.After(patience):
		t.Fatal("the cancelled Output did not return")
	}
	waitFor(t, "the node's Output to return", func() bool { return l.outputs.n.Load() == 0 })

	if err := c.Signal(ctx, run, "c2", "TERM"); err != nil {
		t.Fatal(err)
	}
	if _, exit := outputUntilExit(t, c, run, "c2"); exit.Code != 128+15 || !strings.HasSuffix(exit.Signal, "TERM") {
		t.Fatalf("c2 exited %+v, want by TERM", exit)
	}
	if err := c.EndSession(ctx, run); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session(ctx, run); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("Session after EndSession = %v, want ENOTFOUND", err)
	}
}

// screen reads a terminal until it shows what a test waits for.
type screen struct {
	t    *testing.T
	term corral.Terminal
	seen strings.Builder
}

// until reads until the screen holds want, and returns the read error
// that ended it first, if one did. A terminal that shows nothing more is
// closed after patience, which ends the read.
func (s *screen) until(want string) error {
	stop := time.AfterFunc(patience, func() { s.term.Close() })
	defer stop.Stop()
	buf := make([]byte, 4096)
	for !strings.Contains(s.seen.String(), want) {
		n, err := s.term.Read(buf)
		s.seen.Write(buf[:n])
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *screen) see(want string) {
	s.t.Helper()
	if err := s.until(want); err != nil {
		s.t.Fatalf("waiting for %q on the terminal: %v; screen %q", want, err, s.seen.String())
	}
}

func (s *screen) typeIn(text string) {
	s.t.Helper()
	if _, err := io.WriteString(s.term, text); err != nil {
		s.t.Fatalf("typing %q: %v", text, err)
	}
}

// TestTerminal: a session's shell through the relay: typing, resizing;
// closing detaches this viewer only, so a second one finds the same
// shell; the shell's exit is io.EOF.
func TestTerminal(t *testing.T) {
	needSessions(t)
	ctx := acting
	_, c := newLocal(t)
	const run = "run_term"
	startSession(t, c, run)

	term, err := c.Terminal(ctx, run, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	s := &screen{t: t, term: term}
	// The quotes keep what is typed, which the terminal echoes, from
	// reading as what the shell writes.
	s.typeIn("echo h''i\n")
	s.see("hi\r\n")
	if err := term.Resize(120, 40); err != nil {
		t.Fatal(err)
	}
	s.typeIn("stty size\n")
	s.see("40 120")
	if err := term.Resize(0, 40); corral.ErrorCode(err) != corral.EINVALID {
		t.Errorf("Resize(0, 40) = %v, want EINVALID", err)
	}
	// Seen run before the viewer goes: the supervisor drops what a viewer
	// typed and it has not read yet when the viewer detaches.
	s.typeIn("X=still-; echo set-$((1+1))\n")
	s.see("set-2")
	if err := term.Close(); err != nil {
		t.Fatal(err)
	}

	again, err := c.Terminal(ctx, run, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	s = &screen{t: t, term: again}
	s.typeIn("echo ${X}here\n")
	s.see("still-here")
	s.typeIn("exit\n")
	if err := s.until("\x00never\x00"); err != io.EOF {
		t.Fatalf("the shell exited, and Read returned %v, want io.EOF; screen %q", err, s.seen.String())
	}
}

// TestMaxSessions: a node bounded to two sessions says its load over the
// relay as it counts it, refuses a third start (EADMISSION, saying why)
// without leaving anything of it, and takes one again once a session has
// ended.
func TestMaxSessions(t *testing.T) {
	needSessions(t)
	_, c := newLocalWith(t, func(cfg *node.Config) { cfg.MaxSessions = 2 })
	load := func() corral.NodeLoad {
		t.Helper()
		l, err := c.Load(acting)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := load(); l != (corral.NodeLoad{Sessions: 0, MaxSessions: 2}) {
		t.Fatalf("an idle node's load = %+v", l)
	}
	startSession(t, c, "run_max_a")
	startSession(t, c, "run_max_b")
	if l := load(); l != (corral.NodeLoad{Sessions: 2, MaxSessions: 2}) || !l.Full() {
		t.Fatalf("with two sessions, load = %+v, want full", l)
	}
	stage(t, c, corral.StageSpec{ID: "chg_run_max_c", AgentID: "agt_run_max_c"})
	err := c.StartSession(acting, corral.SessionSpec{ID: "run_max_c", StageID: "chg_run_max_c", Wall: time.Minute})
	if corral.ErrorCode(err) != corral.EADMISSION || !strings.Contains(corral.ErrorMessage(err), "2 sessions") {
		t.Fatalf("a third session: %v, want EADMISSION saying the node runs 2", err)
	}
	if st, err := c.Session(acting, "run_max_c"); err == nil && st.Running {
		t.Fatalf("the refused session runs: %+v", st)
	}
	if err := c.EndSession(acting, "run_max_a"); err != nil {
		t.Fatal(err)
	}
	if l := load(); l.Sessions != 1 {
		t.Fatalf("after one ended, load = %+v", l)
	}
	if err := c.StartSession(acting, corral.SessionSpec{ID: "run_max_c", StageID: "chg_run_max_c", Wall: time.Minute}); err != nil {
		t.Fatalf("a session once there is room: %v", err)
	}
}
