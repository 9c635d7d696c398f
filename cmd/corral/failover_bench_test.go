package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/pgtest"
	"corral/internal/poll"
	"corral/internal/sandbox"
)

// BenchmarkFailover: a run's tool command sleeps on a sandbox node when
// its control is killed (SIGKILL); the figure is the time from the kill
// to the run's end (its next events: the command's result, the model's
// answer, the end). Failover: two controls on one PostgreSQL store with
// --failover-after 3s, the standby takes over. Baseline, in the same
// run: one control on SQLite, started again at once on its own data (a
// restart, with no lease to wait for). Reported: p50 and p99 of each,
// and their ratio at p50.
func BenchmarkFailover(b *testing.B) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(b, "runs need the sandbox: %v", err)
	}
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		if r.Last().Role == "user" {
			return modeltest.Calls(modeltest.ShellCall("c1", "sleep 1.4142; echo slept"))
		}
		return modeltest.Text("done")
	})
	defer model.Close()
	var failovers, restarts []time.Duration
	for i := 0; i < b.N; i++ {
		failovers = append(failovers, failoverOnce(b, model, true))
		restarts = append(restarts, failoverOnce(b, model, false))
	}
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))].Seconds()
	}
	b.ReportMetric(pct(failovers, 0.5), "failover-p50-s")
	b.ReportMetric(pct(failovers, 0.99), "failover-p99-s")
	b.ReportMetric(pct(restarts, 0.5), "restart-p50-s")
	b.ReportMetric(pct(restarts, 0.99), "restart-p99-s")
	b.ReportMetric(pct(failovers, 0.5)/pct(restarts, 0.5), "failover/restart")
}

// failoverOnce runs one kill of a control mid-run and returns the time
// from the kill to the run's end: taken over by a standby on PostgreSQL
// (shared), or by the same control started again on SQLite.
func failoverOnce(b *testing.B, model *modeltest.Provider, shared bool) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	env := []string{"CORRAL_ROLE=control", "CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted", "CORRAL_SECRET_KEY=" + newSecretKey(b)}
	data := reachableTempDir(b)
	tokenArgs := []string{"node", "token", "--data", data}
	if shared {
		db := pgtest.NewDatabase(b)
		env = append(env, "CORRAL_DATABASE_URL="+db, "CORRAL_FAILOVER_AFTER=3s")
		tokenArgs = []string{"node", "token", "--db", db}
	}
	first := startServer(b, data, env...)
	controls := first.base
	var second *server
	if shared {
		cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--data", reachableTempDir(b))
		cmd.Env = append(append(os.Environ(), "CORRAL_TEST_AS_MAIN=1"), env...)
		second = startProcess(b, cmd, "the second control never said it waits as a standby", func(line string) bool {
			return strings.Contains(line, "standby")
		})
		m := regexp.MustCompile(`standby.* addr=(http://[0-9.]+:\d+)`).FindStringSubmatch(second.Log())
		if m == nil {
			b.Fatalf("the standby did not say where it answers:\n%s", second.Log())
		}
		controls += "," + m[1]
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), tokenArgs, nil, &out, &errOut, noenv); code != 0 {
		b.Fatalf("node token: %d %s", code, errOut.String())
	}
	node := startNode(b, reachableTempDir(b), controls, strings.TrimSpace(out.String()))
	defer crash(node)
	c, agentID := signedIn(b, first)
	c.nodesReady(1)
	var posted struct{ Run runAnswer }
	c.do("POST", "/agents/"+agentID+"/messages", map[string]string{"content": "sleep"}, http.StatusAccepted, &posted)
	poll.Until(b, "the command to sleep on the node", func() bool { return len(processesWith("sleep 1.4142")) > 0 })

	crash(first)
	killed := time.Now()
	if shared {
		poll.Until(b, "the standby to take over", func() bool { return strings.Contains(second.Log(), "corral serving") })
		c.base = strings.Split(controls, ",")[1]
	} else {
		// On its own address: the node dials that one.
		again := startServerAt(b, strings.TrimPrefix(first.base, "http://"), data, env...)
		c.base = again.base
	}
	var r runAnswer
	poll.Until(b, "the run to end", func() bool {
		c.do("GET", "/runs/"+posted.Run.ID, nil, http.StatusOK, &r)
		return r.Status != "admitted" && r.Status != "running"
	})
	took := time.Since(killed)
	if r.Status != "completed" {
		b.Fatalf("the run after the kill = %+v", r)
	}
	return took
}
