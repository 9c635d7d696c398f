package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/poll"
	"corral/internal/sandbox"
)

// corralCmd runs the command line in this process, as an operator would run
// the binary beside a server: its exit status and what it printed.
func corralCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut, noenv)
	return code, out.String(), errOut.String()
}

// person signs up on base (the first is an admin).
func person(t testing.TB, base, email string) *httpClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &httpClient{t: t, base: base, c: &http.Client{Jar: jar}}
	c.do("POST", "/auth/signup", map[string]string{"email": email, "name": email, "password": "correct horse battery"}, http.StatusCreated, nil)
	return c
}

// login signs email in on base.
func login(t testing.TB, base, email string) *httpClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &httpClient{t: t, base: base, c: &http.Client{Jar: jar}}
	c.do("POST", "/auth/login", map[string]string{"email": email, "password": "correct horse battery"}, http.StatusOK, nil)
	return c
}

func (c *httpClient) agent(name string) string {
	var a struct{ ID string }
	c.do("POST", "/agents", map[string]string{"name": name}, http.StatusCreated, &a)
	return a.ID
}

// postText posts a document's text.
func (c *httpClient) postText(path, text string) {
	c.t.Helper()
	res, err := c.c.Post(c.base+"/api"+path, "text/plain", strings.NewReader(text))
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(res.Body)
		c.t.Fatalf("POST %s = %d %s", path, res.StatusCode, b)
	}
}

// items GETs a list and keeps keys of each item: what a restore must give
// back as it was.
func (c *httpClient) items(path string, keys ...string) []map[string]any {
	c.t.Helper()
	var list struct{ Items []map[string]any }
	c.do("GET", path, nil, http.StatusOK, &list)
	out := []map[string]any{}
	for _, it := range list.Items {
		kept := map[string]any{}
		for _, k := range keys {
			kept[k] = it[k]
		}
		out = append(out, kept)
	}
	return out
}

func (c *httpClient) get(path string) any {
	c.t.Helper()
	var v any
	c.do("GET", path, nil, http.StatusOK, &v)
	return v
}

// drill is what the drill compares between the server backed up and the
// restored one, read through the API.
type drill struct {
	users, agentsA, agentsB, library   []map[string]any
	changes, runs, messages, documents map[string][]map[string]any // by agent
	traces                             map[string]any              // by run
}

func (d *drill) read(people map[string]*httpClient, agents, runs map[string]string) {
	alice, bob := people["alice"], people["bob"]
	d.users = alice.items("/users", "id", "email", "name", "admin", "disabled", "created_at")
	d.agentsA = alice.items("/agents", "id", "name", "owner", "policy", "state", "created_at")
	d.agentsB = bob.items("/agents", "id", "name", "owner", "policy", "state", "created_at")
	d.library = alice.items("/library/documents", "id", "name", "bytes", "chunks", "author")
	d.changes, d.runs, d.messages, d.documents = map[string][]map[string]any{}, map[string][]map[string]any{}, map[string][]map[string]any{}, map[string][]map[string]any{}
	for id, who := range agents {
		c := people[who]
		d.changes[id] = c.items("/agents/"+id+"/changes", "id", "run_id", "status", "entries", "created_at")
		d.messages[id] = c.items("/agents/"+id+"/messages", "id", "role", "content", "run_id", "created_at")
		d.documents[id] = c.items("/agents/"+id+"/documents", "id", "name", "bytes", "chunks", "author")
		d.runs[id] = c.items("/agents/"+id+"/runs", "id", "status", "change_set_id", "created_at")
	}
	d.traces = map[string]any{}
	for run, who := range runs {
		d.traces[run] = people[who].get("/runs/" + run + "/trace")
	}
}

