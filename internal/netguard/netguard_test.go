package netguard

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	tests := []struct {
		name           string
		limit          uint64
		conns, reserve int
	}{
		{"unknown limit", 0, 0, 0},
		{"tiny limit keeps half", 256, 128, 128},
		{"just under twice the reserve", 2047, 1024, 1023},
		{"twice the reserve", 2048, 1024, 1024},
		{"this machine's", 19999, 18975, 1024},
		{"systemd's default hard limit", 524288, 523264, 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conns, reserve := Budget(tt.limit)
			if conns != tt.conns || reserve != tt.reserve {
				t.Fatalf("Budget(%d) = %d, %d, want %d, %d", tt.limit, conns, reserve, tt.conns, tt.reserve)
			}
		})
	}
}

func TestAddrKey(t *testing.T) {
	tests := []struct {
		name, addr, want string
	}{
		{"IPv4 is itself", "192.0.2.7", "192.0.2.7"},
		{"IPv6 counts by its /64", "2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::"},
		{"another host of the same /64", "2001:db8:1:2::1", "2001:db8:1:2::"},
		{"loopback IPv6", "::1", "::"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := addrKey(netip.MustParseAddr(tt.addr)); got != netip.MustParseAddr(tt.want) {
				t.Fatalf("addrKey(%s) = %s, want %s", tt.addr, got, tt.want)
			}
		})
	}
}

// guarded is a real loopback listener behind the guard, accepting in the
// background as http.Server would.
type guarded struct {
	t        *testing.T
	l        *Listener
	accepted chan net.Conn
}

func listen(t *testing.T, cfg Config) *guarded {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &guarded{t: t, l: Wrap(ln, cfg), accepted: make(chan net.Conn, 100)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := g.l.Accept()
			if err != nil {
				return
			}
			g.accepted <- c
		}
	}()
	t.Cleanup(func() {
		g.l.Close()
		<-done
		close(g.accepted)
		for c := range g.accepted {
			c.Close()
		}
	})
	return g
}

// dial connects from the loopback address from and reports whether the
// server accepted the connection (it arrives from Accept) or refused it (the
// client's read fails). Both sides of an accepted connection are returned.
func (g *guarded) dial(from string) (client, server net.Conn, accepted bool) {
	g.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", g.l.Addr().String())
	if errors.Is(err, syscall.ECONNRESET) {
		// Refused so fast that the reset came before connect returned.
		return nil, nil, false
	}
	if err != nil {
		g.t.Fatalf("dial from %s: %v", from, err)
	}
	g.t.Cleanup(func() { c.Close() })
	readErr := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		readErr <- err
	}()
	select {
	case s := <-g.accepted:
		if s.RemoteAddr().String() != c.LocalAddr().String() {
			g.t.Fatalf("accepted %s, dialled from %s", s.RemoteAddr(), c.LocalAddr())
		}
		return c, s, true
	case err := <-readErr:
		if err == nil {
			g.t.Fatalf("a refused connection from %s read a byte", from)
		}
		return c, nil, false
	case <-time.After(30 * time.Second): // liveness bound, not a timing assertion
		g.t.Fatalf("the connection from %s was neither accepted nor refused", from)
		return nil, nil, false
	}
}

func TestCaps(t *testing.T) {
	type dial struct {
		from     string
		accepted bool
		close    bool // close the accepted connection straight away
	}
	tests := []struct {
		name  string
		cfg   Config
		dials []dial
		want  Refusals
		open  int // connections held at the end
	}{
		{
			name: "per address",
			cfg:  Config{MaxConns: 10, MaxConnsPerAddr: 2},
			dials: []dial{
				{"127.0.0.2", true, false}, {"127.0.0.2", true, false}, {"127.0.0.2", false, false},
				{"127.0.0.3", true, false}, {"127.0.0.3", true, false}, {"127.0.0.3", false, false},
			},
			want: Refusals{OverPerAddr: 2},
			open: 4,
		},
		{
			name: "total",
			cfg:  Config{MaxConns: 3, MaxConnsPerAddr: 2},
			dials: []dial{
				{"127.0.0.2", true, false}, {"127.0.0.2", true, false},
				{"127.0.0.3", true, false}, {"127.0.0.4", false, false}, {"127.0.0.3", false, false},
			},
			want: Refusals{OverTotal: 2},
			open: 3,
		},
		{
			name: "a closed connection gives its slot back",
			cfg:  Config{MaxConns: 10, MaxConnsPerAddr: 1},
			dials: []dial{
				{"127.0.0.2", true, true}, {"127.0.0.2", true, false}, {"127.0.0.2", false, false},
			},
			want: Refusals{OverPerAddr: 1},
			open: 1,
		},
		{
			name: "no per-address cap",
			cfg:  Config{MaxConns: 3},
			dials: []dial{
				{"127.0.0.2", true, false}, {"127.0.0.2", true, false}, {"127.0.0.2", true, false},
				{"127.0.0.2", false, false},
			},
			want: Refusals{OverTotal: 1},
			open: 3,
		},
		{
			name: "a trusted proxy is exempt from the per-address cap, not from the total",
			cfg:  Config{MaxConns: 5, MaxConnsPerAddr: 1, Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}},
			dials: []dial{
				{"127.0.0.5", true, false}, {"127.0.0.5", true, false}, {"127.0.0.5", true, false},
				{"127.0.0.2", true, false}, {"127.0.0.2", false, false},
				{"127.0.0.5", true, false}, {"127.0.0.5", false, false},
			},
			want: Refusals{OverTotal: 1, OverPerAddr: 1},
			open: 5,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := listen(t, tt.cfg)
			for i, d := range tt.dials {
				_, s, accepted := g.dial(d.from)
				if accepted != d.accepted {
					t.Fatalf("dial %d from %s: accepted = %v, want %v", i, d.from, accepted, d.accepted)
				}
				if s != nil && d.close {
					s.Close()
					s.Close() // a second close must not give back a second slot
				}
			}
			if got := g.l.Refused(); got != tt.want {
				t.Fatalf("Refused() = %+v, want %+v", got, tt.want)
			}
			if got := g.l.Open(); got != tt.open {
				t.Fatalf("Open() = %d, want %d", got, tt.open)
			}
		})
	}
}

// syncBuffer is a log destination the log loop and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRefusalsAreLoggedSummed checks that refusals reach the log as sums,
// not one line each, and that Close writes the ones not yet logged.
func TestRefusalsAreLoggedSummed(t *testing.T) {
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	g := listen(t, Config{MaxConns: 10, MaxConnsPerAddr: 1, Log: log, LogEvery: time.Hour})
	g.dial("127.0.0.2")
	const refused = 20
	for range refused {
		if _, _, accepted := g.dial("127.0.0.2"); accepted {
			t.Fatal("a connection over the per-address cap was accepted")
		}
	}
	if strings.Contains(out.String(), "connections refused") {
		t.Fatalf("refusals were logged before the interval ended:\n%s", out.String())
	}
	g.l.Close()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "connections refused") ||
		!strings.Contains(lines[0], "refused_total=20") || !strings.Contains(lines[0], "over_max_conns_per_addr=20") ||
		!strings.Contains(lines[0], "last_addr=127.0.0.2") {
		t.Fatalf("log after Close:\n%s\nwant one line summing %d refusals", out.String(), refused)
	}
}
