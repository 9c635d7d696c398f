package relay

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"corral"
)

// ListenSocket listens on a Unix socket at path that only this user may
// connect to (mode 0600 from its creation, not chmod'ed after), replacing
// a stale one: the gateway's socket, on control in role all and on each
// node, where sessions' supervisors connect.
func ListenSocket(path string) (net.Listener, error) {
	dir, err := os.OpenFile(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, corral.Internal("gateway socket", err)
	}
	defer dir.Close()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, corral.Internal("gateway socket", err)
	}
	old := unix.Umask(0o177)
	ln, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path)))
	unix.Umask(old)
	if err != nil {
		return nil, corral.Internal("gateway socket", err)
	}
	// The listener would unlink by the /proc path it was bound with, which
	// is gone once dir is closed: leave the file for the next Listen.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}
