package sandbox

import (
	"os/exec"
	"testing"
	"time"
)

// BenchmarkStartTrue measures start-to-exit of /bin/true in full isolation
// (namespaces, minimal root, Landlock, seccomp, cgroup, watchdog) against a
// plain exec of /bin/true and against bubblewrap
// (bwrap --unshare-all --ro-bind / / true), interleaved in the same run so
// that machine noise falls on all three alike. Read the ratios.
func BenchmarkStartTrue(b *testing.B) {
	needSandbox(b)
	dir := workspace(b, false)
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Log("bubblewrap is not installed (make bench installs it): reporting the exec ratio only")
	}
	spec := Spec{Workspace: dir, Mode: ReadOnly, Env: testEnv, Command: []string{"/bin/true"}}
	timed := func(f func() error) time.Duration {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var inSandbox, plain, inBwrap time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		inSandbox += timed(func() error {
			res, err := Run(Config{}, spec, nil, nil, nil)
			if err == nil && res.ExitCode != 0 {
				b.Fatalf("sandboxed true = %+v", res)
			}
			return err
		})
		plain += timed(exec.Command("/bin/true").Run)
		if bwrap != "" {
			inBwrap += timed(exec.Command(bwrap, "--unshare-all", "--ro-bind", "/", "/", "/bin/true").Run)
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
