package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/netguard"
	"corral/internal/poll"
	"corral/internal/sandbox"
)

// The flood: floodSources each hold up to floodPerSource idle connections,
// each source in a child process of its own (the test binary again, as
// TestFloodChild), so no one process needs more descriptors than its limit
// allows: here soft = hard = 20000, and 20000 connections plus the test's
// own would not fit in one. Several source addresses spread the ephemeral
// ports, as a real flood from a few hosts would.
var floodSources = []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}

const (
	floodPerSource = 5000
	// slowlorisConns trickle headers from an address of their own, under
	// the per-address cap, as a careful attacker would.
	slowlorisConns = 40
	slowlorisFrom  = "127.0.0.6"
	// floodHold bounds how long a child holds its connections if the test
	// never tells it to let go.
	floodHold = 90 * time.Second
)

// TestFlood runs the real server under a flood of idle connections and a
// few slowloris ones, all from loopback, and checks that a signed-in user
// from another address is still answered, that a run started meanwhile
// completes with its change set, that the server says it refused the
// flood, and that it still answers after.
func TestFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("the flood opens 20,000 connections")
	}
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(t, "the run under the flood needs the sandbox: %v", err)
	}
	limit, err := netguard.RaiseFileLimit()
	if err != nil {
		t.Skipf("no descriptor limit to size the flood by: %v", err)
	}
	perSource := min(floodPerSource, int(limit)-256)
	if perSource < 1000 {
		t.Skipf("a descriptor limit of %d is too small for a flood worth the name", limit)
	}

	// The run's last model reply waits for the flood: the run then ends,
	// stages its work and records its end under it.
	finish := make(chan struct{})
	lastCall := make(chan struct{}, 1)
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		if r.Last().Role == "user" {
			return modeltest.Calls(modeltest.ShellCall("c1", "echo written under a flood > flood.txt"))
		}
		select {
		case lastCall <- struct{}{}:
		default: // a retried call: the test has heard already
		}
		return modeltest.Reply{Content: "done", Block: finish}
	})
	defer model.Close()
	srv := startServer(t, reachableTempDir(t), "CORRAL_MODEL_BASE_URL="+model.URL(), "CORRAL_MODEL=scripted")
	target := strings.TrimPrefix(srv.base, "http://")

	// The user signs in before the flood. Each of their requests opens a
	// connection of its own, as a newcomer's would: a connection kept
	// alive from before the flood would prove nothing. The client's
	// timeout is a liveness bound, not a timing assertion.
	jar, _ := cookiejar.New(nil)
	user := &httpClient{t: t, base: srv.base, c: &http.Client{Jar: jar, Timeout: time.Minute,
		Transport: &http.Transport{DisableKeepAlives: true}}}
	user.do("POST", "/auth/signup", map[string]string{"email": "a@example.com", "name": "A", "password": "correct horse battery"}, http.StatusCreated, nil)
	var agent struct{ ID string }
	user.do("POST", "/agents", map[string]string{"name": "worker"}, http.StatusCreated, &agent)
	var posted struct{ Run runAnswer }
	user.do("POST", "/agents/"+agent.ID+"/messages", map[string]string{"content": "write something"}, http.StatusAccepted, &posted)
	select {
	case <-lastCall:
	case <-time.After(2 * time.Minute): // liveness
		t.Fatalf("the run never asked the model for its last reply:\n%s", srv.Log())
	}

	// The slowloris connections start first, so they are open for the
	// whole flood.
	var cut atomic.Int64
	var slow sync.WaitGroup
	stopSlow := make(chan struct{})
	defer close(stopSlow)
	for range slowlorisConns {
		slow.Add(1)
		go func() {
			defer slow.Done()
			if slowloris(target, stopSlow) {
				cut.Add(1)
			}
		}()
	}

	// The flood.
	var children []*floodChild
	for _, from := range floodSources {
		children = append(children, startFloodChild(t, target, from, perSource))
	}
	connected := 0
	for _, c := range children {
		connected += c.waitDialled(t)
	}
	t.Logf("the flood's first round: %d connections from %d addresses (%d dials each)", connected, len(floodSources), perSource)

	// While the flood holds its connections: the user is answered, and
	// the run ends completed with its work recorded.
	user.do("GET", "/me", nil, http.StatusOK, nil)
	user.do("GET", "/agents", nil, http.StatusOK, nil)
	close(finish)
	var run runAnswer
	poll.Until(t, "the run to end", func() bool {
		user.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &run)
		return run.Status != "admitted" && run.Status != "running"
	})
	if run.Status != "completed" || run.ChangeSetID == nil {
		t.Fatalf("the run under the flood ended %+v, want completed with a change set\n%s", run, srv.Log())
	}
	var cs struct{ Entries []struct{ Path string } }
	user.do("GET", "/changes/"+*run.ChangeSetID, nil, http.StatusOK, &cs)
	if len(cs.Entries) != 1 || cs.Entries[0].Path != "flood.txt" {
		t.Fatalf("the run's change set = %+v, want flood.txt", cs)
	}

	// Every slowloris connection is cut off by the header timeout.
	slow.Wait()
	if n := cut.Load(); n != slowlorisConns {
		t.Fatalf("%d of %d slowloris connections were cut off by the server", n, slowlorisConns)
	}

	// The flood ends; the server said it refused it, and still answers.
	for _, c := range children {
		c.stop(t)
	}
	refusals := regexp.MustCompile(`msg="connections refused".* refused_total=(\d+) over_max_conns=(\d+) over_max_conns_per_addr=(\d+)`)
	var total, perAddr int
	poll.Until(t, "the server to log the refusals", func() bool {
		for _, m := range refusals.FindAllStringSubmatch(srv.Log(), -1) {
			total, _ = strconv.Atoi(m[1])
			perAddr, _ = strconv.Atoi(m[3])
		}
		// Up to the cap of each address is admitted, and more as the
		// admitted idle ones are cut off: at least half is refused.
		return total >= connected/2
	})
	if perAddr == 0 {
		t.Fatalf("the refusals were not for the per-address cap:\n%s", srv.Log())
	}
	t.Logf("the server refused %d connections (%d over the per-address cap)", total, perAddr)
	user.do("GET", "/me", nil, http.StatusOK, nil)
}

