package noderpc_test

import (
	"net"
	"testing"
	"time"

	"corral"
	"corral/internal/vethtest"
)

// BenchmarkOutput reads 64 MiB of a finished command's output from
// offset 0 to its exit, the way the runner reads a command's output, as
// control does over the whole relay and as role all does on node.Local
// directly, alternating in the same run; relay/all is the ratio of their
// throughputs. On loopback, and on a veth pair.
//
//	go test -run '^$' -bench Output -benchtime 3x -count 3 ./internal/relay/noderpc/
func BenchmarkOutput(b *testing.B) {
	b.Run("loopback", func(b *testing.B) {
		benchOutput(b, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
	})
	b.Run("veth", func(b *testing.B) {
		pair := vethtest.New(b)
		benchOutput(b, func() (net.Listener, error) { return pair.Listen(0) })
	})
}

func benchOutput(b *testing.B, listen func() (net.Listener, error)) {
	needSessions(b)
	const size = 64 << 20
	l, _ := newLocal(b)
	c := overRelay(b, listen, l.Local)
	startSession(b, c, "run_out")
	if err := c.Exec(acting, "run_out", corral.Command{ID: "flood", Argv: []string{"/bin/sh", "-c", "head -c 67108864 /dev/zero"},
		Env: []string{"PATH=/usr/bin:/bin"}, OutputMax: 2 * size}); err != nil {
		b.Fatal(err)
	}
	read := func(n corral.Sessions) time.Duration {
		start := time.Now()
		var off int64
		for {
			o, err := n.Output(acting, "run_out", "flood", off, true)
			if err != nil {
				b.Fatal(err)
			}
			off += int64(len(o.Data))
			if o.Exit != nil {
				break
			}
		}
		if off != size {
			b.Fatalf("read %d bytes, want %d", off, size)
		}
		return time.Since(start)
	}
	read(l.Local) // the command has ended and its output is all there
	var all, rel time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			all += read(l.Local)
			rel += read(c)
		} else {
			rel += read(c)
			all += read(l.Local)
		}
		i++
	}
	mbs := func(d time.Duration) float64 { return float64(size) * float64(i) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbs(all), "all-MiB/s")
	b.ReportMetric(mbs(rel), "relay-MiB/s")
	b.ReportMetric(mbs(rel)/mbs(all), "relay/all")
}
