package relay

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"corral/internal/vethtest"
)

// BenchmarkThroughput copies 1 GiB of a node's output to control through
// one relay stream (a WebSocket over TCP, yamux on it, a 256 KiB window)
// and the same through a plain TCP connection on the same link,
// alternated in the same iteration; relay/tcp is the ratio of their
// throughputs. On loopback, and on a veth pair to a network namespace
// (control's end and the plain copy's reader in it, as on a second
// machine: vethtest, root only).
//
//	go test -run '^$' -bench Throughput -benchtime 2x -count 3 ./internal/relay/
func BenchmarkThroughput(b *testing.B) {
	b.Run("loopback", func(b *testing.B) {
		benchThroughput(b, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
	})
	b.Run("veth", func(b *testing.B) {
		pair := vethtest.New(b)
		benchThroughput(b, func() (net.Listener, error) { return pair.Listen(0) })
	})
}

// benchThroughput serves control, and the plain copies' reader, each on a
// listener of listen's.
func benchThroughput(b *testing.B, listen func() (net.Listener, error)) {
	ctlListener, err := listen()
	if err != nil {
		b.Fatal(err)
	}
	ctl := newControlOn(b, ctlListener, Config{})
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
	ln, err := listen()
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	relayed := func() time.Duration {
		return copyOnce(b, ctlEnd.Accept, func() (net.Conn, error) { return node.Open(context.Background()) })
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
