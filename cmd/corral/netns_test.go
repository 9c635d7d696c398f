//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/gittest"
	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/poll"
	"corral/internal/sandbox"
	"corral/internal/toolstest"
	"corral/internal/vethtest"
)

// netLab is three network namespaces made for one test: control's and
// two sandbox nodes', each node joined to control by a veth pair of its
// own, and control joined to the test's namespace by a third, so the
// test (its HTTP client and its fake model) and control reach each other
// while the nodes reach nothing but control.
//
//	test (root ns) rootIP ── ctlIP  control  10.77.1.1 ── 10.77.1.2  node 1
//	                                         10.77.2.1 ── 10.77.2.2  node 2
type netLab struct {
	ip            string // the ip command
	ctl, n1, n2   string // namespace names
	rootIP, ctlIP string // the root ↔ control link
	rootLink      string // its end in the root namespace
}

// The nodes' links live inside private namespaces, so their addresses
// cannot clash with anything; the root link's end is in the host's
// namespace, which other runs of this test may share: its /30 is taken
// from the pid, in 10.78.0.0/16 (16,384 of them).
const (
	ctlToN1, n1Addr = "10.77.1.1", "10.77.1.2"
	ctlToN2, n2Addr = "10.77.2.1", "10.77.2.2"
	controlPort     = "8080" // control's namespace is new: any port is free there
)

// newNetLab makes the namespaces and links, and removes them when the test
// ends, failed or not. It skips (kerneltest) without ip, nsenter or the
// right to make namespaces.
func newNetLab(t *testing.T) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "network namespaces need root")
	}
	lab := &netLab{}
	for _, name := range []string{"ip", "nsenter", "tc"} {
		p, err := lookPath(name)
		if err != nil {
			kerneltest.Skip(t, "%s is missing (iproute2, util-linux): %v", name, err)
		}
		if name == "ip" {
			lab.ip = p
		}
	}
	pid := os.Getpid()
	lab.ctl, lab.n1, lab.n2 = fmt.Sprintf("crl-ctl-%d", pid), fmt.Sprintf("crl-n1-%d", pid), fmt.Sprintf("crl-n2-%d", pid)
	lab.rootLink = fmt.Sprintf("crl0-%d", pid) // ≤ 15 bytes: pids are ≤ 4194304
	block := pid % (1 << 14)
	lab.rootIP = fmt.Sprintf("10.78.%d.%d", block/64, block%64*4+1)
	lab.ctlIP = fmt.Sprintf("10.78.%d.%d", block/64, block%64*4+2)

	if out, err := exec.Command(lab.ip, "netns", "add", lab.ctl).CombinedOutput(); err != nil {
		kerneltest.Skip(t, "cannot make a network namespace: %v %s", err, out)
	}
	t.Cleanup(func() {
		// Deleting a namespace frees its veths only once the kernel gets to
		// it; the root link's end goes now, so its address does too.
		exec.Command(lab.ip, "link", "del", lab.rootLink).Run()
		for _, ns := range []string{lab.ctl, lab.n1, lab.n2} {
			exec.Command(lab.ip, "netns", "del", ns).Run()
		}
	})
	if out, err := exec.Command(lab.ip, "link", "add", lab.rootLink, "type", "veth", "peer", "name", "to-root", "netns", lab.ctl).CombinedOutput(); err != nil {
		kerneltest.Skip(t, "cannot make a veth pair: %v %s", err, out)
	}
	for _, args := range [][]string{
		{"netns", "add", lab.n1},
		{"netns", "add", lab.n2},
		{"addr", "add", lab.rootIP + "/30", "dev", lab.rootLink},
		{"link", "set", lab.rootLink, "up"},
		{"-n", lab.ctl, "addr", "add", lab.ctlIP + "/30", "dev", "to-root"},
		{"-n", lab.ctl, "link", "add", "to-n1", "type", "veth", "peer", "name", "to-ctl", "netns", lab.n1},
		{"-n", lab.ctl, "link", "add", "to-n2", "type", "veth", "peer", "name", "to-ctl", "netns", lab.n2},
		{"-n", lab.ctl, "addr", "add", ctlToN1 + "/30", "dev", "to-n1"},
		{"-n", lab.ctl, "addr", "add", ctlToN2 + "/30", "dev", "to-n2"},
		{"-n", lab.n1, "addr", "add", n1Addr + "/30", "dev", "to-ctl"},
		{"-n", lab.n2, "addr", "add", n2Addr + "/30", "dev", "to-ctl"},
		{"-n", lab.ctl, "link", "set", "lo", "up"},
		{"-n", lab.ctl, "link", "set", "to-root", "up"},
		{"-n", lab.ctl, "link", "set", "to-n1", "up"},
		{"-n", lab.ctl, "link", "set", "to-n2", "up"},
		{"-n", lab.n1, "link", "set", "lo", "up"},
		{"-n", lab.n1, "link", "set", "to-ctl", "up"},
		{"-n", lab.n2, "link", "set", "lo", "up"},
		{"-n", lab.n2, "link", "set", "to-ctl", "up"},
	} {
		lab.run(t, args...)
	}
	return lab
}

