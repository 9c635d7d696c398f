package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/store"
)

// TestRoundTrip backs a data directory up, as a plain tar and as a
// tar.gz, and restores it into a new directory: the same database (the
// pending change set expired), document stores and workspace; the keys,
// staged trees, sessions and a workspace of no known agent left out.
func TestRoundTrip(t *testing.T) {
	for _, name := range []string{"backup.tar", "backup.tar.gz"} {
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t)
			to, m := fx.take(t, name)

			want := Holds{Users: 1, Agents: 2, Runs: 4, RunsInProgress: 2, ChangeSets: 1, PendingChangeSets: 1, Messages: 4,
				Sealed: 1, DocumentStores: 2, Documents: 2, Workspaces: 1, WorkspaceFiles: 3, WorkspaceBytes: 27, Skipped: 1, CACert: true}
			if m.Holds != want {
				t.Errorf("Holds = %+v, want %+v", m.Holds, want)
			}
			if m.Traces != (Traces{Events: 14, Chains: 4}) {
				t.Errorf("Traces = %+v, want 14 events in 4 chains, unbroken", m.Traces)
			}
			if m.Schema != store.SchemaVersion() || m.CorralVersion != "test" || m.Format != Format {
				t.Errorf("manifest = %s %d, corral %s, schema %d", m.Format, m.Version, m.CorralVersion, m.Schema)
			}
			for _, e := range m.Files {
				for _, never := range []string{"secret.key", "egress-ca.key", "stages", "sessions", "workspaces/agt_ghost", "corral.lock"} {
					if e.Path == never || strings.HasPrefix(e.Path, never+"/") {
						t.Errorf("the backup holds %s", e.Path)
					}
				}
			}
			archive := raw(t, to)
			for i, key := range fx.keys {
				if bytes.Contains(archive, key) {
					t.Errorf("key %d is in the backup", i)
				}
			}
			if left, _ := os.ReadDir(filepath.Dir(to)); len(left) != 1 {
				t.Errorf("beside the backup: %v, want the backup alone", left)
			}

			dst := filepath.Join(t.TempDir(), "restored")
			r, err := restore(to, dst)
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if r.Expired != 1 || r.Census.PendingChangeSets != 0 || r.Census.ChangeSets != 1 || r.Census.Runs != 4 ||
				r.Census.Users != 1 || !reflect.DeepEqual(r.Census.AgentIDs, fx.agents) {
				t.Errorf("restored %+v, census %+v", r, r.Census)
			}
			if r.Traces != (Traces{Events: 14, Chains: 4}) || r.Documents != 2 || r.DocumentStores != 2 {
				t.Errorf("restored traces %+v, %d documents in %d stores", r.Traces, r.Documents, r.DocumentStores)
			}

			// The workspace as it was, but for the set-id bit and the FIFO.
			ws := tree(t, filepath.Join(fx.data, workspacesDir, "agt_a"), "fifo")
			ws["bin/run.sh"] = strings.Replace(ws["bin/run.sh"], "urwx", "-rwx", 1)
			if got := tree(t, filepath.Join(dst, workspacesDir, "agt_a")); !reflect.DeepEqual(got, ws) {
				t.Errorf("restored workspace:\n%v\nwant\n%v", got, ws)
			}
			var top []string
			for p := range tree(t, dst, workspacesDir+"/agt_a") {
				top = append(top, p)
			}
			slices.Sort(top)
			wantTop := []string{".", "corral.db", "corral.db-migrate.lock", "corral.lock", "documents", "documents/agents", "documents/agents/agt_a",
				"documents/agents/agt_a/documents.db", "documents/library", "documents/library/documents.db", "egress-ca.pem", "workspaces"}
			if !reflect.DeepEqual(top, wantTop) {
				t.Errorf("restored directory holds %v, want %v", top, wantTop)
			}

			db, err := store.OpenExisting(context.Background(), filepath.Join(dst, dbFile))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			cs, err := db.ChangeSet(context.Background(), fx.pending)
			if err != nil {
				t.Fatal(err)
			}
			if cs.Status != corral.ChangeExpired || cs.Entries[0].State != corral.EntryDropped {
				t.Errorf("the pending change set is restored %s with its entry %s, want expired and dropped", cs.Status, cs.Entries[0].State)
			}
		})
	}
}

