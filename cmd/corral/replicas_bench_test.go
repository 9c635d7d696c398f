package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/pgtest"
	"corral/internal/poll"
	"corral/internal/sandbox"
)

// BenchmarkRunCreation: 16 messages posted at once, each starting a run
// (the model answers at once, so each run is a session started and
// ended on a sandbox node), spread over 1, 2 and 3 controls on one
// PostgreSQL store; with more than one, all but one are standbys, which
// forward to the serving control. Reported for each: runs admitted a
// second (every POST answered 202) and runs ended a second (every run
// completed), and each against one control measured in the same run.
func BenchmarkRunCreation(b *testing.B) {
	if err := sandbox.Available(); err != nil {
		kerneltest.Skip(b, "runs need the sandbox: %v", err)
	}
	model := modeltest.New(func(modeltest.Request) modeltest.Reply { return modeltest.Text("done") })
	defer model.Close()
	admitted := map[int]time.Duration{}
	ended := map[int]time.Duration{}
	const runs = 16
	for range b.N {
		for controls := 1; controls <= 3; controls++ {
			a, e := runCreationOnce(b, model, controls, runs)
			admitted[controls] += a
			ended[controls] += e
		}
	}
	for controls := 1; controls <= 3; controls++ {
		perSec := func(d time.Duration) float64 { return float64(runs*b.N) / d.Seconds() }
		b.ReportMetric(perSec(admitted[controls]), fmt.Sprintf("admitted/s-%d", controls))
		b.ReportMetric(perSec(ended[controls]), fmt.Sprintf("ended/s-%d", controls))
		if controls > 1 {
			b.ReportMetric(admitted[1].Seconds()/admitted[controls].Seconds(), fmt.Sprintf("admitted-%d/1", controls))
			b.ReportMetric(ended[1].Seconds()/ended[controls].Seconds(), fmt.Sprintf("ended-%d/1", controls))
		}
	}
}

// runCreationOnce starts controls controls and a node on a fresh store,
// posts runs messages at once round-robin over the controls, and returns
// the time until every POST was answered and until every run ended.
func runCreationOnce(b *testing.B, model *modeltest.Provider, controls, runs int) (admitted, ended time.Duration) {
	b.StopTimer()
	defer b.StartTimer()
	db := pgtest.NewDatabase(b)
	env := []string{"CORRAL_ROLE=control", "CORRAL_DATABASE_URL=" + db, "CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted",
		"CORRAL_SECRET_KEY=" + newSecretKey(b), "CORRAL_TRUSTED_PROXY=127.0.0.1"}
	first := startServer(b, reachableTempDir(b), env...)
	defer crash(first)
	urls := []string{first.base}
	for len(urls) < controls {
		cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--data", reachableTempDir(b))
		cmd.Env = append(append(os.Environ(), "CORRAL_TEST_AS_MAIN=1"), env...)
		s := startProcess(b, cmd, "a control never said it waits as a standby", func(line string) bool { return strings.Contains(line, "standby") })
		defer crash(s)
		m := regexp.MustCompile(`standby.* addr=(http://[0-9.]+:\d+)`).FindStringSubmatch(s.Log())
		if m == nil {
			b.Fatalf("the standby did not say where it answers:\n%s", s.Log())
		}
		urls = append(urls, m[1])
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"node", "token", "--db", db}, nil, &out, &errOut, noenv); code != 0 {
		b.Fatalf("node token: %d %s", code, errOut.String())
	}
	node := startNode(b, reachableTempDir(b), strings.Join(urls, ","), strings.TrimSpace(out.String()))
	defer crash(node)
	c, agentID := signedIn(b, first)
	c.nodesReady(1)
	agents := []string{agentID}
	for len(agents) < runs {
		var made struct{ ID string }
		c.do("POST", "/agents", map[string]string{"name": fmt.Sprintf("worker-%d", len(agents))}, http.StatusCreated, &made)
		agents = append(agents, made.ID)
	}

	posted := make([]string, runs)
	start := time.Now()
	var wg sync.WaitGroup
	for i, id := range agents {
		wg.Go(func() {
			via := &httpClient{t: b, base: urls[i%len(urls)], c: c.c}
			var p struct{ Run runAnswer }
			via.do("POST", "/agents/"+id+"/messages", map[string]string{"content": "go"}, http.StatusAccepted, &p)
			posted[i] = p.Run.ID
		})
	}
	wg.Wait()
	admitted = time.Since(start)
	for _, id := range posted {
		var r runAnswer
		poll.Until(b, "the run to end", func() bool {
			c.do("GET", "/runs/"+id, nil, http.StatusOK, &r)
			return r.Status != "admitted" && r.Status != "running"
		})
		if r.Status != "completed" {
			b.Fatalf("run = %+v", r)
		}
	}
	return admitted, time.Since(start)
}
