package sandbox

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkIdleSession measures what a session that runs nothing costs
// this process in CPU time (its watchdog), per second of idleness; read
// cpu-ms/s. It was 34.6 while the watchdog polled every 20 ms whatever the
// session did; it backs off to 500 ms while no CPU is used.
func BenchmarkIdleSession(b *testing.B) {
	needSandbox(b)
	sess, err := StartSession(Config{}, SessionSpec{Workspace: workspace(b, true), Mode: ReadOnly})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { sess.End(); sess.Wait() }()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	time.Sleep(time.Second) // past the start
	b.ResetTimer()
	start, c0 := time.Now(), cpu()
	for i := 0; i < b.N; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	used, wall := cpu()-c0, time.Since(start)
	b.ReportMetric(float64(used.Microseconds())/1000/wall.Seconds(), "cpu-ms/s")
}
