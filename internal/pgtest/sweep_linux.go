package pgtest

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sweep removes from tmp the directories of servers whose test binary
// was killed (go test's timeout, a crash, ^C): Main never ran to remove
// them, and each holds some 40 MB, of memory when in /dev/shm. A
// directory is removed only when both the binary that made it and its
// postmaster are gone; one being made (no owner.pid yet), another
// user's or anything unreadable is left alone.
func sweep(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, dirPrefix+"*"))
	for _, dir := range dirs {
		owner := readPID(filepath.Join(dir, "owner.pid"))
		if owner <= 0 || alive(owner) {
			continue
		}
		if pm := readPID(filepath.Join(dir, "data", "postmaster.pid")); pm > 0 && alive(pm) {
			continue
		}
		os.RemoveAll(dir)
	}
}

// readPID reads the number on the first line of a pid file, or 0.
func readPID(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0
	}
	return pid
}

// alive reports whether a process pid may exist: only "no such process"
// counts as gone (one of another user's answers EPERM).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}