// slowloris opens a connection, sends the start of a request and then one
// more header byte every 200ms, and reports whether the server cut it off
// (before stop, or a liveness bound of two minutes).
func slowloris(target string, stop <-chan struct{}) bool {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(slowlorisFrom)}, Timeout: 30 * time.Second}
	c, err := d.Dial("tcp", target)
	if err != nil {
		return false
	}
	defer c.Close()
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c)
		close(ended)
	}()
	io.WriteString(c, "GET /api/me HTTP/1.1\r\nHost: corral\r\n")
	liveness := time.After(2 * time.Minute)
	drip := "X-Slow: drip\r\n"
	for i := 0; ; i++ {
		select {
		case <-ended:
			return true
		case <-stop:
			return false
		case <-liveness:
			return false
		case <-time.After(200 * time.Millisecond):
			c.Write([]byte{drip[i%len(drip)]})
		}
	}
}

// floodChild is a child process holding a share of the flood.
type floodChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startFloodChild(t *testing.T, target, from string, n int) *floodChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFloodChild$")
	cmd.Env = append(os.Environ(), "CORRAL_FLOOD_TARGET="+target, "CORRAL_FLOOD_FROM="+from, "CORRAL_FLOOD_CONNS="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &floodChild{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
}

var dialledLine = regexp.MustCompile(`^flood from=\S+ connected=(\d+) reset=(\d+) failed=(\d+)$`)

// waitDialled waits for the child to say it has dialled every connection,
// and returns how many it holds.
func (c *floodChild) waitDialled(t *testing.T) int {
	t.Helper()
	for c.out.Scan() {
		if m := dialledLine.FindStringSubmatch(c.out.Text()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	t.Fatal("a flood child ended before it had dialled")
	return 0
}

// stop tells the child to let go of its connections and waits for it.
func (c *floodChild) stop(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	for c.out.Scan() { // to the end, as Wait requires
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("flood child: %v", err)
	}
}

// TestFloodChild is one source of TestFlood's flood, in a process of its
// own: it keeps CORRAL_FLOOD_CONNS connections from CORRAL_FLOOD_FROM to
// CORRAL_FLOOD_TARGET open, as an attacker would: it never writes or reads on
// them, and each one the server ends it opens again: at once if the server
// had held it (cut off by a timeout), after a pause if it was refused. It says on stdout how the first
// round of dials went, and stops when its stdin closes or floodHold passes.
func TestFloodChild(t *testing.T) {
	target, from := os.Getenv("CORRAL_FLOOD_TARGET"), os.Getenv("CORRAL_FLOOD_FROM")
	n, _ := strconv.Atoi(os.Getenv("CORRAL_FLOOD_CONNS"))
	if target == "" || from == "" || n == 0 {
		t.Skip("a child of TestFlood")
	}
	if _, err := netguard.RaiseFileLimit(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	go func() {
		time.Sleep(floodHold)
		os.Exit(0) // the parent is gone or stuck: a flood never outlives its bound
	}()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	dialing := make(chan struct{}, 64) // dials in flight, so the server's accept queue is not what refuses
	var (
		connected, reset, failed atomic.Int64
		firstRound, all          sync.WaitGroup
	)
	firstRound.Add(n)
	all.Add(n)
	for i := range n {
		go func() {
			defer all.Done()
			for round := 0; ; round++ {
				dialing <- struct{}{}
				c, err := d.Dial("tcp", target)
				<-dialing
				if round == 0 {
					switch {
					case err == nil:
						connected.Add(1)
					case errors.Is(err, syscall.ECONNRESET):
						reset.Add(1) // refused before connect returned
					default:
						failed.Add(1)
					}
					firstRound.Done()
				}
				held := false
				if err == nil {
					ended := make(chan struct{})
					go func() {
						c.Read(make([]byte, 1)) // until the server ends it
						close(ended)
					}()
					select {
					case <-ended:
					case <-time.After(time.Second):
						held = true // admitted: hold it for as long as the server lets us
						select {
						case <-ended:
						case <-stop:
						}
					case <-stop:
					}
					c.Close()
				}
				// A connection the server held is taken again at once, to
				// keep what was won; a refused one after 1.5 to 2.5 s,
				// so the test's refused dials do not eat its machine.
				pause := 1500*time.Millisecond + time.Duration(i%1000)*time.Millisecond
				if held {
					pause = 0
				}
				select {
				case <-stop:
					return
				case <-time.After(pause):
				}
			}
		}()
	}
	firstRound.Wait()
	fmt.Printf("flood from=%s connected=%d reset=%d failed=%d\n", from, connected.Load(), reset.Load(), failed.Load())
	all.Wait()
}
