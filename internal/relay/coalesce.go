package relay

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"net"
	"net/http"
	"sync"
	"time"
)

// The node is the WebSocket's client, and RFC 6455 makes a client mask
// every byte it sends. coder/websocket masks through a fixed 4 KiB
// buffer and writes each 4 KiB to the connection as it goes: a 32 KiB
// yamux frame of output was nine system calls, and yamux writes each
// frame's 12-byte header as a message of its own. So on the node's side,
// what one message write puts on the connection is gathered and written
// at its end (coalescer), and a yamux data header travels in one message
// with its body (messages). Both are transparent to what reads: a yamux
// session reads a byte stream.

// coalescer is the node's connection under the WebSocket: writes made
// while a message is being written (held) are gathered and flushed when
// it ends; any other write (the HTTP handshake, a close frame) goes
// straight through, after what is gathered.
type coalescer struct {
	net.Conn
	mu   sync.Mutex
	w    *bufio.Writer
	held int
}

func newCoalescer(c net.Conn) *coalescer {
	co := &coalescer{Conn: c}
	co.w = bufio.NewWriterSize(c, 64<<10)
	return co
}

func (c *coalescer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held > 0 {
		return c.w.Write(p)
	}
	if err := c.w.Flush(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *coalescer) hold() {
	c.mu.Lock()
	c.held++
	c.mu.Unlock()
}

func (c *coalescer) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	return c.w.Flush()
}

// messages is the stream yamux writes to: each Write is one WebSocket
// message, gathered by the coalescer. A yamux data frame's header (12
// bytes, yamux's sendLoop writes it just before the frame's body) is kept
// back and sent with the write that follows it.
type messages struct {
	net.Conn // the WebSocket as a stream
	co       *coalescer
	header   []byte // a data header kept back
	buf      []byte
}

const yamuxHeader = 12

// dataHeader says whether p is a yamux data frame's header with a body to
// follow: version 0, type 0 (data), a length.
func dataHeader(p []byte) bool {
	return len(p) == yamuxHeader && p[0] == 0 && p[1] == 0 && binary.BigEndian.Uint32(p[8:12]) > 0
}

func (m *messages) Write(p []byte) (int, error) {
	if m.header == nil && dataHeader(p) {
		m.header = append(make([]byte, 0, yamuxHeader), p...)
		return len(p), nil
	}
	msg := p
	if m.header != nil {
		m.buf = append(append(m.buf[:0], m.header...), p...)
		msg, m.header = m.buf, nil
	}
	m.co.hold()
	n, err := m.Conn.Write(msg)
	if ferr := m.co.release(); err == nil {
		err = ferr
	}
	if n > len(p) || err == nil {
		n = len(p)
	}
	return n, err
}

// dialClient is the HTTP client the node dials control's WebSocket with:
// its connections (TLS ones too: the coalescer must sit above TLS, or
// each piece would still be a record and a system call) are coalescers,
// handed to onConn once made.
func dialClient(roots *x509.CertPool, onConn func(*coalescer)) *http.Client {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	wrap := func(c net.Conn) net.Conn {
		co := newCoalescer(c)
		onConn(co)
		return co
	}
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wrap(c), nil
		},
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			raw, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c := tls.Client(raw, &tls.Config{ServerName: host, RootCAs: roots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
			if err := c.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			return wrap(c), nil
		},
		TLSHandshakeTimeout: 10 * time.Second,
	}}
}