// crafted writes an archive of entries with a manifest that lists them
// truly: what is refused is refused for the entries themselves.
func crafted(t *testing.T, entries ...*tar.Header) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "crafted.tar")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(f, false, newProgress(nil, time.Now))
	for _, hdr := range entries {
		var body *strings.Reader
		if hdr.Typeflag == tar.TypeReg {
			body = strings.NewReader(strings.Repeat("x", int(hdr.Size)))
		}
		if hdr.Typeflag == tar.TypeChar { // never written by a backup
			mustDo(t, w.tw.WriteHeader(hdr))
			w.entries = append(w.entries, Entry{Path: hdr.Name, Type: "char"})
			continue
		}
		mustDo(t, w.add(hdr, body))
	}
	mustDo(t, w.manifest(Manifest{Format: Format, Version: FormatVersion, Files: w.entries}))
	mustDo(t, w.close())
	mustDo(t, f.Close())
	return file
}

func dirEntry(name string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}
}
func fileEntry(name string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: 3}
}
func linkEntry(name, target string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}
}

// TestRestoreRefuses: a directory that is not empty, an archive cut short
// or damaged anywhere, one that is not a backup, or one whose entries
// would write outside what a backup holds, is refused, and nothing is
// written.
func TestRestoreRefuses(t *testing.T) {
	fx := newFixture(t)
	plain, _ := fx.take(t, "backup.tar")
	gz, _ := fx.take(t, "backup.tar.gz")
	b, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	gzBytes, err := os.ReadFile(gz)
	if err != nil {
		t.Fatal(err)
	}
	altered := func(src []byte, change func([]byte) []byte) func(t *testing.T) string {
		return func(t *testing.T) string {
			file := filepath.Join(t.TempDir(), "altered.tar")
			mustDo(t, os.WriteFile(file, change(slices.Clone(src)), 0o600))
			return file
		}
	}
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= 0x01; return b }
	}
	cut := func(n int) func([]byte) []byte { return func(b []byte) []byte { return b[:n] } }
	trace := bytes.Index(b, []byte("package main\n"))
	if trace < 0 {
		t.Fatal("the plain tar does not hold the workspace's file as it is")
	}
	same := func(file string) func(t *testing.T) string { return func(*testing.T) string { return file } }

	for _, tc := range []struct {
		name    string
		archive func(t *testing.T) string
		full    bool // the directory already holds a file
		want    string
	}{
		{"a directory that is not empty", same(plain), true, "is not empty (it holds mine.txt)"},
		{"cut to a tenth", altered(b, cut(len(b)/10)), false, "cut short"},
		{"cut in half", altered(b, cut(len(b)/2)), false, "cut short"},
		{"cut before its manifest ends", altered(b, cut(len(b)-1500)), false, "cut short"},
		{"gzip cut short", altered(gzBytes, cut(len(gzBytes)-10)), false, "cut short or damaged"},
		{"a byte of a file flipped", altered(b, flip(trace+3)), false, "workspaces/agt_a/src/main.go does not match its manifest"},
		{"a byte of the gzip flipped", altered(gzBytes, flip(damaging(t, gzBytes, len(gzBytes)/2))), false, "damaged"},
		{"not a backup", same(crafted(t, fileEntry("notes.txt"))), false, "notes.txt (file) is not among what a backup holds"},
		{"a key", same(crafted(t, fileEntry("secret.key"))), false, "secret.key (file) is not among"},
		{"a name with ..", same(crafted(t, dirEntry("workspaces"), fileEntry("workspaces/../x"))), false, "not a clean relative path"},
		{"an absolute name", same(crafted(t, fileEntry("/etc/x"))), false, "not a clean relative path"},
		{"through a link", same(crafted(t, dirEntry("workspaces"), dirEntry("workspaces/a"), linkEntry("workspaces/a/l", "/etc"),
			fileEntry("workspaces/a/l/passwd"))), false, "comes before its directory workspaces/a/l, or its directory is not one"},
		{"twice", same(crafted(t, fileEntry("corral.db"), fileEntry("corral.db"))), false, "corral.db is in it twice"},
		{"a link at the top", same(crafted(t, linkEntry("corral.db", "/etc/passwd"))), false, "corral.db (symlink) is not among"},
		{"a device", same(crafted(t, &tar.Header{Typeflag: tar.TypeChar, Name: "corral.db"})), false, "tar type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "restored")
			if tc.full {
				writeFiles(t, dst, map[string]string{"mine.txt": "mine"})
			}
			_, err := restore(tc.archive(t), dst)
			if err == nil || !strings.Contains(corral.ErrorMessage(err), tc.want) {
				t.Fatalf("Restore = %v, want an error saying %q", err, tc.want)
			}
			got := []string{}
			if des, err := os.ReadDir(dst); err == nil {
				for _, de := range des {
					got = append(got, de.Name())
				}
			}
			want := []string{}
			if tc.full {
				want = []string{"mine.txt"}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("after the refusal the directory holds %v, want %v", got, want)
			}
		})
	}
}

