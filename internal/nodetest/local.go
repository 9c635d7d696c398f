package nodetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"corral/internal/gitrepo"
	"corral/internal/node"
	"corral/internal/workspace"
)

// Setup is what a case needs of the node.Local behind its subject.
type Setup struct {
	// Git is the node's git configuration: zero, or one that trusts the
	// case's git server (on loopback, with a CA of its own).
	Git gitrepo.Config
}

// NewLocal is a node.Local over a fresh data directory, configured as
// setup says and then by tune (nil: as it is), and that directory. Its
// workspaces belong to the sandbox's user, as the server's do; what it
// started (sessions, staged trees' mounts) ends with the test.
func NewLocal(t testing.TB, setup Setup, tune func(*node.Config)) (*node.Local, string) {
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
	cfg := node.Config{Data: data, UID: uid, GID: uid, Git: setup.Git}
	if tune != nil {
		tune(&cfg)
	}
	l, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.EndAll(context.Background())
		l.Close()
	})
	return l, data
}

// StageTree is where a node.Local over data keeps a staged tree's files.
func StageTree(data string) func(stageID string) string {
	return func(stageID string) string { return filepath.Join(data, "stages", stageID, "tree") }
}

// LocalSubject is a fresh node.Local as the subject itself.
func LocalSubject(t *testing.T, setup Setup) Subject {
	l, data := NewLocal(t, setup, nil)
	return Subject{Trees: l, Sessions: l, Tree: StageTree(data)}
}
