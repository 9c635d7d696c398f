package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/pgtest"
	"corral/internal/poll"
	"corral/internal/sandbox"
	"corral/internal/secrets"
)

// TestControlFailsOverOnPostgres: two controls (role all) share one
// PostgreSQL store, each with its own data directory. The first serves:
// a run completes; the second waits as a standby, answering 503 to all
// but /healthz. The
// first is killed (SIGKILL): the second takes the control lease once it
// lapses and serves the same accounts and agents (the browser's session
// cookie still works), runs on, and `corral trace verify --db` passes on
// the store. Neither logs the database's password.
func TestControlFailsOverOnPostgres(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	db := pgtest.NewDatabase(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		if r.Last().Role == "user" {
			return modeltest.Calls(modeltest.ShellCall("c1", "echo hi > hi.txt"))
		}
		return modeltest.Text("done")
	})
	defer model.Close()
	env := []string{"CORRAL_DATABASE_URL=" + db, "CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted", "CORRAL_SECRET_KEY=" + newSecretKey(t)}

	first := startServer(t, reachableTempDir(t), env...)
	if !strings.Contains(first.Log(), "store=postgres") {
		t.Fatalf("the server did not say it keeps its store in PostgreSQL:\n%s", first.Log())
	}
	if !strings.Contains(first.Log(), "no --trusted-proxy: requests the other controls forward") {
		t.Fatalf("a control on a shared store with no trusted proxy did not warn that forwarded clients count as the forwarder:\n%s", first.Log())
	}
	if !strings.Contains(first.Log(), "for failover run --role control with sandbox nodes") {
		t.Fatalf("role all on a shared store did not warn that a takeover elsewhere lacks its workspaces:\n%s", first.Log())
	}
	c, agentID := signedIn(t, first)
	if r := c.send(agentID, "go"); r.Status != "completed" {
		t.Fatalf("the run on the first control = %+v, want completed\n%s", r, first.Log())
	}

	// A control with a key of its own (its data directory made one) is
	// refused at once: it could open none of the store's secrets.
	wrong := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--data", reachableTempDir(t))
	wrong.Env = append(append(os.Environ(), "CORRAL_TEST_AS_MAIN=1"), env[:len(env)-1]...)
	if out, err := wrong.CombinedOutput(); err == nil || !strings.Contains(string(out), "secret key is not the one the other controls") {
		t.Fatalf("a control with another secret key: %v\n%s", err, out)
	}

	cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--data", reachableTempDir(t))
	cmd.Env = append(append(os.Environ(), "CORRAL_TEST_AS_MAIN=1"), env...)
	second := startProcess(t, cmd, "the second control never said it waits as a standby", func(line string) bool {
		return strings.Contains(line, "standby")
	})
	if strings.Contains(second.Log(), "corral serving") {
		t.Fatalf("the standby serves while the first holds the lease:\n%s", second.Log())
	}
	// It says so at once, and forwards.
	m := regexp.MustCompile(`standby.* addr=(http://[0-9.]+:\d+)`).FindStringSubmatch(second.Log())
	if m == nil {
		t.Fatalf("the standby did not say where it answers:\n%s", second.Log())
	}
	// Alive, ready (it forwards), a request forwarded to the serving
	// control (which asks for credentials), a node's relay refused so that
	// the node moves on to the serving control.
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusOK, "/api/agents": http.StatusUnauthorized, "/relay": http.StatusServiceUnavailable} {
		res, err := http.Get(m[1] + path)
		if err != nil {
			t.Fatalf("GET %s on the standby: %v", path, err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s on the standby = %d, want %d", path, res.StatusCode, want)
		}
	}
	var listed struct{ Items []struct{ ID string } }
	(&httpClient{t: t, base: m[1], c: c.c}).do("GET", "/agents", nil, http.StatusOK, &listed)
	if len(listed.Items) != 1 || listed.Items[0].ID != agentID {
		t.Fatalf("the agents through the standby = %+v, want the one made on the first", listed.Items)
	}
	// A grant and its revocation asked of the standby bite on the very
	// next request the grantee makes of the serving control.
	jar, _ := cookiejar.New(nil)
	viewer := &httpClient{t: t, base: first.base, c: &http.Client{Jar: jar}}
	viewer.do("POST", "/auth/signup", map[string]string{"email": "v@example.com", "name": "V", "password": "correct horse battery"}, http.StatusCreated, nil)
	viaStandby := &httpClient{t: t, base: m[1], c: c.c}
	viaStandby.do("POST", "/agents/"+agentID+"/grants", map[string]string{"email": "v@example.com", "level": "viewer"}, http.StatusOK, nil)
	viewer.do("GET", "/agents/"+agentID, nil, http.StatusOK, nil)
	var me struct{ User struct{ ID string } }
	viewer.do("GET", "/me", nil, http.StatusOK, &me)
	viaStandby.do("DELETE", "/agents/"+agentID+"/grants/"+me.User.ID, nil, http.StatusNoContent, nil)
	viewer.do("GET", "/agents/"+agentID, nil, http.StatusNotFound, nil)

	crash(first)
	killed := time.Now()
	serving := regexp.MustCompile(`corral serving.* addr=(http://[0-9.]+:\d+)`)
	var base string
	poll.Until(t, "the standby to take over", func() bool {
		if m := serving.FindStringSubmatch(second.Log()); m != nil {
			base = m[1]
		}
		return base != ""
	})
	t.Logf("the standby served %v after the first control was killed", time.Since(killed).Round(100*time.Millisecond))
	if !strings.Contains(second.Log(), "holding the control lease") {
		t.Fatalf("the second control serves without saying it holds the lease:\n%s", second.Log())
	}

	c.base = base
	var agents struct{ Items []struct{ ID string } }
	c.do("GET", "/agents", nil, http.StatusOK, &agents)
	if len(agents.Items) != 1 || agents.Items[0].ID != agentID {
		t.Fatalf("the agents on the second control = %+v, want the one made on the first", agents.Items)
	}
	var made struct{ ID string }
	c.do("POST", "/agents", map[string]string{"name": "after"}, http.StatusCreated, &made)
	if r := c.send(made.ID, "go"); r.Status != "completed" {
		t.Fatalf("a run on the second control = %+v, want completed\n%s", r, second.Log())
	}

	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"trace", "verify", "--db", db}, strings.NewReader(""), &out, &errOut, noenv)
	if code != 0 || !strings.HasPrefix(out.String(), "ok: ") {
		t.Fatalf("trace verify --db = %d %q %q, want 0 and ok", code, out.String(), errOut.String())
	}
	for name, log := range map[string]string{"first": first.Log(), "second": second.Log()} {
		if password != "" && strings.Contains(log, password) {
			t.Errorf("the %s control logged the database's password", name)
		}
	}
}

