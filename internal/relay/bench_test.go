package relay

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkThroughput copies 1 GiB through one relay stream (WebSocket
// over loopback TCP, yamux on it, a 256 KiB window) and the same through a
// plain loopback TCP connection, alternated in the same iteration;
// relay/tcp is the ratio of their throughputs.
//
//	go test -run '^$' -bench Throughput -benchtime 2x -count 3 ./internal/relay/
func BenchmarkThroughput(b *testing.B) {
	ctl := newControl(b, Config{})
	node, err := Dial(context.Background(), ctl.url(), map[string][]string{"Authorization": {"Bearer good"}}, Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	var ctlEnd *Session
	select {
	case ctlEnd = <-ctl.sessions:
	case <-time.After(10 * time.Second):
		b.Fatal("no node connected")
	}
	defer ctlEnd.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	relayed := func() time.Duration {
		return copyOnce(b, node.Accept, func() (net.Conn, error) { return ctlEnd.Open(context.Background()) })
	}
	plain := func() time.Duration {
		return copyOnce(b, ln.Accept, func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) })
	}
	var rel, tcp time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			rel += relayed()
			tcp += plain()
		} else {
			tcp += plain()
			rel += relayed()
		}
		i++
	}
	mbs := func(d time.Duration) float64 { return float64(total) * float64(i) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbs(rel), "relay-MiB/s")
	b.ReportMetric(mbs(tcp), "tcp-MiB/s")
	b.ReportMetric(mbs(rel)/mbs(tcp), "relay/tcp")
}

// total is what each copy of BenchmarkThroughput carries.
const total = 1 << 30

// copyOnce sends total bytes on a connection open makes to one accept
// takes, and returns how long until the last arrived.
func copyOnce(b *testing.B, accept, open func() (net.Conn, error)) time.Duration {
	done := make(chan int64, 1)
	go func() {
		c, err := accept()
		if err != nil {
			done <- 0
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		done <- n
	}()
	c, err := open()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	send(b, c, total)
	c.Close()
	if n := <-done; n != total {
		b.Fatalf("carried %d bytes, want %d", n, total)
	}
	return time.Since(start)
}

// send writes n bytes to w in 32 KiB pieces.
func send(b *testing.B, w io.Writer, n int64) {
	buf := make([]byte, 32<<10)
	for n > 0 {
		k := min(int64(len(buf)), n)
		if _, err := w.Write(buf[:k]); err != nil {
			b.Fatal(err)
		}
		n -= k
	}
}