// lookPath finds a command on PATH or in the sbin directories, where
// Debian puts ip and tc and where a non-login PATH may not look.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH nor in the sbin directories", name)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

func (lab *netLab) run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(lab.ip, args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// throttle shapes what ns sends on dev with a token bucket.
func (lab *netLab) throttle(t *testing.T, ns, dev, rate string) {
	t.Helper()
	tc, _ := lookPath("tc")
	args := []string{"-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms"}
	if out, err := exec.Command(tc, args...).CombinedOutput(); err != nil {
		kerneltest.Skip(t, "cannot shape a link (the tbf queueing discipline): tc %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// serveInRoot makes target (a loopback URL of this process) reachable from
// control's namespace at the root link's address, and returns that URL.
// The fake model stays in this process, so the test can read what it was
// sent; this proxy is the only thing listening on the link.
func (lab *netLab) serveInRoot(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(lab.rootIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	// Bytes as they are, both ways: an HTTP proxy in between would be one
	// more client and server whose own connection handling could fail a
	// stream (it once did, mid-answer), and the test is not about it.
	t.Cleanup(func() { l.Close() })
	go splice(l, u.Host)
	return "http://" + l.Addr().String() + u.Path
}

// splice copies each connection l accepts to one it makes to target, from
// this process's namespace, until l closes.
func splice(l net.Listener, target string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer out.Close()
			done := make(chan struct{})
			go func() {
				io.Copy(out, in)
				out.(*net.TCPConn).CloseWrite()
				close(done)
			}()
			io.Copy(in, out)
			in.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}

// gitOnNodes makes the test's git server (on this namespace's loopback)
// reachable from each node's namespace at the same address on the node's
// own loopback, which its certificate names: a listener the test makes
// inside each namespace, spliced to the server from here. It returns the
// repository's URL as the nodes reach it.
func (lab *netLab) gitOnNodes(t *testing.T, git *gittest.Server) string {
	t.Helper()
	u, err := url.Parse(git.URL())
	if err != nil {
		t.Fatal(err)
	}
	port := "0"
	for _, ns := range []string{lab.n2, lab.n1} {
		l, err := vethtest.ListenIn(ns, net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			t.Fatalf("listening in %s: %v", ns, err)
		}
		t.Cleanup(func() { l.Close() })
		go splice(l, u.Host)
		_, port, _ = net.SplitHostPort(l.Addr().String())
	}
	u.Host = net.JoinHostPort("127.0.0.1", port)
	return u.String()
}

// startInNetns runs the test binary as corral with args in namespace ns
// (its network namespace only: nsenter --net, not ip netns exec, which
// would give it a mount namespace of its own, with a fresh /sys without
// the cgroup hierarchy, and hide the node's mounts from its restarted
// self and from the test's cleanup), and returns once a line of its log
// says ready.
func startInNetns(t *testing.T, ns, ready string, env []string, args ...string) *server {
	t.Helper()
	nsenter, _ := lookPath("nsenter")
	// nsenter execs the program without forking (no --fork, no pid
	// namespace): the process is corral itself, to kill and to measure.
	cmd := exec.Command(nsenter, append([]string{"--net=/run/netns/" + ns, "--", os.Args[0]}, args...)...)
	cmd.Env = append(append(os.Environ(), "CORRAL_TEST_AS_MAIN=1"), env...)
	return startProcess(t, cmd, fmt.Sprintf("corral %s in %s never said %q", strings.Join(args, " "), ns, ready),
		func(line string) bool { return strings.Contains(line, ready) })
}

// startNodeIn starts a sandbox node in ns that dials control at the URL,
// with env added.
func startNodeIn(t *testing.T, ns, data, control, token, name string, env ...string) *server {
	t.Helper()
	args := []string{"serve", "--role", "sandbox", "--control", control, "--data", data, "--node-name", name}
	if tools := toolstest.Dir(); tools != "" {
		args = append(args, "--tools-dir", tools)
	}
	return startInNetns(t, ns, "connected to control", append([]string{"CORRAL_JOIN=" + token}, env...), args...)
}

// joinToken makes a one-time join token on control's data directory: the
// command only opens the database, so it runs here while control serves.
func joinToken(t *testing.T, controlData string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"node", "token", "--data", controlData}, nil, &out, &errOut, noenv); code != 0 {
		t.Fatalf("node token: %d %s", code, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// procStatus reads a field of /proc/pid/status in bytes (its kB figures).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status %s: %v", pid, line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// sleeping lists the processes whose command line is exactly `sleep arg`:
// a tool command runs `(sleep arg; true) 2>/dev/null` to wait for the test,
// not for a clock, and the test releases it by killing the sleep (the
// subshell keeps the shell's "Killed" out of the output).
func sleeping(arg string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && string(b) == "sleep\x00"+arg+"\x00" {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// waitSleep is the command line that waits for release(arg).
func waitSleep(arg string) string { return "(sleep " + arg + "; true) 2>/dev/null" }

// release kills the sleeps of arg and says how many there were.
func release(arg string) int {
	n := 0
	for _, pid := range sleeping(arg) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

type nodeAnswer struct{ ID, Name, Status string }

func nodesByName(c *httpClient) map[string]nodeAnswer {
	var nodes struct{ Items []nodeAnswer }
	c.do("GET", "/nodes", nil, http.StatusOK, &nodes)
	m := map[string]nodeAnswer{}
	for _, n := range nodes.Items {
		m[n.Name] = n
	}
	return m
}

func waitRun(t *testing.T, c *httpClient, runID string) runAnswer {
	t.Helper()
	var r runAnswer
	poll.Until(t, "run "+runID+" to end", func() bool {
		c.do("GET", "/runs/"+runID, nil, http.StatusOK, &r)
		return r.Status != "admitted" && r.Status != "running"
	})
	return r
}

type traceEvent struct {
	Type string
	Data map[string]any
}

func toolResults(c *httpClient, runID string) []map[string]any {
	var tr struct{ Items []traceEvent }
	c.do("GET", "/runs/"+runID+"/trace", nil, http.StatusOK, &tr)
	var found []map[string]any
	for _, e := range tr.Items {
		if e.Type == "tool_result" {
			found = append(found, e.Data)
		}
	}
	return found
}

// notShown parses capText's marker: what was kept before it and how many
// bytes it says were left out.
var notShown = regexp.MustCompile(`^(x*)\n\[\.\.\. (\d+) more bytes not shown\]$`)

// secretScan is what must be on no node's disk.
type secretScan struct {
	needles  map[string][]byte         // what it is → its bytes
	patterns map[string]*regexp.Regexp // kinds of secret, whoever's
	names    []string                  // file names (a database, control's key)
}

// scan walks dir (into mounted staged trees too) and reports every file
// holding a needle or a pattern, or named like a secret file; it returns
// the files it read (how much of each: data, not holes) and the bytes.
func (s secretScan) scan(t *testing.T, dir string) (files []string, bytesRead int64) {
	t.Helper()
	for what, n := range s.needles {
		if len(n) > scanOverlap {
			t.Fatalf("%s is longer than the scan's overlap", what)
		}
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Errorf("scan %s: %v", path, err)
			return nil
		}
		for _, name := range s.names {
			if d.Name() == name || strings.HasPrefix(d.Name(), name+"-") { // corral.db-wal, -shm
				t.Errorf("the node holds %s", path)
			}
		}
		if !d.Type().IsRegular() {
			return nil
		}
		n, err := s.scanFile(t, path)
		if err != nil {
			t.Errorf("scan %s: %v", path, err)
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, fmt.Sprintf("%s (%d of %d bytes)", rel, n, fileSize(d)))
		bytesRead += n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, bytesRead
}

func fileSize(d fs.DirEntry) int64 {
	if info, err := d.Info(); err == nil {
		return info.Size()
	}
	return -1
}

// scanOverlap is longer than any needle and any pattern's match.
const scanOverlap = 256

// scanFile reads the data of one file, skipping its holes (a staged
// tree's disk is a sparse image of a gigabyte, mostly never written).
func (s secretScan) scanFile(t *testing.T, path string) (int64, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var read int64
	buf := make([]byte, 1<<20+scanOverlap)
	for off := int64(0); ; {
		start, err := f.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) { // no data past off
			return read, nil
		} else if err != nil {
			return read, err
		}
		end, err := f.Seek(start, unix.SEEK_HOLE)
		if err != nil {
			return read, err
		}
		r := io.NewSectionReader(f, start, end-start)
		kept, at := 0, start // at: the file offset of buf[kept]
		for {
			n, err := io.ReadFull(r, buf[kept:])
			window := buf[:kept+n]
			read += int64(n)
			for what, needle := range s.needles {
				if i := bytes.Index(window, needle); i >= 0 {
					t.Errorf("%s holds %s at byte %d", path, what, at-int64(kept)+int64(i))
				}
			}
			for what, re := range s.patterns {
				if loc := re.FindIndex(window); loc != nil {
					t.Errorf("%s holds %s at byte %d: %.12q…", path, what, at-int64(kept)+int64(loc[0]), window[loc[0]:loc[1]])
				}
			}
			at += int64(n)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			} else if err != nil {
				return read, err
			}
			// Keep the window's tail: a secret across the cut is found
			// whole next time (and one wholly inside it, twice at most).
			kept = copy(buf, window[len(window)-scanOverlap:])
		}
		off = end
	}
}

// TestSplitRolesAcrossNamespaces: control and two sandbox nodes as three
// processes in three network namespaces, the relay over veth pairs, as on
// three machines. The nodes join and are ready; four agents are placed on
// both nodes and their runs complete; node 1 is killed mid-run and comes
// back within the grace, and the run completes with its whole output;
// a terminal reaches a shell on node 2 and a real Codex CLI's model
// calls cross from a node to control's gateway; node 2's link is
// throttled and a command writes 64 MiB: the run
// completes, the output's size is recorded right and neither side's
// memory grows with it; and afterwards neither node's disk holds a secret.
func TestSplitRolesAcrossNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: skipped under -short; make test runs it")
	}
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "runs need the sandbox: %v", err)
	}
	lab := newNetLab(t)
	top := t
	start := time.Now()
	phase := func(t *testing.T, name string) func() {
		began := time.Now()
		return func() { t.Logf("%s: %.1fs", name, time.Since(began).Seconds()) }
	}

	// A message "run: CMD" makes the model run CMD in a shell once, then
	// say it is done: each phase says what its agents run.
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		if last := r.Last(); last.Role == "user" {
			if cmd, ok := strings.CutPrefix(last.Content, "run: "); ok {
				return modeltest.Calls(modeltest.ShellCall("c1", cmd))
			}
		}
		return modeltest.Text("done")
	})
	t.Cleanup(model.Close)
	apiKey := "sk-planted-" + randomHex(t)
	controlData, n1Data, n2Data := reachableTempDir(t), reachableTempDir(t), reachableTempDir(t)
	const gitUser = "pusher"
	gitSecret := "ghp_planted_" + randomHex(t)
	git := gittest.New(t, gittest.Options{User: gitUser, Password: gitSecret})
	gitURL := lab.gitOnNodes(t, git)
	nodeEnv := "CORRAL_GIT_CA_FILE=" + git.CAFile
	// The git server is on each node's loopback: a range clones may reach
	// only because the operator says so.
	const allowLoopback = "CORRAL_EGRESS_ALLOW_PRIVATE=127.0.0.1"

	done := phase(t, "setup: namespaces, control, two nodes joined")
	ctl := startInNetns(t, lab.ctl, "corral serving", []string{
		"CORRAL_MODEL_BASE_URL=" + lab.serveInRoot(t, model.URL()), "CORRAL_MODEL=scripted", "CORRAL_MODEL_API_KEY=" + apiKey,
	}, "serve", "--role", "control", "--addr", "0.0.0.0:"+controlPort, "--data", controlData)
	ctl.base = "http://" + net.JoinHostPort(lab.ctlIP, controlPort)
	tokens := []string{joinToken(t, controlData), joinToken(t, controlData)}
	nodes := map[string]*server{
		"n1": startNodeIn(t, lab.n1, n1Data, "http://"+net.JoinHostPort(ctlToN1, controlPort), tokens[0], "n1", nodeEnv, allowLoopback),
		"n2": startNodeIn(t, lab.n2, n2Data, "http://"+net.JoinHostPort(ctlToN2, controlPort), tokens[1], "n2", nodeEnv, allowLoopback),
	}
	data := map[string]string{"n1": n1Data, "n2": n2Data}
	admin, firstAgent := signedIn(t, ctl) // the first account: an admin
	as := func(t *testing.T) *httpClient { c := *admin; c.t = t; return &c }
	logs := func() string {
		return fmt.Sprintf("control:\n%s\nnode 1:\n%s\nnode 2:\n%s", ctl.Log(), nodes["n1"].Log(), nodes["n2"].Log())
	}
	admin.nodesReady(2)
	if got := nodesByName(admin); len(got) != 2 || got["n1"].Status != "ready" || got["n2"].Status != "ready" {
		t.Fatalf("nodes = %+v, want n1 and n2 ready", got)
	}
	done()

	// Which node holds each agent's workspace, by the nodes' disks.
	placed := map[string][]string{} // node → agent ids
	nodeOf := func(t *testing.T, agentID string) string {
		t.Helper()
		var on []string
		for name, dir := range data {
			if _, err := os.Stat(filepath.Join(dir, "workspaces", agentID)); err == nil {
				on = append(on, name)
			}
		}
		if len(on) != 1 {
			t.Fatalf("agent %s has its workspace on %v, want one node", agentID, on)
		}
		return on[0]
	}
	pid := os.Getpid()

	ok := t.Run("runs placed on both nodes", func(t *testing.T) {
		defer phase(t, "runs placed on both nodes")()
		c := as(t)
		agents := []string{firstAgent}
		for i := 2; i <= 4; i++ {
			var a struct{ ID string }
			c.do("POST", "/agents", map[string]string{"name": fmt.Sprintf("worker %d", i)}, http.StatusCreated, &a)
			agents = append(agents, a.ID)
		}
		// Each command waits in the sandbox until the test releases it, so
		// the four runs are under way at once: an agent is placed on the
		// node with the fewest sessions, and sequential runs would all go
		// to the first node.
		runs := make([]string, len(agents))
		for i, id := range agents {
			sleep := fmt.Sprintf("%d.%d", 3601+i, pid)
			var posted struct{ Run runAnswer }
			c.do("POST", "/agents/"+id+"/messages", map[string]string{
				"content": fmt.Sprintf("run: echo made-%d | tee made.txt; %s; echo released-%d", i, waitSleep(sleep), i),
			}, http.StatusAccepted, &posted)
			runs[i] = posted.Run.ID
			poll.Until(t, fmt.Sprintf("agent %d's command to run", i), func() bool { return len(sleeping(sleep)) > 0 })
		}
		for i := range agents {
			if n := release(fmt.Sprintf("%d.%d", 3601+i, pid)); n != 1 {
				t.Fatalf("released %d sleeps of agent %d, want 1", n, i)
			}
		}
		for i, id := range agents {
			r := waitRun(t, c, runs[i])
			results := toolResults(c, runs[i])
			if r.Status != "completed" || r.ChangeSetID == nil || len(results) != 1 {
				t.Fatalf("agent %d's run = %+v, tool results %v\n%s", i, r, results, logs())
			}
			if out, _ := results[0]["output"].(string); out != fmt.Sprintf("made-%d\nreleased-%d\n", i, i) {
				t.Errorf("agent %d's command wrote %q", i, out)
			}
			var cs struct{ Entries []struct{ Path string } }
			c.do("GET", "/changes/"+*r.ChangeSetID, nil, http.StatusOK, &cs)
			if len(cs.Entries) != 1 || cs.Entries[0].Path != "made.txt" {
				t.Errorf("agent %d's change set = %+v, want made.txt", i, cs)
			}
			on := nodeOf(t, id)
			placed[on] = append(placed[on], id)
		}
		t.Logf("placement: n1 %v, n2 %v", placed["n1"], placed["n2"])
		if len(placed["n1"]) == 0 || len(placed["n2"]) == 0 {
			t.Fatalf("the agents were placed on n1 %v and n2 %v, want some on each", placed["n1"], placed["n2"])
		}
	})
	if !ok {
		t.FailNow() // the phases after need agents on both nodes
	}

	t.Run("node 1 killed mid-run and back within the grace", func(t *testing.T) {
		defer phase(t, "node 1 killed mid-run and back within the grace")()
		c := as(t)
		agentID := placed["n1"][0]
		sleep := fmt.Sprintf("3700.%d", pid)
		var posted struct{ Run runAnswer }
		c.do("POST", "/agents/"+agentID+"/messages", map[string]string{
			"content": "run: echo before; " + waitSleep(sleep) + "; echo after > late.txt; echo slept",
		}, http.StatusAccepted, &posted)
		poll.Until(t, "the command to run on node 1", func() bool { return len(sleeping(sleep)) > 0 })

		crash(nodes["n1"])
		poll.Until(t, "control to see node 1 lost", func() bool { return nodesByName(c)["n1"].Status == "lost" })
		if st := nodesByName(c)["n2"].Status; st != "ready" {
			t.Fatalf("node 2 is %s while node 1 is away, want ready", st)
		}
		// The command goes on and ends while its node is away: the session
		// is the supervisor's, and what it writes waits in its log.
		if n := release(sleep); n != 1 {
			t.Fatalf("released %d sleeps, want 1: the command died with its node", n)
		}
		// On the whole test's t: a subtest's would end the node with it.
		nodes["n1"] = startNodeIn(top, lab.n1, n1Data, "http://"+net.JoinHostPort(ctlToN1, controlPort), tokens[0], "n1", nodeEnv, allowLoopback) // the token is spent: the node keeps its credential
		poll.Until(t, "control to see node 1 ready again", func() bool { return nodesByName(c)["n1"].Status == "ready" })
		r := waitRun(t, c, posted.Run.ID)
		if r.Status != "completed" || r.ChangeSetID == nil {
			t.Fatalf("run = %+v\n%s", r, logs())
		}
		if results := toolResults(c, posted.Run.ID); len(results) != 1 || results[0]["output"] != "before\nslept\n" {
			t.Fatalf("tool results = %v, want the command's whole output", results)
		}
		var cs struct{ Entries []struct{ Path string } }
		c.do("GET", "/changes/"+*r.ChangeSetID, nil, http.StatusOK, &cs)
		if len(cs.Entries) != 1 || cs.Entries[0].Path != "late.txt" {
			t.Fatalf("change set = %+v, want late.txt", cs)
		}
	})

	t.Run("a terminal and an agent CLI across the namespaces", func(t *testing.T) {
		defer phase(t, "a terminal and an agent CLI across the namespaces")()
		c := as(t)
		// The test's websocket ends on control, in its namespace; the shell
		// runs on node 2, one veth further.
		terminalOnNode(t, c, placed["n2"][0])
		// Codex on whichever node it is placed: its model calls cross the
		// relay to control's gateway, and control's to the model here.
		cliOnNode(t, c, model, "say done", "done", logs)
	})

	t.Run("a clone and a push with the owner's credential", func(t *testing.T) {
		defer phase(t, "a clone and a push with the owner's credential")()
		c := as(t)
		u, _ := url.Parse(gitURL)
		var cred struct{ ID string }
		c.do("POST", "/credentials", map[string]any{"name": "git", "host": u.Host, "username": gitUser, "secret": gitSecret, "repositories": []string{gitURL}}, http.StatusCreated, &cred)
		var a struct{ ID string }
		c.do("POST", "/agents", map[string]string{"name": "repo"}, http.StatusCreated, &a)
		c.do("PUT", "/agents/"+a.ID+"/repository", map[string]string{"url": gitURL, "credential_id": cred.ID}, http.StatusAccepted, nil)
		var repo struct{ Status, Error string }
		poll.Until(t, "the clone on a node", func() bool {
			c.do("GET", "/agents/"+a.ID+"/repository", nil, http.StatusOK, &repo)
			return repo.Status != "cloning"
		})
		if repo.Status != "ready" {
			t.Fatalf("clone = %+v\n%s", repo, logs())
		}
		var posted struct{ Run runAnswer }
		c.do("POST", "/agents/"+a.ID+"/messages", map[string]string{"content": "run: echo from-a-node > pushed.txt"}, http.StatusAccepted, &posted)
		r := waitRun(t, c, posted.Run.ID)
		if r.Status != "completed" || r.ChangeSetID == nil {
			t.Fatalf("run = %+v\n%s", r, logs())
		}
		c.do("POST", "/changes/"+*r.ChangeSetID+"/approve", nil, http.StatusOK, nil)
		var pushed struct {
			Head    string
			Commits int
		}
		c.do("POST", "/agents/"+a.ID+"/repository/push", map[string]string{"branch": "corral/netns"}, http.StatusOK, &pushed)
		if pushed.Commits != 1 || git.Head(t, "corral/netns") != pushed.Head || git.Show(t, "corral/netns", "pushed.txt") != "from-a-node\n" {
			t.Fatalf("push = %+v; the server's branch is at %s", pushed, git.Head(t, "corral/netns"))
		}
		git.Fsck(t)
		t.Logf("cloned, committed and pushed on %s", nodeOf(t, a.ID))
	})

	t.Run("node 1 drained and its agents moved to node 2", func(t *testing.T) {
		defer phase(t, "node 1 drained and its agents moved to node 2")()
		c := as(t)
		byName := nodesByName(c)
		n1, n2 := byName["n1"].ID, byName["n2"].ID
		c.do("POST", "/nodes/"+n1+"/drain", nil, http.StatusNoContent, nil)
		defer c.do("DELETE", "/nodes/"+n1+"/drain", nil, http.StatusNoContent, nil)
		ents, err := os.ReadDir(filepath.Join(n1Data, "workspaces"))
		if err != nil || len(ents) == 0 {
			t.Fatalf("node 1 holds no workspace to move (%v)", err)
		}
		for _, e := range ents {
			agentID := e.Name()
			made, _ := os.ReadFile(filepath.Join(n1Data, "workspaces", agentID, "made.txt"))
			// A change set waiting for review keeps the agent where its
			// staged tree is: decided first, the agent moves.
			var changes struct{ Items []struct{ ID, Status string } }
			c.do("GET", "/agents/"+agentID+"/changes", nil, http.StatusOK, &changes)
			pending := 0
			for _, cs := range changes.Items {
				if cs.Status == "pending" {
					if pending++; pending == 1 {
						c.do("POST", "/nodes/"+n2+"/agents", map[string]string{"agent_id": agentID}, http.StatusConflict, nil)
					}
					c.do("POST", "/changes/"+cs.ID+"/approve", nil, http.StatusOK, nil)
				}
			}
			if len(made) == 0 {
				made, _ = os.ReadFile(filepath.Join(n1Data, "workspaces", agentID, "made.txt"))
			}
			c.do("POST", "/nodes/"+n2+"/agents", map[string]string{"agent_id": agentID}, http.StatusNoContent, nil)
			if _, err := os.Stat(filepath.Join(n1Data, "workspaces", agentID)); !os.IsNotExist(err) {
				t.Errorf("agent %s's workspace is still on node 1 after its move (%v)", agentID, err)
			}
			got, err := os.ReadFile(filepath.Join(n2Data, "workspaces", agentID, "made.txt"))
			if len(made) > 0 && (err != nil || !bytes.Equal(got, made)) {
				t.Errorf("agent %s's made.txt on node 2: %q, %v; want %q", agentID, got, err, made)
			}
			var posted struct{ Run runAnswer }
			c.do("POST", "/agents/"+agentID+"/messages", map[string]string{"content": "run: ls"}, http.StatusAccepted, &posted)
			r := waitRun(t, c, posted.Run.ID)
			var ran struct{ Node string }
			c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &ran)
			if r.Status != "completed" || ran.Node != n2 {
				t.Fatalf("agent %s's run after its move = %+v on %s, want completed on node 2\n%s", agentID, r, ran.Node, logs())
			}
			if r.ChangeSetID != nil {
				c.do("POST", "/changes/"+*r.ChangeSetID+"/reject", nil, http.StatusOK, nil)
			}
		}
		if left, _ := os.ReadDir(filepath.Join(n1Data, "workspaces")); len(left) != 0 {
			t.Fatalf("node 1 still holds %d workspaces after its agents moved", len(left))
		}
		t.Logf("moved %d agents from node 1 to node 2", len(ents))
	})

	t.Run("64 MiB of output over a throttled link", func(t *testing.T) {
		defer phase(t, "64 MiB of output over a throttled link")()
		c := as(t)
		const size = 64 << 20
		agentID := placed["n2"][0]
		c.do("PATCH", "/agents/"+agentID, map[string]any{"limits": map[string]int64{"output_bytes": 2 * size}}, http.StatusOK, nil)
		// 32 Mbit/s: 64 MiB take 17 s at the least. (2 Mbit/s would take
		// 4.5 min, past any wait of this test; the link is still 1/100 of
		// the veth's own speed and its queue is held to 400 ms.)
		lab.throttle(t, lab.n2, "to-ctl", "32mbit")
		ctlPID, nodePID := ctl.cmd.Process.Pid, nodes["n2"].cmd.Process.Pid
		before := map[string]int64{"control": procStatus(t, ctlPID, "VmHWM"), "node 2": procStatus(t, nodePID, "VmHWM")}
		began := time.Now()
		var posted struct{ Run runAnswer }
		c.do("POST", "/agents/"+agentID+"/messages", map[string]string{
			"content": fmt.Sprintf(`run: head -c %d /dev/zero | tr '\0' x`, size),
		}, http.StatusAccepted, &posted)
		r := waitRun(t, c, posted.Run.ID)
		took := time.Since(began)
		if r.Status != "completed" {
			t.Fatalf("run = %+v\n%s", r, logs())
		}
		// The trace keeps the output's head, marked as cut.
		results := toolResults(c, posted.Run.ID)
		if len(results) != 1 {
			t.Fatalf("tool results = %v", results)
		}
		out, _ := results[0]["output"].(string)
		if m := notShown.FindStringSubmatch(out); m == nil || len(m[1]) == 0 || results[0]["exit_code"] != 0.0 ||
			results[0]["truncated"] != true || results[0]["violation"] != "" {
			t.Fatalf("the trace's tool result = exit %v, violation %v, truncated %v, output %.200q…",
				results[0]["exit_code"], results[0]["violation"], results[0]["truncated"], out)
		}
		// What the model read: the output's head and how many bytes more
		// there were, together what the command wrote. (The trace's own
		// marker counts from the model's copy, not from the command's.)
		var told string
		for _, req := range model.Requests() {
			if last := req.Last(); last.Role == "tool" && strings.Contains(last.Content, "more bytes not shown") {
				told = last.Content
			}
		}
		var tr struct {
			ExitCode int    `json:"exit_code"`
			Output   string `json:"output"`
		}
		if err := json.Unmarshal([]byte(told), &tr); err != nil {
			t.Fatalf("the model was told %.200q…: %v", told, err)
		}
		if m := notShown.FindStringSubmatch(tr.Output); m == nil {
			t.Errorf("the model was told %.200q…", tr.Output)
		} else if left, _ := strconv.Atoi(m[2]); len(m[1])+left != size || tr.ExitCode != 0 {
			t.Errorf("the model was told exit %d and %d + %d bytes, want 0 and %d", tr.ExitCode, len(m[1]), left, size)
		}
		// Peak memory: VmHWM is the process's high-water mark of resident
		// memory since it started. Either side holding the output would
		// add its 64 MiB (a bytes.Buffer growing to it, twice that).
		for name, pid := range map[string]int{"control": ctlPID, "node 2": nodePID} {
			peak := procStatus(t, pid, "VmHWM")
			t.Logf("%s: VmHWM %.1f MiB before the flood, %.1f MiB after (VmRSS now %.1f MiB)", name,
				float64(before[name])/(1<<20), float64(peak)/(1<<20), float64(procStatus(t, pid, "VmRSS"))/(1<<20))
			if grew := peak - before[name]; grew > size/2 {
				t.Errorf("%s's peak memory grew %.1f MiB with 64 MiB of output: it holds the output", name, float64(grew)/(1<<20))
			}
		}
		t.Logf("64 MiB crossed the throttled link in %.1fs (%.1f Mbit/s)", took.Seconds(), float64(size*8)/took.Seconds()/1e6)
	})

	t.Run("no secret at rest on the nodes", func(t *testing.T) {
		defer phase(t, "no secret at rest on the nodes")()
		c := as(t)
		sawKey := false
		for _, req := range model.Requests() {
			sawKey = sawKey || req.Authorization == "Bearer "+apiKey
		}
		if !sawKey {
			t.Fatal("the provider never got the planted key: the scan would prove nothing")
		}
		key, err := os.ReadFile(filepath.Join(controlData, "secret.key"))
		if err != nil || len(key) != 32 {
			t.Fatalf("control's secret.key: %v (%d bytes, want 32)", err, len(key))
		}
		scan := secretScan{
			needles: map[string][]byte{
				"the provider key":        []byte(apiKey),
				"control's secret key":    key,
				"control's key in base64": []byte(base64.StdEncoding.EncodeToString(key)[:42]), // the part that does not depend on padding
				"control's key in hex":    []byte(hex.EncodeToString(key)),
				"node 1's join token":     []byte(tokens[0]),
				"node 2's join token":     []byte(tokens[1]),
				"the admin's password":    []byte("correct horse battery"),
				"a SQLite database":       []byte("SQLite format 3\x00"),
				"an argon2id hash prefix": []byte("$argon2id$"),
				"the git credential":      []byte(gitSecret),
				"git's basic auth token":  []byte(base64.StdEncoding.EncodeToString([]byte(gitUser + ":" + gitSecret))),
			},
			patterns: map[string]*regexp.Regexp{"a run token": regexp.MustCompile(`crt_[A-Za-z0-9_-]{43}`)},
			names:    []string{"corral.db", "secret.key"},
		}
		u, _ := url.Parse(c.base)
		for _, k := range c.c.Jar.Cookies(u) {
			scan.needles["the admin's "+k.Name+" cookie"] = []byte(k.Value)
		}
		for _, name := range []string{"n1", "n2"} {
			files, n := scan.scan(t, data[name])
			t.Logf("%s: scanned %d files, %.1f MiB of data, for %d strings and %d patterns:\n%s", name, len(files), float64(n)/(1<<20),
				len(scan.needles), len(scan.patterns), strings.Join(files, "\n"))
			if len(files) == 0 {
				t.Errorf("%s: nothing to scan in %s", name, data[name])
			}
		}
	})
	t.Logf("the whole test: %.1fs", time.Since(start).Seconds())
}

func randomHex(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
