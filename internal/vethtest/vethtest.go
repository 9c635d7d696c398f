//go:build linux

// Package vethtest links a test's process to a network namespace of its
// own by a veth pair, so a benchmark can measure what crosses a real link
// (the kernel's veth driver, a TCP stack at each end) rather than
// loopback. The namespace holds only its end of the pair; a listener made
// there with Listen is reached from the test's own namespace at PeerIP,
// and nothing else is. It needs root and iproute2's ip; without them it
// skips (kerneltest: a failure where CORRAL_REQUIRE_KERNEL=1).
package vethtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"corral/internal/kerneltest"
)

// T is what a pair needs of its test.
type T interface {
	kerneltest.TB
	Cleanup(func())
}

// Pair is a namespace and the veth pair that links it to the test's.
type Pair struct {
	NS     string // the namespace's name (ip netns)
	HostIP string // the test's end of the link
	PeerIP string // the namespace's end
	ip     string
	link   string // the test's end's name
}

var made atomic.Int32

// New makes a namespace and links it by a veth pair; the test's end goes
// when the test ends, and the namespace with the other end.
func New(t T) *Pair {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, "network namespaces need root")
	}
	ip, err := lookPath("ip")
	if err != nil {
		kerneltest.Skip(t, "ip is missing (iproute2): %v", err)
	}
	// The test's end is in the host's namespace, which other processes
	// may share: its /30 comes from the pid and a count, in
	// 10.79.0.0/16, and its name too (at most 15 bytes).
	n := int(made.Add(1))
	block := (os.Getpid()*8 + n) % (1 << 14)
	p := &Pair{
		NS:     fmt.Sprintf("crl-veth-%d-%d", os.Getpid(), n),
		HostIP: fmt.Sprintf("10.79.%d.%d", block/64, block%64*4+1),
		PeerIP: fmt.Sprintf("10.79.%d.%d", block/64, block%64*4+2),
		ip:     ip,
		link:   fmt.Sprintf("crv%d", block),
	}
	if out, err := exec.Command(ip, "netns", "add", p.NS).CombinedOutput(); err != nil {
		kerneltest.Skip(t, "cannot make a network namespace: %v %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command(ip, "link", "del", p.link).Run()
		exec.Command(ip, "netns", "del", p.NS).Run()
	})
	if out, err := exec.Command(ip, "link", "add", p.link, "type", "veth", "peer", "name", "peer", "netns", p.NS).CombinedOutput(); err != nil {
		kerneltest.Skip(t, "cannot make a veth pair: %v %s", err, out)
	}
	for _, args := range [][]string{
		{"addr", "add", p.HostIP + "/30", "dev", p.link},
		{"link", "set", p.link, "up"},
		{"-n", p.NS, "addr", "add", p.PeerIP + "/30", "dev", "peer"},
		{"-n", p.NS, "link", "set", "peer", "up"},
		{"-n", p.NS, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	return p
}

// Listen listens on TCP port (0 for any) at PeerIP, inside the
// namespace.
func (p *Pair) Listen(port int) (net.Listener, error) {
	return ListenIn(p.NS, net.JoinHostPort(p.PeerIP, fmt.Sprint(port)))
}

// ListenIn listens on TCP addr inside the named network namespace (ip
// netns): the socket is made on a thread that entered it, and the thread
// is never given back to the runtime (it exits with its goroutine), so no
// other goroutine ever runs in the namespace.
func ListenIn(ns, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		fd, err := unix.Open(filepath.Join("/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// lookPath finds a command on PATH or in the sbin directories, where
// Debian puts ip and where a non-login PATH may not look.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode()&0o111 != 0 {
			return filepath.Join(dir, name), nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH nor in the sbin directories", name)
}
