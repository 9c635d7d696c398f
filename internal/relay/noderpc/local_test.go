package noderpc_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/kerneltest"
	"corral/internal/node"
	"corral/internal/nodetest"
	"corral/internal/relay/noderpc"
	"corral/internal/sandbox"
)

// local is node.Local over a fresh data directory, served over loopback
// TCP: the tests call it through the client and, to compare, directly.
type local struct {
	*node.Local
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
	l, _ := nodetest.NewLocal(t, nodetest.Setup{}, tune)
	n := &local{Local: l}
	return n, serve(t, n).client()
}

// TestConformance: the client, over loopback TCP to a node.Local, passes
// the suite every implementation of corral.Trees and corral.Sessions
// passes. The node replays the access decision.
func TestConformance(t *testing.T) {
	nodetest.Run(t, func(t *testing.T, setup nodetest.Setup) nodetest.Subject {
		l, data := nodetest.NewLocal(t, setup, nil)
		c := serve(t, l).client()
		return nodetest.Subject{Trees: c, Sessions: c, Tree: nodetest.StageTree(data), Caps: nodetest.Caps{ReplaysAccess: true}}
	})
}

func stage(t testing.TB, c corral.Trees, spec corral.StageSpec) {
	t.Helper()
	if err := c.Stage(acting, spec); err != nil {
		kerneltest.Skip(t, "staging needs overlayfs or a copy: %v", err)
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

// TestImportAndArchive: a tar imported through the relay lands in the
// workspace, and the workspace's archive comes back whole, byte for byte
// what the node makes.
func TestImportAndArchive(t *testing.T) {
	ctx := acting
	l, c := newLocal(t)
	const agent = "agt_io"
	files := map[string]string{"readme.md": "hello\n", "src/main.go": "package main\n", "src/big.bin": strings.Repeat("0123456789", 200<<10)}
	res, err := c.Import(ctx, agent, "application/x-tar", bytes.NewReader(nodetest.TarOf(t, files)), nil)
	if err != nil || res.Files != 3 || res.Changed != 3 {
		t.Fatalf("Import = %+v, %v; want 3 files, all changed", res, err)
	}
	scope := corral.FileScope{AgentID: agent, Name: "agent"}
	var relayed, direct bytes.Buffer
	if err := c.Archive(ctx, scope, &relayed); err != nil {
		t.Fatal(err)
	}
	if got := nodetest.FilesOfTarGz(t, relayed.Bytes()); !reflect.DeepEqual(got, files) {
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

var env = []string{"PATH=/usr/bin:/bin"}

// TestCancelledOutputEndsOnTheNode: a caller that stops waiting for a
// command's output (a browser gone) has its call return, and the node's
// wait ends with it. (The rest of a session through the relay is the
// conformance suite's.)
func TestCancelledOutputEndsOnTheNode(t *testing.T) {
	needSessions(t)
	ctx := acting
	l, c := newLocal(t)
	const run = "run_rpc"
	startSession(t, c, run)
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
