package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
)

// dumpHeapOnSignal makes this process (the test binary acting as corral)
// write its heap to path on each SIGUSR1: the objects still reachable
// after two collections (the second empties sync.Pools' victim caches),
// the goroutines' live frames and the data segments, in the runtime's
// own format. A test scans the file for a secret; it then reads exactly
// what the process can still reach, and nothing that was freed. Only the
// test binary has this; corral itself never dumps its heap.
func dumpHeapOnSignal(path string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			runtime.GC()
			runtime.GC()
			f, err := os.OpenFile(path+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err == nil {
				debug.WriteHeapDump(f.Fd())
				err = f.Close()
			}
			if err == nil {
				err = os.Rename(path+".tmp", path)
			}
			fmt.Fprintf(os.Stderr, "test: heap dumped to %s: %v\n", path, err)
		}
	}()
}
