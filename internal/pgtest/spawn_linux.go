package pgtest

import (
	"os/exec"
	"runtime"
	"sync"
)

// The server's programs are started from one thread kept for them alone.
// Pdeathsig is sent when the thread that started a child ends, not the
// process (go.dev/issue/27505), and the runtime ends a thread whenever a
// goroutine exits while locked to it, as code that enters a namespace
// does: started from any thread, the server could be killed in the middle
// of the tests. This goroutine locks its thread and never exits, so the
// thread ends with the binary and no sooner.
var (
	spawnOnce sync.Once
	spawns    chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// spawn starts cmd from the spawning thread; the caller waits for it as
// usual (Wait needs no particular thread).
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawns = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: see above
			for r := range spawns {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawns <- spawnRequest{cmd, done}
	return <-done
}
