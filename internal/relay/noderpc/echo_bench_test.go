package noderpc_test

import (
	"bytes"
	"testing"
	"time"

	"corral"
)

// BenchmarkTerminalEcho measures a keystroke's echo (a byte typed into a
// session's shell until the terminal shows it back) through the relay's
// Node RPC against the same on node.Local directly (role all), in the
// same run, alternating, each on a session of its own; relay/all is the
// ratio of their medians. The relay here is loopback TCP, one stream per
// terminal.
//
//	go test -run '^$' -bench TerminalEcho -benchtime 200x -count 3 ./internal/relay/noderpc/
func BenchmarkTerminalEcho(b *testing.B) {
	needSessions(b)
	l, c := newLocal(b)
	// A session each, so neither viewer sees the other's keystrokes.
	startSession(b, c, "run_echo_a")
	startSession(b, c, "run_echo_b")
	direct, err := l.Local.Terminal(acting, "run_echo_a", 80, 24)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	relayed, err := c.Terminal(acting, "run_echo_b", 80, 24)
	if err != nil {
		b.Fatal(err)
	}
	defer relayed.Close()
	echo := func(term corral.Terminal, key byte) time.Duration {
		buf := make([]byte, 4096)
		start := time.Now()
		if _, err := term.Write([]byte{key}); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := term.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			if bytes.IndexByte(buf[:n], key) >= 0 {
				return time.Since(start)
			}
		}
	}
	var all, rel []time.Duration
	i := 0
	for b.Loop() {
		key := byte('a' + i%26)
		if i%2 == 0 {
			all = append(all, echo(direct, key))
			rel = append(rel, echo(relayed, key))
		} else {
			rel = append(rel, echo(relayed, key))
			all = append(all, echo(direct, key))
		}
		i++
	}
	med := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		for x := 1; x < len(s); x++ {
			for y := x; y > 0 && s[y] < s[y-1]; y-- {
				s[y], s[y-1] = s[y-1], s[y]
			}
		}
		return s[len(s)/2]
	}
	ma, mr := med(all), med(rel)
	b.ReportMetric(float64(ma.Microseconds()), "all-µs")
	b.ReportMetric(float64(mr.Microseconds()), "relay-µs")
	b.ReportMetric(float64(mr)/float64(ma), "relay/all")
}