// TestControlFailoverMidRun: three controls (role control) on one
// PostgreSQL store and two sandbox nodes given all three. Ten runs' tool
// commands sleep on the nodes (where placement put them) when the serving
// control is killed
// (SIGKILL): one standby takes over and the other stays a standby, the
// nodes move their relays to it, the runs' sessions are re-attached
// through the nodes, and no run is lost: each completes with its
// command's whole output, run once, and every trace verifies.
func TestControlFailoverMidRun(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	db := pgtest.NewDatabase(t)
	const marker = "sleep 3.1415"
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		if r.Last().Role == "user" {
			return modeltest.Calls(modeltest.ShellCall("c1", "echo before >> ran.txt; echo before; "+marker+"; echo after > late.txt; echo slept"))
		}
		return modeltest.Text("done")
	})
	defer model.Close()
	// A 5 s term: the nodes reach a survivor within 10 s of the kill.
	env := []string{"CORRAL_ROLE=control", "CORRAL_FAILOVER_AFTER=5s", "CORRAL_DATABASE_URL=" + db, "CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted", "CORRAL_SECRET_KEY=" + newSecretKey(t)}
	first := startServer(t, reachableTempDir(t), env...)
	standbyAt := regexp.MustCompile(`standby.* addr=(http://[0-9.]+:\d+)`)
	var standbys []*server
	urls := []string{first.base}
	for range 2 {
		cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--data", reachableTempDir(t))
		cmd.Env = append(append(os.Environ(), "CORRAL_TEST_AS_MAIN=1"), env...)
		s := startProcess(t, cmd, "a control never said it waits as a standby", func(line string) bool {
			return strings.Contains(line, "standby")
		})
		m := standbyAt.FindStringSubmatch(s.Log())
		if m == nil {
			t.Fatalf("the standby did not say where it answers:\n%s", s.Log())
		}
		standbys = append(standbys, s)
		urls = append(urls, m[1])
	}

	var nodes []*server
	for _, name := range []string{"node-a", "node-b"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"node", "token", "--db", db}, nil, &out, &errOut, noenv); code != 0 {
			t.Fatalf("node token --db: %d %s", code, errOut.String())
		}
		nodes = append(nodes, startNamedNode(t, name, reachableTempDir(t), strings.Join(urls, ","), strings.TrimSpace(out.String())))
	}
	c, agentID := signedIn(t, first)
	c.nodesReady(2)
	const runs = 20
	agents := []string{agentID}
	for len(agents) < runs {
		var made struct{ ID string }
		c.do("POST", "/agents", map[string]string{"name": fmt.Sprintf("worker-%d", len(agents))}, http.StatusCreated, &made)
		agents = append(agents, made.ID)
	}
	// Any request to any control: the standbys forward theirs to the one
	// that serves.
	var posted []string
	for i, id := range agents {
		via := &httpClient{t: t, base: urls[i%len(urls)], c: c.c}
		var p struct{ Run runAnswer }
		via.do("POST", "/agents/"+id+"/messages", map[string]string{"content": "sleep on a node"}, http.StatusAccepted, &p)
		posted = append(posted, p.Run.ID)
	}
	// Each command's sleep, by its exact command line (its shell's holds
	// the marker too).
	sleeping := func() int {
		n := 0
		dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, d := range dirs {
			if b, err := os.ReadFile(d); err == nil && string(b) == strings.ReplaceAll(marker, " ", "\x00")+"\x00" {
				n++
			}
		}
		return n
	}
	poll.Until(t, "every command to run on the nodes", func() bool { return sleeping() == runs })
	// Where the runs went is placement's to decide (by the nodes' load
	// as control last heard it): logged, not required. Both nodes' relays
	// move either way (nodesReady(2) below).
	var placed struct {
		Items []struct {
			Name string
			Runs int
		}
	}
	c.do("GET", "/nodes", nil, http.StatusOK, &placed)

	// A browser's event stream on each standby, open before the kill:
	// each standby answers it itself, from the store and what the
	// serving control publishes.
	type followed struct {
		seqs []int64
		err  error
	}
	streams := make([]chan followed, len(standbys))
	for i := range standbys {
		streams[i] = make(chan followed, 1)
		started := make(chan struct{})
		go func() {
			seqs, err := followEvents(c.c, urls[1+i], posted[0], started)
			streams[i] <- followed{seqs, err}
		}()
		select {
		case <-started:
		case f := <-streams[i]:
			t.Fatalf("the event stream on standby %d ended before the kill: %v %v", i, f.seqs, f.err)
		}
	}

	crash(first)
	killed := time.Now()
	serving := -1
	poll.Until(t, "a standby to take over", func() bool {
		for i, s := range standbys {
			if strings.Contains(s.Log(), "corral serving") {
				serving = i
			}
		}
		return serving >= 0
	})
	t.Logf("a standby served %v after the first control was killed (nodes: %+v)", time.Since(killed).Round(100*time.Millisecond), placed.Items)
	c.base = urls[1+serving]
	c.nodesReady(2)
	t.Logf("both nodes were ready on it %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	for _, id := range posted {
		var r runAnswer
		poll.Until(t, "the run to end", func() bool {
			c.do("GET", "/runs/"+id, nil, http.StatusOK, &r)
			return r.Status != "admitted" && r.Status != "running"
		})
		if r.Status != "completed" || r.ChangeSetID == nil {
			t.Fatalf("run = %+v\nserving control:\n%s\nnode a:\n%s\nnode b:\n%s", r, standbys[serving].Log(), nodes[0].Log(), nodes[1].Log())
		}
		var cs struct{ Entries []struct{ Path, Diff string } }
		c.do("GET", "/changes/"+*r.ChangeSetID, nil, http.StatusOK, &cs)
		ran := ""
		var paths []string
		for _, e := range cs.Entries {
			paths = append(paths, e.Path)
			if e.Path == "ran.txt" {
				ran = e.Diff
			}
		}
		if strings.Join(paths, ",") != "late.txt,ran.txt" || strings.Count(ran, "before") != 1 {
			t.Fatalf("run %s's change set = %v, ran.txt's diff %q; want late.txt and ran.txt, the command run once", id, paths, ran)
		}
	}
	t.Logf("all %d runs ended %v after the first control was killed", runs, time.Since(killed).Round(100*time.Millisecond))
	// Both streams went on across the failover to the run's end: every
	// event once, in order, none missing.
	var events struct{ Items []struct{ Seq int64 } }
	c.do("GET", "/runs/"+posted[0]+"/trace", nil, http.StatusOK, &events)
	for i := range streams {
		f := <-streams[i]
		ok := f.err == nil && len(f.seqs) == len(events.Items)
		for j, seq := range f.seqs {
			ok = ok && seq == int64(j+1)
		}
		if !ok {
			t.Fatalf("the stream held on standby %d got seqs %v (%v); want 1 to %d once each", i, f.seqs, f.err, len(events.Items))
		}
	}
	if other := standbys[1-serving]; strings.Contains(other.Log(), "corral serving") {
		t.Fatalf("both standbys serve:\n%s", other.Log())
	}
	reqs := model.Requests()
	if len(reqs) != 2*runs {
		t.Fatalf("model calls = %d, want %d (each run's tool call once, then its answer)", len(reqs), 2*runs)
	}
	for _, req := range reqs {
		if last := req.Last(); last.Role == "tool" && !strings.Contains(last.Content, `before\nslept\n`) {
			t.Fatalf("the model was told %q, want the command's whole output", last.Content)
		}
	}
	// A terminal (a WebSocket) through the standby left, which forwards
	// it to the new serving control, which reaches the node.
	t.Run("a terminal through a standby", func(t *testing.T) {
		terminalOnNode(t, &httpClient{t: t, base: urls[1+(1-serving)], c: c.c}, agents[0])
	})
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"trace", "verify", "--db", db}, nil, &out, &errOut, noenv); code != 0 {
		t.Fatalf("trace verify --db = %d %q", code, out.String())
	}
}

