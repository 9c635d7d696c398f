package supervisor

import (
	"io"
	"net"
	"sync"

	"corral"
)

// Gateway is Corral's gateway (or its egress proxy) as a session reaches it: a port on the
// session's own loopback (Addr, such as 127.0.0.1:41300), each connection
// to which the supervisor joins to the server's gateway socket (Socket, a
// unix socket on the host). Nothing enters the sandbox but the port. Each
// joined connection starts with a line naming the session (Preamble), so
// the server accepts on it only the token of that session's own run: a
// token carried off to another sandbox is worth nothing there (see
// corral.GatewayPreamble). While the
// server is away, a connection is refused at once (closed), as a provider
// that is down would be: the CLIs retry.
type Gateway struct {
	Addr    string
	Socket  string
	Session string // the session's id: its run's
}

// serveGateway listens on the session's loopback and joins connections to
// the gateway until the session ends.
func (s *supervisor) serveGateway(g Gateway) error {
	ln, err := s.sess.Listen(g.Addr)
	if err != nil {
		return err
	}
	go func() {
		<-s.sess.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.joinGateway(c, g)
		}
	}()
	return nil
}

// joinGateway copies both ways between a session's connection and a new
// one to the gateway, until either side ends: nothing is buffered beyond
// the copy's own buffer, so a slow side slows the other (TCP pushes back).
func (s *supervisor) joinGateway(c net.Conn, g Gateway) {
	defer c.Close()
	up, err := dialUnix(g.Socket)
	if err != nil {
		s.log.Warn("gateway unreachable: the connection is refused", "err", err)
		return
	}
	defer up.Close()
	if _, err := io.WriteString(up, corral.GatewayPreamble(g.Session)); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(up, c)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}()
	io.Copy(c, up)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	wg.Wait()
}