// TestBackupRestoreDrill is the restore drill: a real server with two
// people, their agents, runs with change sets (one applied, one pending,
// one rejected) and documents is backed up while three runs go on (each a
// shell command still writing); the backup holds no key; it is restored
// into an empty directory, served, and the same people, agents, runs,
// change sets (the pending one expired), messages, documents, workspace
// files and traces answer through the API, the runs that were going are
// reconciled, and `corral trace verify` passes. Then the refusals: the
// same directory again (not empty), the archive with a byte flipped, and
// a store whose trace was rewritten (backup and restore both name it).
func TestBackupRestoreDrill(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	const slow = "backup-drill-slow-5b1c"
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		last := r.Last()
		if last.Role != "user" {
			return modeltest.Text("done")
		}
		for _, word := range []string{"one", "two", "three"} {
			if strings.Contains(last.Content, "write "+word) {
				return modeltest.Calls(modeltest.ShellCall("c1", fmt.Sprintf("echo %s > %s.txt", word, word)))
			}
		}
		return modeltest.Calls(modeltest.ShellCall("c1", "for i in $(seq 1 600); do echo $i >> slow.txt; sleep 0.1; done # "+slow))
	})
	defer model.Close()
	env := []string{"CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted"}
	data := reachableTempDir(t)
	srv := startServer(t, data, env...)
	alice := person(t, srv.base, "alice@example.com")
	bob := person(t, srv.base, "bob@example.com")
	people := map[string]*httpClient{"alice": alice, "bob": bob}
	writer, helper := alice.agent("writer"), bob.agent("helper")
	owners := map[string]string{writer: "alice", helper: "bob"} // agents' owners
	ended := map[string]string{}                                // runs ended before the backup, by whose
	var first string                                            // the first of them
	decide := func(who, agent, content, verdict string) {
		c := people[who]
		r := c.send(agent, content)
		if r.Status != "completed" || r.ChangeSetID == nil {
			t.Fatalf("run %q = %+v, want completed with a change set\n%s", content, r, srv.Log())
		}
		if verdict != "" {
			c.do("POST", "/changes/"+*r.ChangeSetID+"/"+verdict, nil, http.StatusOK, nil)
		}
		ended[r.ID] = who
		if first == "" {
			first = r.ID
		}
	}
	decide("alice", writer, "write one", "approve")
	decide("alice", writer, "write two", "") // left pending
	decide("bob", helper, "write three", "reject")
	alice.postText("/agents/"+writer+"/documents?name=deploys.md", "# Deploys\n\nRoll back with make rollback.\n")
	alice.postText("/library/documents?name=style.md", "# Style\n\nWrite short sentences.\n")

	// Three runs that keep going through the backup.
	var going []string
	for _, who := range []string{"alice", "alice", "bob"} {
		c := people[who]
		id := c.agent("slow")
		owners[id] = who
		var posted struct{ Run runAnswer }
		c.do("POST", "/agents/"+id+"/messages", map[string]string{"content": "take your time"}, http.StatusAccepted, &posted)
		going = append(going, posted.Run.ID)
	}
	poll.Until(t, "the three slow commands to run", func() bool { return len(processesWith(slow)) >= 3 })
	var before drill
	before.read(people, owners, ended)

	file := filepath.Join(t.TempDir(), "corral-backup.tar.gz")
	code, out, errOut := corralCmd(t, "backup", "--data", data, "--to", file)
	if code != 0 {
		t.Fatalf("corral backup = %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"database: 2 users, 5 agents, 6 runs (3 in progress), 3 change sets (1 pending)",
		"documents: 2 in 6 stores", "not in it: secret.key and egress-ca.key", "traces: ok:"} {
		if !strings.Contains(out, want) {
			t.Errorf("corral backup printed\n%s\nwant %q", out, want)
		}
	}
	if n := len(processesWith(slow)); n < 3 {
		t.Fatalf("after the backup %d slow commands run, want the three still going", n)
	}
	archive := gunzip(t, file)
	for _, key := range []string{"secret.key", "egress-ca.key"} {
		b, err := os.ReadFile(filepath.Join(data, key))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(archive, bytes.TrimSpace(b)) {
			t.Errorf("the backup holds the bytes of %s", key)
		}
	}
	for i, run := range going {
		people[[]string{"alice", "alice", "bob"}[i]].do("POST", "/runs/"+run+"/kill", nil, http.StatusAccepted, nil)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	srv.cmd.Wait()

	restored := filepath.Join(reachableTempDir(t), "restored")
	code, out, errOut = corralCmd(t, "restore", "--from", file, "--data", restored)
	if code != 0 {
		t.Fatalf("corral restore = %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"1 change sets pending when backed up are now expired", "3 runs in progress when backed up",
		"workspaces: 5", "traces: ok:", "copy secret.key to " + filepath.Join(restored, "secret.key")} {
		if !strings.Contains(out, want) {
			t.Errorf("corral restore printed\n%s\nwant %q", out, want)
		}
	}
	for _, key := range []string{"secret.key", "egress-ca.key"} { // as the operator does, from where they keep them
		b, err := os.ReadFile(filepath.Join(data, key))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(restored, key), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	srv = startServer(t, restored, env...)
	alice, bob = login(t, srv.base, "alice@example.com"), login(t, srv.base, "bob@example.com")
	people = map[string]*httpClient{"alice": alice, "bob": bob}
	for i, run := range going {
		var r runAnswer
		poll.Until(t, "the restored server to reconcile the runs that were going", func() bool {
			people[[]string{"alice", "alice", "bob"}[i]].do("GET", "/runs/"+run, nil, http.StatusOK, &r)
			return r.Status == "reconciled"
		})
	}
	var after drill
	after.read(people, owners, ended)
	// What the restore changes, on purpose: the pending change set is
	// expired (its entries dropped), the runs that were going reconciled.
	for _, items := range before.changes {
		for _, cs := range items {
			if cs["status"] == "pending" {
				cs["status"] = "expired"
				for _, e := range cs["entries"].([]any) {
					e.(map[string]any)["state"] = "dropped"
				}
			}
		}
	}
	for _, items := range before.runs {
		for _, r := range items {
			if r["status"] == "running" {
				r["status"] = "reconciled"
			}
		}
	}
	if !reflect.DeepEqual(after, before) {
		t.Errorf("the restored server answers\n%+v\nwant what the backed-up one did\n%+v", after, before)
	}
	var f struct{ Content string }
	alice.do("GET", "/agents/"+writer+"/files?path=one.txt", nil, http.StatusOK, &f)
	if f.Content != "one\n" {
		t.Errorf("the applied file one.txt holds %q in the restored workspace", f.Content)
	}
	if code, out, _ := corralCmd(t, "trace", "verify", "--data", restored); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Errorf("corral trace verify on the restored data = %d %s", code, out)
	}

	t.Run("refusals", func(t *testing.T) {
		if code, _, errOut := corralCmd(t, "restore", "--from", file, "--data", restored); code != 1 || !strings.Contains(errOut, "is not empty") {
			t.Errorf("restore into the served directory = %d %s, want 1: not empty", code, errOut)
		}
		damaged := filepath.Join(t.TempDir(), "damaged.tar.gz")
		b, _ := os.ReadFile(file)
		b[damaging(t, b)] ^= 0x40
		os.WriteFile(damaged, b, 0o600)
		dst := filepath.Join(t.TempDir(), "never")
		if code, _, errOut := corralCmd(t, "restore", "--from", damaged, "--data", dst); code != 1 || !strings.Contains(errOut, "not a whole Corral backup") {
			t.Errorf("restore of a damaged backup = %d %s, want 1: not a whole backup", code, errOut)
		}
		if _, err := os.Stat(dst); !os.IsNotExist(err) {
			t.Errorf("a refused restore made %s", dst)
		}

		// A trace rewritten in the restored store, around its triggers.
		srv.cmd.Process.Signal(syscall.SIGTERM)
		srv.cmd.Wait()
		db, err := sql.Open("sqlite", filepath.Join(restored, "corral.db"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec(`DROP TRIGGER trace_events_no_update; UPDATE trace_events SET at = '2020-01-01T00:00:00Z' WHERE run_id = ? AND seq = 3`, first)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		broken := "run " + first + ": event 3 does not match its hash"
		if code, out, _ := corralCmd(t, "trace", "verify", "--data", restored); code != 1 || !strings.Contains(out, broken) {
			t.Errorf("trace verify of the tampered store = %d %s, want 1 naming %q", code, out, broken)
		}
		again := filepath.Join(t.TempDir(), "tampered.tar")
		if code, _, errOut := corralCmd(t, "backup", "--data", restored, "--to", again); code != 1 || !strings.Contains(errOut, broken) {
			t.Errorf("backup of the tampered store = %d %s, want 1 naming %q", code, errOut, broken)
		}
		if code, _, errOut := corralCmd(t, "restore", "--from", again, "--data", filepath.Join(t.TempDir(), "r")); code != 1 || !strings.Contains(errOut, broken) {
			t.Errorf("restore of the tampered backup = %d %s, want 1 naming %q", code, errOut, broken)
		}
	})
}

func gunzip(t *testing.T, file string) []byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// damaging is the first byte of the gzip b, from its middle on, whose bit
// 0x40 flipped changes what it decompresses to (or breaks it): deflate
// ignores some bits, and a flip there leaves the same backup.
func damaging(t *testing.T, b []byte) int {
	t.Helper()
	gunzip := func(b []byte) []byte {
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
	want := gunzip(b)
	for i := len(b) / 2; i < len(b)-8; i++ {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if got := gunzip(c); got == nil || !bytes.Equal(got, want) {
			return i
		}
	}
	t.Fatal("no flip from the middle on changes the backup")
	return 0
}
