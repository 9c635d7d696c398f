package main

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/internal/app"
	"corral/internal/modeltest"
	"corral/internal/poll"
	"corral/internal/sandbox"
)

// benchRuns is how many runs go at once while the backup is taken.
const benchRuns = 8

// BenchmarkBackupDuringRuns backs up a large store (CORRAL_BENCH_BACKUP_MB
// megabytes of messages, default 256) as a .tar.gz while 8 runs go on a
// real server, each four shell commands hashing 16 MB of random bytes in
// its sandbox. Each iteration times the same 8 runs without a backup and
// with a backup started just before them, each first in turn. Read
// backup-s and MB/s (the backup, taken while the runs go), runs-s (the 8 runs without
// backup) and slowdown (their wall time during the backup ÷ without);
// overlap is how much of the runs' time the backup covered (1: all of it;
// less, and the slowdown is diluted: raise the size).
func BenchmarkBackupDuringRuns(b *testing.B) {
	if err := sandbox.Available(); err != nil {
		b.Skipf("runs need the sandbox: %v", err)
	}
	mb := 256
	if v := os.Getenv("CORRAL_BENCH_BACKUP_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("CORRAL_BENCH_BACKUP_MB=%q: want a number of megabytes", v)
		}
		mb = n
	}
	model := modeltest.New(func(r modeltest.Request) modeltest.Reply {
		n := 0 // the tools this run called: those since the last user message
		for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role != "user"; i-- {
			if r.Messages[i].Role == "tool" {
				n++
			}
		}
		if n < 4 {
			return modeltest.Calls(modeltest.ShellCall(fmt.Sprintf("c%d", n), "head -c 16000000 /dev/urandom | sha256sum"))
		}
		return modeltest.Text("done")
	})
	defer model.Close()
	env := []string{"CORRAL_MODEL_BASE_URL=" + model.URL(), "CORRAL_MODEL=scripted"}
	data := reachableTempDir(b)
	srv := startServer(b, data, env...)
	c := person(b, srv.base, "bench@example.com")
	agents := make([]string, benchRuns)
	for i := range agents {
		agents[i] = c.agent(fmt.Sprintf("worker-%d", i))
	}
	ballast := c.agent("ballast")
	srv.cmd.Process.Signal(syscall.SIGTERM)
	srv.cmd.Wait()
	bloat(b, app.DBPath(data), ballast, mb)
	srv = startServer(b, data, env...)
	c = login(b, srv.base, "bench@example.com")

	runAll := func() time.Duration {
		start := time.Now()
		ids := make([]string, len(agents))
		for i, a := range agents {
			var posted struct{ Run runAnswer }
			c.do("POST", "/agents/"+a+"/messages", map[string]string{"content": "hash"}, http.StatusAccepted, &posted)
			ids[i] = posted.Run.ID
		}
		for _, id := range ids {
			var r runAnswer
			poll.Until(b, "a run to end", func() bool {
				c.do("GET", "/runs/"+id, nil, http.StatusOK, &r)
				return r.Status != "admitted" && r.Status != "running"
			})
			if r.Status != "completed" {
				b.Fatalf("run %s = %+v, want completed\n%s", id, r, srv.Log())
			}
		}
		return time.Since(start)
	}
	runAll() // the first sandboxes, caches
	if reqs := model.Requests(); !strings.Contains(reqs[len(reqs)-1].Last().Content, `"exit_code":0`) {
		b.Fatalf("a run's command failed: %s", reqs[len(reqs)-1].Last().Content)
	}
	to := filepath.Join(b.TempDir(), "backup.tar.gz")
	var alone, during, backupTime, covered time.Duration
	var written int64
	withBackup := func() time.Duration {
		done := make(chan error, 1)
		start := time.Now()
		var took time.Duration
		go func() {
			// The command, as cron runs it: a process of its own.
			cmd := exec.Command(os.Args[0], "backup", "--data", data, "--to", to)
			cmd.Env = append(os.Environ(), "CORRAL_TEST_AS_MAIN=1")
			out, err := cmd.CombinedOutput()
			took = time.Since(start)
			if err != nil {
				err = fmt.Errorf("corral backup: %v\n%s", err, out)
			}
			done <- err
		}()
		d := runAll()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		backupTime += took
		covered += min(took, d)
		if fi, err := os.Stat(to); err == nil {
			written = fi.Size()
		}
		os.Remove(to)
		return d
	}
	i := 0
	for b.Loop() {
		// Interleaved, each first in turn: a machine that gets busier or
		// quieter weighs on both alike.
		if i%2 == 0 {
			alone += runAll()
			during += withBackup()
		} else {
			during += withBackup()
			alone += runAll()
		}
		i++
	}
	n := float64(b.N)
	b.ReportMetric(backupTime.Seconds()/n, "backup-s")
	b.ReportMetric(float64(mb)/(backupTime.Seconds()/n), "MB/s")
	b.ReportMetric(float64(written)/1e6, "archive-MB")
	b.ReportMetric(alone.Seconds()/n, "runs-s")
	b.ReportMetric(during.Seconds()/alone.Seconds(), "slowdown")
	b.ReportMetric(covered.Seconds()/during.Seconds(), "overlap")
}

// bloat adds mb megabytes of messages to agent in the database at path,
// 64 kB each, in transactions of 64 MB: a large store.
func bloat(b *testing.B, path, agent string, mb int) {
	b.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rows := mb * 1_000_000 / 65536
	for done := 0; done < rows; done += 1000 {
		n := min(1000, rows-done)
		if _, err := db.Exec(`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
			INSERT INTO messages (id, agent_id, role, content, created_at)
			SELECT 'msg_ballast_' || (? + i), ?, 'user', hex(randomblob(32768)), 0 FROM k`, n, done, agent); err != nil {
			b.Fatal(err)
		}
	}
}
