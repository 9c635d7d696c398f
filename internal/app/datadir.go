package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is the data directory's lock: whoever holds an exclusive flock
// on it is the one server of that directory.
const lockFile = "corral.lock"

// errDataDirInUse says another server holds the data directory.
var errDataDirInUse = errors.New("data directory in use")

// dataLock is the held lock of a data directory.
type dataLock struct{ f *os.File }

// lockDataDir takes the exclusive lock of the data directory, creating the
// directory and the lock file when missing, and records this process's pid
// in it for the next one's error message. It never waits: a second server
// gets errDataDirInUse at once, naming the holder's pid when it can.
//
// The lock is an flock on an open file, so the kernel drops it when the
// process dies however it dies (no stale lock to clean after a crash). The
// descriptor is close-on-exec: the sandbox's init, a child of the server,
// never inherits it, so a lingering child cannot keep a dead server's lock.
func lockDataDir(data string) (*dataLock, error) {
	if err := os.MkdirAll(data, 0o711); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	name := filepath.Join(data, lockFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := ""
			if b, rerr := os.ReadFile(name); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
					holder = fmt.Sprintf(" (pid %d)", pid)
				}
			}
			return nil, fmt.Errorf("%w: another corral serve%s is using %s; stop it first, or give this one another --data",
				errDataDirInUse, holder, data)
		}
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	// Only the holder writes: the pid is for the message above, never a
	// lock in itself.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataLock{f: f}, nil
}

// release drops the lock. Closing the file is what releases it.
func (l *dataLock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
	}
}

// LockFile is the name of the data directory's lock file.
const LockFile = lockFile

// LockData takes the data directory's lock as a server does, for a command
// that must have the directory to itself while it writes it (corral
// restore): a server started meanwhile exits at once, as a second server
// would.
func LockData(data string) (release func(), err error) {
	l, err := lockDataDir(data)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}
