//go:build unix

package netguard

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// RaiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit and returns
// the soft limit now in force. The Go runtime normally did it already at
// start (to one below the hard limit, and it gives child processes back the
// original soft limit); only when it did not, because something lowered the
// limit since, is it set here, and then children inherit the raised limit
// (the sandbox's init sets its own).
func RaiseFileLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur+1 < lim.Max {
		raised := unix.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err != nil {
			return lim.Cur, fmt.Errorf("raise RLIMIT_NOFILE from %d to %d: %w", lim.Cur, lim.Max, err)
		}
		lim = raised
	}
	return lim.Cur, nil
}
