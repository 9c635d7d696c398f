//go:build linux

package vethtest

import (
	"io"
	"net"
	"testing"
)

// TestPair: a listener made in the namespace is reached at PeerIP from
// the test's namespace, over the link, and is not listening in the
// test's own namespace (its address is not even there).
func TestPair(t *testing.T) {
	p := New(t)
	l, err := p.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		io.WriteString(c, "from the namespace")
		c.Close()
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if local := c.LocalAddr().(*net.TCPAddr).IP.String(); local != p.HostIP {
		t.Fatalf("the connection left from %s, want the link's end %s", local, p.HostIP)
	}
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "from the namespace" {
		t.Fatalf("read %q, %v", b, err)
	}
	if l, err := net.Listen("tcp", net.JoinHostPort(p.PeerIP, "0")); err == nil {
		l.Close()
		t.Fatalf("the namespace's address %s is in the test's namespace too", p.PeerIP)
	}
}
