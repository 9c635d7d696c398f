package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"corral"
)

// control is a test control: it accepts nodes presenting "Bearer good".
type control struct {
	srv      *httptest.Server
	sessions chan *Session
}

func newControl(t testing.TB, cfg Config) *control {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return newControlOn(t, ln, cfg)
}

// newControlOn is newControl serving on ln.
func newControlOn(t testing.TB, ln net.Listener, cfg Config) *control {
	t.Helper()
	c := &control{sessions: make(chan *Session, 4)}
	auth := func(r *http.Request) (string, error) {
		if r.Header.Get("Authorization") != "Bearer good" {
			return "", corral.Errorf(corral.EUNAUTH, "not a node")
		}
		return "node-1", nil
	}
	c.srv = httptest.NewUnstartedServer(Handler(auth, func(id string, s *Session) {
		if id != "node-1" {
			t.Errorf("accepted as %q", id)
		}
		c.sessions <- s
	}, cfg))
	c.srv.Listener.Close()
	c.srv.Listener = ln
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *control) url() string { return "ws" + strings.TrimPrefix(c.srv.URL, "http") }

func (c *control) next(t *testing.T) *Session {
	t.Helper()
	select {
	case s := <-c.sessions:
		t.Cleanup(func() { s.Close() })
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no node connected")
		return nil
	}
}

func dial(t *testing.T, url, credential string, cfg Config) *Session {
	t.Helper()
	s, err := Dial(context.Background(), url, http.Header{"Authorization": {"Bearer " + credential}}, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// echo answers every stream s accepts with what it reads.
func echo(s *Session) {
	for {
		c, err := s.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}

func roundTrip(t *testing.T, from *Session, msg string) {
	t.Helper()
	c, err := from.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo = %q, %v, want %q", got, err, msg)
	}
}

// TestStreamsBothWays: either end opens streams on the one connection,
// many at once.
func TestStreamsBothWays(t *testing.T) {
	ctl := newControl(t, Config{})
	node := dial(t, ctl.url(), "good", Config{})
	ctlEnd := ctl.next(t)
	go echo(node)
	go echo(ctlEnd)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); roundTrip(t, ctlEnd, strings.Repeat("to the node ", 1000)) }()
		go func() { defer wg.Done(); roundTrip(t, node, "to control") }()
	}
	wg.Wait()
}

// TestRefusesUnknownNodes: a wrong credential is answered 401, and
// nothing is upgraded or handed on.
func TestRefusesUnknownNodes(t *testing.T) {
	ctl := newControl(t, Config{})
	for _, cred := range []string{"bad", ""} {
		_, err := Dial(context.Background(), ctl.url(), http.Header{"Authorization": {"Bearer " + cred}}, Config{})
		if corral.ErrorCode(err) != corral.EUNAUTH {
			t.Errorf("credential %q: %v, want EUNAUTH", cred, err)
		}
	}
	select {
	case <-ctl.sessions:
		t.Fatal("a refused node got a session")
	default:
	}
}

// TestBackpressure: a reader that does not read stops its writer after at
// most one window, on the far side of the connection: nothing in between
// buffers the rest. Once it reads, every byte arrives, in order.
func TestBackpressure(t *testing.T) {
	cfg := Config{Window: 256 << 10}
	ctl := newControl(t, cfg)
	node := dial(t, ctl.url(), "good", cfg)
	ctlEnd := ctl.next(t)

	const total = 64 << 20
	payload := make([]byte, total)
	rand.Read(payload)
	var written atomic.Int64
	done := make(chan error, 1)
	go func() {
		c, err := ctlEnd.Open(context.Background())
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		for off := 0; off < total; off += 4 << 10 {
			n, err := c.Write(payload[off : off+4<<10])
			written.Add(int64(n))
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	reader, err := node.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	// Give a writer that is not held back ample time to run away: 64 MiB
	// over loopback takes well under this.
	time.Sleep(time.Second)
	if w := written.Load(); w > int64(cfg.Window)+4<<10 {
		t.Fatalf("the writer got %d bytes out while nobody read: more than one window (%d)", w, cfg.Window)
	}
	h := sha256.New()
	if n, err := io.CopyN(h, reader, total); err != nil || n != total {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(payload); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("the bytes that arrived are not the bytes sent")
	}
}

// proxy forwards TCP between a node and control until frozen: then it
// forwards nothing more, in either direction, and keeps both sockets open,
// as a partition or a dead host does.
type proxy struct {
	ln     net.Listener
	frozen chan struct{}
	once   sync.Once
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, frozen: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			t.Cleanup(func() { in.Close(); out.Close() })
			go p.pipe(in, out)
			go p.pipe(out, in)
		}
	}()
	return p
}

