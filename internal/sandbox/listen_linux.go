package sandbox

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"corral"
)

// Listen opens a TCP listener at addr (a loopback address) on the
// session's own network, held by the caller, outside the sandbox: what a
// command of the session connects to at addr reaches whoever accepts.
// This is how a session reaches Corral's gateway and nothing else: no
// socket file, no route and no device enters the sandbox, only a port on
// its loopback that the caller serves. The socket is made by a thread
// that enters the session's network namespace for that one call; the
// thread goes back to this process's namespace, or is thrown away.
func (s *Session) Listen(addr string) (net.Listener, error) {
	if s.Ended() {
		return nil, corral.Errorf(corral.EUNAVAIL, "the session has ended")
	}
	ip, _, err := net.SplitHostPort(addr)
	if err != nil || !net.ParseIP(ip).IsLoopback() {
		return nil, corral.Errorf(corral.EINVALID, "a session listens only on its loopback, not %q", addr)
	}
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", s.cmd.Process.Pid))
	if err != nil {
		return nil, corral.Internal("session listener", err)
	}
	defer target.Close()
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer own.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("enter the session's network: %w", err)}
			return
		}
		// socket(2) runs on this thread: the listener belongs to the
		// session's network for good, wherever it is used from.
		ln, err := net.Listen("tcp", addr)
		if uerr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); uerr == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and ends with this goroutine
		done <- result{ln, err}
	}()
	r := <-done
	if r.err != nil {
		return nil, corral.Internal("session listener", r.err)
	}
	return r.ln, nil
}
