package api_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/modeltest"
)

// BenchmarkDelegationTree runs a tree of one root and 16 children, four at
// a time (four turns of four parallel delegate calls), each child a real
// run in its own sandbox that runs one command and answers, against the
// fake provider; and, in the same iteration, one such run on its own as
// the baseline. It reports the tree's wall time, the single run's, their
// ratio, the cost of one hop (the tree's wall time spread over its 16
// children at four at a time, i.e. tree÷4 batches) against the single
// run, and the peak RSS of the server process and of all sessions'
// processes together while the tree runs.
func BenchmarkDelegationTree(b *testing.B) {
	const children, wide = 16, 4
	e := newEnv(b, envOptions{caps: corral.TreeCaps{Fanout: children, Concurrency: wide}})
	alice := e.signup("alice@example.com", "Alice")
	root := alice.roleAgent("root", "root")
	var helpers []string
	for i := range children {
		helpers = append(helpers, alice.roleAgent(fmt.Sprintf("helper %d", i), "helper"))
	}
	single := alice.roleAgent("single", "helper")
	e.answer(roles(map[string]modeltest.Script{
		"root": func(req modeltest.Request) modeltest.Reply {
			done := 0 // this run's results: those after its message
			for _, m := range req.Messages {
				switch m.Role {
				case "user":
					done = 0
				case "tool":
					done++
				}
			}
			if done >= children {
				return modeltest.Text("all done")
			}
			var calls []modeltest.ToolCall
			for i := done; i < done+wide; i++ {
				calls = append(calls, delegateCall(fmt.Sprintf("c%d", i), helpers[i], "do part "+strconv.Itoa(i)))
			}
			return modeltest.Calls(calls...)
		},
		"helper": func(req modeltest.Request) modeltest.Reply {
			if len(req.LastToolResults()) > 0 {
				return modeltest.Text("part done")
			}
			return modeltest.Calls(modeltest.ShellCall("s", "true"))
		},
	}))

	var treeTime, singleTime time.Duration
	var peakServer, peakSessions int64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r := alice.send(single, "one run")
		alice.waitRun(r.ID, "completed")
		singleTime += time.Since(start)

		resetPeakRSS()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				peakSessions = max(peakSessions, sessionsRSS(e.dataDir))
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		start = time.Now()
		r = alice.send(root, "fan out")
		got := alice.waitRun(r.ID, "completed", "errored", "cancelled")
		treeTime += time.Since(start)
		close(stop)
		wg.Wait()
		peakServer = max(peakServer, selfPeakRSS())
		if got.Status != "completed" {
			b.Fatalf("the tree's root ended %s: %s", got.Status, got.Reason)
		}
		if n := len(alice.tree(r.ID)); n != children+1 {
			b.Fatalf("the tree has %d runs, want %d; the root was told %s", n, children+1, e.lastToolResult("root"))
		}
	}
	b.StopTimer()
	n := float64(b.N)
	tree, one := float64(treeTime.Milliseconds())/n, float64(singleTime.Milliseconds())/n
	b.ReportMetric(tree, "tree_ms")
	b.ReportMetric(one, "single_ms")
	b.ReportMetric(tree/one, "tree/single")
	b.ReportMetric(tree/(children/wide)/one, "hop/single")
	b.ReportMetric(float64(peakServer)/(1<<20), "server_peak_MiB")
	b.ReportMetric(float64(peakSessions)/(1<<20), "sessions_peak_MiB")
}

// resetPeakRSS restarts this process's VmHWM (Linux: clear_refs 5).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// selfPeakRSS is this process's VmHWM in bytes.
func selfPeakRSS() int64 { return statusKB("/proc/self/status", "VmHWM:") << 10 }

func statusKB(path, field string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte(field)); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// sessionsRSS sums the resident memory of the sessions' processes: every
// process whose command line names the data directory (the supervisors,
// which are detached from this process) and everything below them (their
// sandboxes).
func sessionsRSS(data string) int64 {
	self := os.Getpid()
	parent := map[int]int{}
	roots := map[int]bool{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ")".
		if i := bytes.LastIndexByte(b, ')'); i >= 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 1 {
				parent[pid], _ = strconv.Atoi(f[1])
			}
		}
		if cmd, err := os.ReadFile(filepath.Join(filepath.Dir(d), "cmdline")); err == nil && pid != self && bytes.Contains(cmd, []byte(data)) {
			roots[pid] = true
		}
	}
	var sum int64
	for pid := range parent {
		for p, hops := pid, 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if roots[p] {
				sum += statusKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") << 10
				break
			}
		}
	}
	return sum
}
