package sandbox

import (
	"os/exec"
	"testing"
	"time"
)

// The benchmarks here compare the sandbox against bubblewrap
// (bwrap --unshare-all --ro-bind / / true), interleaved in the same loop so
// that machine noise falls on both alike: read the ratios, not the times.
//
//	go test -run '^$' -bench 'BenchmarkExecWarm|BenchmarkStartTrue' -benchtime 200x -count 3 ./internal/sandbox/

// timed runs f and returns how long it took, failing the benchmark on an
// error.
func timed(b *testing.B, f func() error) time.Duration {
	b.Helper()
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// lookBwrap finds bubblewrap, or says why the ratio to it is missing.
func lookBwrap(b *testing.B) string {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Log("bubblewrap is not installed (make bench installs it): no ratio to it")
		return ""
	}
	return bwrap
}

func runBwrap(bwrap string) error {
	return exec.Command(bwrap, "--unshare-all", "--ro-bind", "/", "/", "/bin/true").Run()
}

// BenchmarkStartTrue measures start-to-exit of /bin/true in a sandbox of
// its own (a cold session: namespaces, minimal root, Landlock, seccomp,
// cgroup, watchdog, then one exec) against a plain exec of /bin/true and
// against bubblewrap. Goal: sandbox/bwrap ≤ 1.5.
//
// The workspace is owned by the sandbox's user, as a run's staged tree is:
// one of another owner would first be cloned as an idmapped mount
// (idmap_linux.go), about another millisecond here. The init is this test
// binary; the server's own binary, the init in production, is several
// times larger and takes milliseconds more to start.
func BenchmarkStartTrue(b *testing.B) {
	needSandbox(b)
	dir := workspace(b, true)
	bwrap := lookBwrap(b)
	spec := Spec{Workspace: dir, Mode: ReadOnly, Env: testEnv, Command: []string{"/bin/true"}}
	var inSandbox, plain, inBwrap time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		inSandbox += timed(b, func() error {
			res, err := Run(Config{}, spec, nil, nil, nil)
			if err == nil && res.ExitCode != 0 {
				b.Fatalf("sandboxed true = %+v", res)
			}
			return err
		})
		plain += timed(b, exec.Command("/bin/true").Run)
		if bwrap != "" {
			inBwrap += timed(b, func() error { return runBwrap(bwrap) })
		}
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(inSandbox), "sandbox-ms")
	b.ReportMetric(ms(plain), "exec-ms")
	b.ReportMetric(float64(inSandbox)/float64(plain), "sandbox/exec")
	if bwrap != "" {
		b.ReportMetric(ms(inBwrap), "bwrap-ms")
		b.ReportMetric(float64(inSandbox)/float64(inBwrap), "sandbox/bwrap")
	}
}

// BenchmarkExecWarm measures what a command costs once its session runs,
// as every tool call of an agent run after the first does: exec of
// /bin/true into a started session, with fresh pipes for its stdin, stdout
// and stderr, until the session reports its exit. Against it: a plain exec
// of /bin/true, and bubblewrap, which has no warm path and starts a
// sandbox per command. Goal: exec/bwrap ≤ 0.5.
func BenchmarkExecWarm(b *testing.B) {
	needSandbox(b)
	dir := workspace(b, true)
	bwrap := lookBwrap(b)
	sess, err := StartSession(Config{}, SessionSpec{Workspace: dir, Mode: ReadOnly})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		sess.End()
		if err := sess.Wait(); err != nil {
			b.Error(err)
		}
	}()
	execTrue := func() error {
		var ps [3]pipe // stdin, stdout, stderr
		var err error
		for i := range ps {
			if ps[i], err = newPipe(); err != nil {
				return err
			}
		}
		defer func() {
			for _, p := range ps {
				p.r.Close()
				p.w.Close()
			}
		}()
		p, err := sess.Exec(Command{Argv: []string{"/bin/true"}, Env: testEnv}, ps[0].r, ps[1].w, ps[2].w)
		if err != nil {
			return err
		}
		if code, sig := p.Exit(); code != 0 {
			b.Fatalf("true in the session = %d %s", code, sig)
		}
		return nil
	}
	var warm, plain, inBwrap time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		warm += timed(b, execTrue)
		plain += timed(b, exec.Command("/bin/true").Run)
		if bwrap != "" {
			inBwrap += timed(b, func() error { return runBwrap(bwrap) })
		}
	}
	b.StopTimer()
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(warm), "warm-ms")
	b.ReportMetric(ms(plain), "plain-ms")
	b.ReportMetric(float64(warm)/float64(plain), "exec/plain")
	if bwrap != "" {
		b.ReportMetric(ms(inBwrap), "bwrap-ms")
		b.ReportMetric(float64(warm)/float64(inBwrap), "exec/bwrap")
	}
}