// TestRestoreRefusesANewerRelease: a backup whose schema is newer than
// this release's is refused before anything is written.
func TestRestoreRefusesANewerRelease(t *testing.T) {
	file := filepath.Join(t.TempDir(), "newer.tar")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(f, false, newProgress(nil, time.Now))
	mustDo(t, w.add(fileEntry(dbFile), strings.NewReader("xxx")))
	mustDo(t, w.manifest(Manifest{Format: Format, Version: FormatVersion, CorralVersion: "v9", Schema: store.SchemaVersion() + 1, Files: w.entries}))
	mustDo(t, w.close())
	mustDo(t, f.Close())
	dst := filepath.Join(t.TempDir(), "restored")
	_, err = restore(file, dst)
	if err == nil || !strings.Contains(corral.ErrorMessage(err), "the backup was made by a newer release (corral v9") {
		t.Fatalf("Restore = %v, want a newer release refused", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused restore made %s", dst)
	}
}

// TestRestoreTakesTheLock: a server that holds the directory's lock
// (here, a lock that answers so) stops the restore before it writes.
func TestRestoreTakesTheLock(t *testing.T) {
	to, _ := newFixture(t).take(t, "backup.tar")
	dst := filepath.Join(t.TempDir(), "restored")
	_, err := Restore(context.Background(), RestoreOptions{From: to, Data: dst, LockFile: "corral.lock",
		Lock: func(string) (func(), error) {
			return nil, errors.New("data directory in use: another corral serve (pid 7)")
		}})
	if err == nil || !strings.Contains(err.Error(), "another corral serve (pid 7)") {
		t.Fatalf("Restore = %v, want the lock's refusal", err)
	}
	if des, _ := os.ReadDir(dst); len(des) != 0 {
		t.Fatalf("a restore without the lock wrote %v", des)
	}
}

// TestRestoreFindsBrokenTraces: a store whose traces were tampered with
// (an event rewritten, the end of a run's trace cut off) backs up with the
// break named, and restores with it named again.
func TestRestoreFindsBrokenTraces(t *testing.T) {
	for _, tc := range []struct{ name, sql, want string }{
		{"rewritten", `UPDATE trace_events SET data = replace(data, 'tool_call', 'tool_calk') WHERE run_id = 'run_10' AND seq = 3`,
			"run run_10: event 3 does not match its hash"},
		{"cut off", `DELETE FROM trace_events WHERE run_id = 'run_00' AND seq = 4`,
			"run run_00: the run is completed, but its trace (3 events) does not end with its ended event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			tamper(t, filepath.Join(fx.data, dbFile), tc.sql)
			to, m := fx.take(t, "backup.tar")
			if !strings.Contains(m.Traces.Broken, tc.want) {
				t.Errorf("backup's traces = %+v, want the break %q", m.Traces, tc.want)
			}
			r, err := restore(to, filepath.Join(t.TempDir(), "restored"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.Traces.Broken, tc.want) {
				t.Errorf("restored traces = %+v, want the break %q", r.Traces, tc.want)
			}
		})
	}
}

// tamper runs stmt on the database at path as an attacker with the file
// would, around the store's own refusal.
func tamper(t *testing.T, path, stmt string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP TRIGGER trace_events_no_update; DROP TRIGGER trace_events_no_delete; ` + stmt); err != nil {
		t.Fatal(err)
	}
}

// TestBackupWaitsForApplies: a workspace whose apply journal holds a
// journal is waited for; one that keeps one past the wait fails the
// backup, and a failed backup leaves no file behind (an older backup of
// the same name stays as it was).
func TestBackupWaitsForApplies(t *testing.T) {
	fx := newFixture(t)
	journal := filepath.Join(fx.data, journalsDir, "agt_a")
	writeFiles(t, journal, map[string]string{"chg_1.json": "{}"})
	to := filepath.Join(t.TempDir(), "backup.tar")
	mustDo(t, os.WriteFile(to, []byte("the backup of yesterday"), 0o600))

	_, err := Take(context.Background(), Options{Data: fx.data, To: to, ApplyWait: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "workspace of agent agt_a: applies kept changing it") {
		t.Fatalf("Take = %v, want the workspace's applies named", err)
	}
	if b, _ := os.ReadFile(to); string(b) != "the backup of yesterday" {
		t.Fatalf("after a failed backup the file holds %q", b)
	}
	if des, _ := os.ReadDir(filepath.Dir(to)); len(des) != 1 {
		t.Fatalf("a failed backup left %v", des)
	}

	// The apply ends while the backup waits.
	done := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		done <- os.Remove(filepath.Join(journal, "chg_1.json"))
	}()
	m, err := Take(context.Background(), Options{Data: fx.data, To: to})
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, <-done)
	if m.Holds.Workspaces != 1 {
		t.Fatalf("Holds = %+v, want the workspace", m.Holds)
	}
}

// TestBackupCopiesAgainAfterAnApply: an apply that begins and ends while
// a workspace is copied (its journal made and removed, a file changed)
// makes the copy be taken again, with the applied file.
func TestBackupCopiesAgainAfterAnApply(t *testing.T) {
	fx := newFixture(t)
	ws := filepath.Join(fx.data, workspacesDir, "agt_a")
	journal := filepath.Join(fx.data, journalsDir, "agt_a")
	mustDo(t, os.MkdirAll(journal, 0o700))
	copies := 0
	copiedHook = func(agentID string) {
		copies++
		if copies == 1 {
			writeFiles(t, journal, map[string]string{"chg_9.json": "{}"})
			writeFiles(t, ws, map[string]string{"README.md": "# applied\n"})
			mustDo(t, os.Remove(filepath.Join(journal, "chg_9.json")))
		}
	}
	defer func() { copiedHook = nil }()
	to, _ := fx.take(t, "backup.tar")
	if copies != 2 {
		t.Errorf("the workspace was copied %d times, want 2", copies)
	}
	if !bytes.Contains(raw(t, to), []byte("# applied\n")) {
		t.Error("the backup holds the workspace as it was before the apply")
	}
}

// TestBackupRefuses: a directory with no database, and a backup file
// inside the data directory.
func TestBackupRefuses(t *testing.T) {
	fx := newFixture(t)
	for _, tc := range []struct{ name, data, to, want string }{
		{"no database", t.TempDir(), filepath.Join(t.TempDir(), "b.tar"), "there is no Corral database in"},
		{"inside the data directory", fx.data, filepath.Join(fx.data, "b.tar"), "is inside the data directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Take(context.Background(), Options{Data: tc.data, To: tc.to})
			if err == nil || !strings.Contains(corral.ErrorMessage(err), tc.want) {
				t.Fatalf("Take = %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(tc.to); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused backup wrote %s", tc.to)
			}
		})
	}
}

// damaging is the first byte of gz from at on whose lowest bit, flipped,
// changes what gz decompresses to (or breaks it). Deflate ignores some
// bits (the padding before a stored block, codes no symbol uses): a flip
// there leaves the same archive, which is rightly restored.
func damaging(t *testing.T, gz []byte, at int) int {
	t.Helper()
	want := gunzip(gz)
	for i := at; i < len(gz)-8; i++ {
		c := slices.Clone(gz)
		c[i] ^= 0x01
		if got := gunzip(c); got == nil || !bytes.Equal(got, want) {
			return i
		}
	}
	t.Fatal("no flip from the middle on changes the archive")
	return 0
}

// gunzip is what b decompresses to, nil when it does not.
func gunzip(b []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil
	}
	return out
}