func (p *proxy) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-p.frozen:
			return // hold both sockets, forward nothing
		default:
		}
		if _, err := to.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (p *proxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

// TestDeadPeerNoticed: when the path between the ends goes silent (no
// FIN, no RST: a partition), each end's heartbeat finds out, and the
// session ends, within Heartbeat + Timeout of the defaults: a dead node
// is noticed within 10 s.
func TestDeadPeerNoticed(t *testing.T) {
	ctl := newControl(t, Config{})
	p := newProxy(t, strings.TrimPrefix(ctl.srv.URL, "http://"))
	node := dial(t, "ws://"+p.ln.Addr().String(), "good", Config{})
	ctlEnd := ctl.next(t)
	go echo(node)
	roundTrip(t, ctlEnd, "alive")

	p.freeze()
	deadline := time.After(10 * time.Second)
	for name, s := range map[string]*Session{"control": ctlEnd, "node": node} {
		select {
		case <-s.Done():
		case <-deadline:
			t.Fatalf("%s's end did not notice the dead peer within 10 s", name)
		}
	}
	if _, err := ctlEnd.Open(context.Background()); corral.ErrorCode(err) != corral.EUNAVAIL {
		t.Fatalf("open on a dead relay: %v, want EUNAVAIL", err)
	}
}

// TestCloseEndsStreams: closing one end ends the other's streams and its
// Accept.
func TestCloseEndsStreams(t *testing.T) {
	ctl := newControl(t, Config{})
	node := dial(t, ctl.url(), "good", Config{})
	ctlEnd := ctl.next(t)
	c, err := ctlEnd.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := node.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ctlEnd.Close()
	if _, err := io.ReadAll(nc); err != nil && !IsGone(err) {
		t.Fatalf("a stream of a closed relay read: %v", err)
	}
	if _, err := node.Accept(); !IsGone(err) {
		t.Fatalf("accept on a closed relay: %v", err)
	}
	c.Close()
}

// TestOverTLS: a node dials a wss:// control it trusts by RootCAs, and
// streams carry bytes both ways, in order, over the TLS connection (the
// node's writes gathered above TLS); a control it does not trust is
// refused.
func TestOverTLS(t *testing.T) {
	sessions := make(chan *Session, 1)
	srv := httptest.NewTLSServer(Handler(func(*http.Request) (string, error) { return "node-1", nil },
		func(_ string, s *Session) { sessions <- s }, Config{}))
	defer srv.Close()
	url := "wss" + strings.TrimPrefix(srv.URL, "https")
	if _, err := Dial(context.Background(), url, nil, Config{}); err == nil {
		t.Fatal("a control whose certificate nobody vouches for was dialled")
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	node, err := Dial(context.Background(), url, nil, Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	var ctl *Session
	select {
	case ctl = <-sessions:
	case <-time.After(10 * time.Second):
		t.Fatal("no node connected")
	}
	defer ctl.Close()
	const size = 8 << 20
	done := make(chan error, 1)
	go func() {
		c, err := ctl.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		if err == nil {
			for i, x := range b {
				if x != byte(i%251) {
					err = fmt.Errorf("byte %d is %d, want %d", i, x, i%251)
					break
				}
			}
			if len(b) != size {
				err = fmt.Errorf("got %d bytes, want %d", len(b), size)
			}
		}
		done <- err
	}()
	c, err := node.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(i % 251)
	}
	for off := 0; off < size; off += 32 << 10 {
		if _, err := c.Write(p[off : off+32<<10]); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