// followEvents follows a run's event stream as a browser's EventSource
// does, until the stream ends, and returns the seq of each trace event;
// started is closed once the first has come.
func followEvents(client *http.Client, base, runID string, started chan<- struct{}) ([]int64, error) {
	req, _ := http.NewRequest("GET", base+"/api/runs/"+runID+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var seqs []int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			if strings.Contains(v, ".") {
				continue // an output event's: the last seq and the output's bytes so far
			}
			seq, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return seqs, err
			}
			if len(seqs) == 0 {
				close(started)
			}
			seqs = append(seqs, seq)
		}
	}
	return seqs, sc.Err()
}

// newSecretKey is a CORRAL_SECRET_KEY: controls sharing a store share it.
func newSecretKey(t testing.TB) string {
	b := make([]byte, secrets.KeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestStoreCopyCommand: `corral store copy` moves a SQLite store into an
// empty PostgreSQL database and says what it verified; into one that
// holds Corral data it refuses; a wrong --to is a usage error.
func TestStoreCopyCommand(t *testing.T) {
	data := traceData(t)
	db := pgtest.NewDatabase(t)
	copyTo := func(to string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"store", "copy", "--from", "sqlite:" + data, "--to", to}, nil, &out, &errOut, noenv)
		if code == 0 {
			return code, out.String() // the report; the progress went to stderr
		}
		return code, out.String() + errOut.String()
	}
	code, out := copyTo(db)
	if code != 0 || !strings.HasPrefix(out, "ok: ") || !strings.Contains(out, "8 trace events in 2 runs verified") {
		t.Fatalf("store copy = %d\n%s", code, out)
	}
	if code, out := copyTo(db); code != 1 || !strings.Contains(out, "already holds Corral data") {
		t.Fatalf("store copy into a copied database = %d\n%s", code, out)
	}
	if code, out := copyTo("/var/lib/elsewhere"); code != 2 || !strings.Contains(out, "--to must be a postgres:// URL") {
		t.Fatalf("store copy --to a directory = %d\n%s", code, out)
	}
	var verified bytes.Buffer
	if code := run(context.Background(), []string{"trace", "verify", "--db", db}, nil, &verified, &verified, noenv); code != 0 || verified.String() != "ok: 8 events in 2 runs\n" {
		t.Fatalf("trace verify --db on the copy = %d %q", code, verified.String())
	}
}

// TestBackupRefusesAPostgresStore: corral backup copies a SQLite store;
// given a control whose store is in PostgreSQL it says to use pg_dump.
func TestBackupRefusesAPostgresStore(t *testing.T) {
	var out, errOut bytes.Buffer
	env := func(k string) string {
		if k == "CORRAL_DATABASE_URL" {
			return "postgres://corral@127.0.0.1/corral"
		}
		return ""
	}
	code := run(context.Background(), []string{"backup", "--data", t.TempDir(), "--to", filepath.Join(t.TempDir(), "b.tar")}, nil, &out, &errOut, env)
	if code != 2 || !strings.Contains(errOut.String(), "back it up with pg_dump") {
		t.Fatalf("backup of a PostgreSQL control = %d %q", code, errOut.String())
	}
}
