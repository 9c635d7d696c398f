package sandbox

// The init's side of a session: once the root is built and the init
// confined, it serves the parent's requests on the control socket. Each
// exec request brings the command's stdin and output as descriptors; the
// init forks the command from its locked thread (so the command gets the
// init's confinement, bounding set included), reports its start, reaps it
// and every orphan, and reports its exit. When the parent goes away the
// init kills everything in the sandbox and ends.

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// request is one message from the parent. An exec brings three
// descriptors: the command's stdin, stdout and stderr.
type request struct {
	Op     string   `json:"op"` // "exec", "signal", or "terminate" (SIGTERM to every process)
	ID     uint64   `json:"id"`
	Argv   []string `json:"argv,omitempty"`
	Env    []string `json:"env,omitempty"`
	Dir    string   `json:"dir,omitempty"`
	TTY    bool     `json:"tty,omitempty"`    // exec: stdin is the command's controlling terminal
	Signal int      `json:"signal,omitempty"` // signal: sent to the process group of command ID
}

// reply is one message from the init.
type reply struct {
	Op     string `json:"op"` // "ready", "error", "started", "exit"
	ID     uint64 `json:"id,omitempty"`
	Code   int    `json:"code,omitempty"`
	Signal string `json:"signal,omitempty"`
	Error  string `json:"error,omitempty"`
}

// maxRequest bounds one request. One argument cannot be over 128 KiB
// anyway (the kernel's MAX_ARG_STRLEN).
const maxRequest = 192 << 10

// sendMu serialises the init's replies from its two threads.
var sendMu sync.Mutex

func sendReply(r reply) {
	b, _ := json.Marshal(r)
	sendMu.Lock()
	defer sendMu.Unlock()
	unix.Sendmsg(fdCtl, b, nil, nil, 0)
}

// serve answers the parent's requests until it goes away.
func serve() error {
	var mu sync.Mutex
	cmds := map[int]uint64{} // running commands: pid to request id
	forked := make(chan struct{}, 1)
	go reap(&mu, cmds, forked)
	sendReply(reply{Op: "ready"})

	buf := make([]byte, maxRequest)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fdCtl, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			break // the parent is gone: so is the session
		}
		fds := receivedFDs(oob[:oobn])
		var req request
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			closeAll(fds)
			sendReply(reply{Op: "error", Error: "bad request"})
			continue
		}
		switch req.Op {
		case "exec":
			if len(fds) != 3 {
				closeAll(fds)
				sendReply(reply{Op: "exit", ID: req.ID, Code: 126, Error: "exec needs stdin, stdout and stderr"})
				continue
			}
			start(&mu, cmds, forked, req, fds[0], fds[1], fds[2])
			closeAll(fds)
		case "terminate":
			closeAll(fds)
			// -1: every process the init may signal, which inside this PID
			// namespace is every process but the init itself.
			syscall.Kill(-1, syscall.SIGTERM)
		case "signal":
			closeAll(fds)
			mu.Lock()
			for pid, id := range cmds {
				if id == req.ID {
					syscall.Kill(-pid, syscall.Signal(req.Signal))
				}
			}
			mu.Unlock()
		default:
			closeAll(fds)
		}
	}
	syscall.Kill(-1, syscall.SIGKILL)
	return nil
}

// start forks one command, and wakes the reaper up (forked) once it runs. It
// runs on the init's locked thread.
func start(mu *sync.Mutex, cmds map[int]uint64, forked chan<- struct{}, req request, stdin, stdout, stderr int) {
	if len(req.Argv) == 0 {
		sendReply(reply{Op: "exit", ID: req.ID, Code: 126, Error: "no command"})
		return
	}
	argv0, err := lookPath(req.Argv[0], req.Env)
	if err != nil {
		unix.Write(stderr, []byte(fmt.Sprintf("corral sandbox: %s: command not found\n", req.Argv[0])))
		sendReply(reply{Op: "exit", ID: req.ID, Code: 127})
		return
	}
	dir := req.Dir
	if dir == "" {
		dir = insideWorkspace
	}
	// The lock covers the fork and the record, so the reaper, which takes
	// it before it looks a pid up, cannot miss this command's exit.
	mu.Lock()
	pid, err := syscall.ForkExec(argv0, req.Argv, &syscall.ProcAttr{
		Dir:   dir,
		Env:   req.Env,
		Files: []uintptr{uintptr(stdin), uintptr(stdout), uintptr(stderr)},
		// Its own session and process group, which a signal request
		// reaches whole; a terminal becomes its controlling terminal.
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: req.TTY, Ctty: 0},
	})
	if err == nil {
		cmds[pid] = req.ID
		select {
		case forked <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	mu.Unlock()
	if err != nil {
		unix.Write(stderr, []byte(fmt.Sprintf("corral sandbox: %s: %v\n", req.Argv[0], err)))
		sendReply(reply{Op: "exit", ID: req.ID, Code: 126})
		return
	}
	sendReply(reply{Op: "started", ID: req.ID})
}

// reap waits for every process that ends in the sandbox (commands and the
// orphans reparented to the init) and reports the commands' exits. It
// blocks in wait4. When the init has no child at all (ECHILD), no process
// is left in the sandbox, and it sleeps until the next command is forked:
// forked holds a wake-up for a fork made while it was not looking.
func reap(mu *sync.Mutex, cmds map[int]uint64, forked <-chan struct{}) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			<-forked
			continue
		}
		mu.Lock()
		id, ok := cmds[pid]
		delete(cmds, pid)
		mu.Unlock()
		if !ok {
			continue // an orphan
		}
		r := reply{Op: "exit", ID: id}
		switch {
		case ws.Exited():
			r.Code = ws.ExitStatus()
		case ws.Signaled():
			r.Code, r.Signal = 128+int(ws.Signal()), unix.SignalName(ws.Signal())
		}
		sendReply(r)
	}
}

func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
