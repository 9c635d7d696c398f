package main

import (
	"os"
	"strconv"
	"syscall"
)

// backupNice is the niceness `corral backup` runs at: the server and its
// runs come first for the CPU (compressing a large store would otherwise
// take a core from them).
const backupNice = 10

// lowerPriority makes this process nice. On Linux a niceness belongs to a
// thread, so every thread the runtime has is made nice; the threads it
// makes later are made by these, and inherit it.
func lowerPriority() {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, task := range tasks {
		if tid, err := strconv.Atoi(task.Name()); err == nil {
			syscall.Setpriority(syscall.PRIO_PROCESS, tid, backupNice)
		}
	}
}
