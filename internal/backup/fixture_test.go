package backup

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral"
	"corral/internal/retrieval"
	"corral/internal/store"
	"corral/internal/trace"
)

// fixture is a control's data directory as a server leaves it: a
// database with accounts, agents, runs and their traces, a pending change
// set and a sealed credential; document stores; workspaces; the keys.
type fixture struct {
	data    string
	agents  []string // agt_a has a workspace and documents; agt_b has neither
	keys    [][]byte // the bytes of secret.key and egress-ca.key
	pending string   // the pending change set
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	fx := fixture{data: t.TempDir(), agents: []string{"agt_a", "agt_b"}}
	db, err := store.Open(ctx, filepath.Join(fx.data, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u, err := db.CreateUser(ctx, corral.NewUser{Email: "a@example.com", Name: "A", PasswordHash: "$argon2id$fake"})
	if err != nil {
		t.Fatal(err)
	}
	rec := trace.NewRecorder(db, nil)
	for i, id := range fx.agents {
		a := corral.Agent{ID: id, Name: id, Owner: corral.UserRef{ID: u.ID}, State: corral.StateActive,
			Policy: corral.Policy{FS: corral.FSReadWrite, Changes: corral.ChangesReview, Network: corral.NetworkNone}}
		if err := db.CreateAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
		// One run that ended, and one still running.
		for j, ended := range []bool{true, false} {
			run := corral.Run{ID: fmt.Sprintf("run_%d%d", i, j), AgentID: id, MessageID: fmt.Sprintf("msg_%d%d", i, j),
				StageID: fmt.Sprintf("chg_%d%d", i, j), TriggeredBy: &corral.UserRef{ID: u.ID}}
			msg := corral.Message{ID: run.MessageID, AgentID: id, Role: corral.RoleUser, Content: "hi", RunID: run.ID, Author: &corral.UserRef{ID: u.ID}}
			if _, err := db.Admit(ctx, msg, run, corral.Admission{ID: fmt.Sprintf("adm_%d%d", i, j), AgentID: id, UserID: u.ID},
				func(corral.AdmissionFacts) string { return "" }); err != nil {
				t.Fatal(err)
			}
			types := []string{trace.Admitted, trace.Started, trace.ToolCall}
			if ended {
				types = append(types, trace.Ended)
			}
			for _, typ := range types {
				if _, err := rec.Append(ctx, run.ID, typ, map[string]string{"what": typ}); err != nil {
					t.Fatal(err)
				}
			}
			run.Status = corral.RunRunning
			if ended {
				run.Status, run.EndedAt = corral.RunCompleted, time.Now()
			}
			if err := db.UpdateRun(ctx, run, corral.RunAdmitted); err != nil {
				t.Fatal(err)
			}
		}
	}
	fx.pending = "chg_00"
	if err := db.CreateChangeSet(ctx, corral.ChangeSet{ID: fx.pending, AgentID: "agt_a", RunID: "run_00", Status: corral.ChangePending,
		Mode: "review", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour),
		Entries: []corral.ChangeEntry{{Path: "new.txt", Op: "create", NewSHA256: "ab", Class: corral.ClassOrdinary, State: corral.EntryPending}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateCodeCredential(ctx, corral.CodeCredential{ID: "crd_1", UserID: u.ID, Name: "gh", Host: "github.com", Username: "a"},
		[]byte("sealed credential")); err != nil {
		t.Fatal(err)
	}

	for _, s := range []documentStore{libraryStore(), agentStore("agt_a")} {
		x, err := retrieval.Open(ctx, filepath.Join(fx.data, filepath.FromSlash(s.path)), s.owner)
		if err != nil {
			t.Fatal(err)
		}
		text := "# Deploys\n\nRoll back with make rollback; the release notes say when.\n"
		doc := corral.Document{ID: corral.NewID("doc"), Name: "deploys.md", Source: corral.SourcePrivate, Bytes: int64(len(text)), CreatedAt: time.Now()}
		if err := x.Add(ctx, doc, retrieval.Split(doc.Name, text), nil); err != nil {
			t.Fatal(err)
		}
		x.Close()
	}

	ws := filepath.Join(fx.data, workspacesDir, "agt_a")
	writeFiles(t, ws, map[string]string{"README.md": "# a\n", "src/main.go": "package main\n", "bin/run.sh": "#!/bin/sh\n"})
	mustDo(t, os.Chmod(filepath.Join(ws, "bin/run.sh"), 0o755|fs.ModeSetuid))
	mustDo(t, os.Symlink("src/main.go", filepath.Join(ws, "main.go")))
	mustDo(t, os.Mkdir(filepath.Join(ws, "empty"), 0o750))
	mustDo(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600))
	// A workspace of an agent the database does not know (made after
	// its snapshot would be): never in the backup.
	writeFiles(t, filepath.Join(fx.data, workspacesDir, "agt_ghost"), map[string]string{"x": "x"})

	// What is never in a backup.
	fx.keys = [][]byte{[]byte("0123456789abcdef0123456789ABCDEF"), []byte("-----BEGIN PRIVATE KEY-----\nnot-a-real-ca-key\n")}
	mustDo(t, os.WriteFile(filepath.Join(fx.data, "secret.key"), fx.keys[0], 0o600))
	mustDo(t, os.WriteFile(filepath.Join(fx.data, "egress-ca.key"), fx.keys[1], 0o600))
	mustDo(t, os.WriteFile(filepath.Join(fx.data, caCertFile), []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	writeFiles(t, filepath.Join(fx.data, "stages", "chg_00"), map[string]string{"stage.json": "{}"})
	writeFiles(t, filepath.Join(fx.data, "sessions", "run_01"), map[string]string{"cmd/1.out": "out"})
	return fx
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		mustDo(t, os.MkdirAll(filepath.Dir(p), 0o755))
		mustDo(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// take backs fx up into a new file named name.
func (fx fixture) take(t *testing.T, name string) (string, Manifest) {
	t.Helper()
	to := filepath.Join(t.TempDir(), name)
	m, err := Take(context.Background(), Options{Data: fx.data, To: to, CorralVersion: "test"})
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return to, m
}

// restore restores file into dir under a lock file of the test's own.
func restore(file, dir string) (Restored, error) {
	return Restore(context.Background(), RestoreOptions{From: file, Data: dir, LockFile: "corral.lock",
		Lock: func(dir string) (func(), error) {
			f, err := os.OpenFile(filepath.Join(dir, "corral.lock"), os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				return nil, err
			}
			return func() { f.Close() }, nil
		}})
}

// raw is an archive's bytes, uncompressed.
func raw(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if isGzip(file) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// tree describes every file, directory and link under dir but those
// named in skip: type, permissions, content's hash, target.
func tree(t *testing.T, dir string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:8])
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
