package driver

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// isolatedNet is a network namespace of the test's own, with only lo, for
// the fake provider and the CLI: what the CLI reaches is what it was
// pointed at, or nothing. The machine's resolvers (from /etc/resolv.conf)
// are addresses on that lo, answered by a recorder that says NXDOMAIN to
// everything: each name a CLI looks up is a place it tried to reach.
//
// Work runs on one OS thread that entered the namespace: sockets it opens
// live there, and a child it forks starts there. Without root (or without
// ip(8)) there is no namespace and work runs as it is; dns is nil then.
type isolatedNet struct {
	work chan func()
	dns  *dnsRecorder
}

func newIsolatedNet(t *testing.T) *isolatedNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: the CLI shares the host's network, and its lookups are not checked")
		return &isolatedNet{}
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Log("no ip(8): the CLI shares the host's network, and its lookups are not checked")
		return &isolatedNet{}
	}
	n := &isolatedNet{work: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, left in its namespace, ends with
		// this goroutine instead of going back to the scheduler.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- err
			return
		}
		steps := [][]string{{"link", "set", "lo", "up"}}
		for _, r := range resolvers() {
			if !net.ParseIP(r).IsLoopback() { // 127/8 is lo's already
				steps = append(steps, []string{"addr", "add", r, "dev", "lo"})
			}
		}
		for _, s := range steps {
			if out, err := exec.Command(ip, s...).CombinedOutput(); err != nil {
				ready <- &exec.Error{Name: "ip " + strings.Join(s, " ") + ": " + string(out), Err: err}
				return
			}
		}
		d, err := newDNSRecorder(resolvers())
		if err != nil {
			ready <- err
			return
		}
		n.dns = d
		ready <- nil
		for f := range n.work {
			f()
		}
		d.close()
	}()
	if err := <-ready; err != nil {
		t.Logf("no network namespace (%v): the CLI shares the host's network", err)
		return &isolatedNet{}
	}
	t.Cleanup(func() { close(n.work) })
	return n
}

// do runs f in the namespace and waits for it.
func (n *isolatedNet) do(f func()) {
	if n.work == nil {
		f()
		return
	}
	done := make(chan struct{})
	n.work <- func() { defer close(done); f() }
	<-done
}

// resolvers are the IPv4 name servers of /etc/resolv.conf but 127.0.0.1
// (which the recorder always answers).
func resolvers() []string {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == "nameserver" {
			if ip := net.ParseIP(fields[1]); ip != nil && ip.To4() != nil && !ip.Equal(net.IPv4(127, 0, 0, 1)) {
				out = append(out, ip.String())
			}
		}
	}
	return out
}

// dnsRecorder answers DNS over UDP on the given addresses, port 53, with
// NXDOMAIN, and keeps the names asked.
type dnsRecorder struct {
	conns []net.PacketConn
	mu    sync.Mutex
	names []string
}

func newDNSRecorder(addrs []string) (*dnsRecorder, error) {
	d := &dnsRecorder{}
	for _, a := range append(addrs, "127.0.0.1") {
		c, err := net.ListenPacket("udp", net.JoinHostPort(a, "53"))
		if err != nil {
			d.close()
			return nil, err
		}
		d.conns = append(d.conns, c)
		go d.serve(c)
	}
	return d, nil
}

func (d *dnsRecorder) serve(c net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		q := buf[:n]
		name, end, ok := question(q)
		if !ok {
			continue
		}
		d.mu.Lock()
		d.names = append(d.names, name)
		d.mu.Unlock()
		// The header with QR and RCODE=NXDOMAIN, the question echoed.
		resp := append([]byte(nil), q[:end]...)
		resp[2] |= 0x80
		resp[3] = resp[3]&0xf0 | 3
		for i := 6; i < 12; i++ {
			resp[i] = 0
		}
		c.WriteTo(resp, from)
	}
}

// question reads the first question's name of a DNS query and where the
// question ends.
func question(q []byte) (string, int, bool) {
	if len(q) < 12 {
		return "", 0, false
	}
	var labels []string
	i := 12
	for {
		if i >= len(q) {
			return "", 0, false
		}
		l := int(q[i])
		if l == 0 {
			break
		}
		if l&0xc0 != 0 || i+1+l > len(q) {
			return "", 0, false
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	end := i + 5 // the zero label, type, class
	if end > len(q) {
		return "", 0, false
	}
	return strings.Join(labels, "."), end, true
}

func (d *dnsRecorder) lookups() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.names...)
}

func (d *dnsRecorder) close() {
	for _, c := range d.conns {
		c.Close()
	}
}
