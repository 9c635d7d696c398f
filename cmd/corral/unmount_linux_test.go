package main

import (
	"os"
	"path/filepath"
	"syscall"

	"corral/internal/supervisor"
	"corral/internal/workspace"
)

// endSessions kills the supervisors of the sessions under data, and with
// them their sandboxes.
func endSessions(data string) {
	dirs, _ := filepath.Glob(filepath.Join(data, "sessions", "*"))
	for _, d := range dirs {
		if st, err := supervisor.ReadState(d); err == nil && st.PID > 0 {
			if _, err := os.Stat(filepath.Join(d, "sock")); err == nil {
				syscall.Kill(st.PID, syscall.SIGKILL)
			}
		}
	}
}

// unmountStages removes the staged trees under data, with every mount they
// hold (the overlay, the run's disk): change sets waiting for review keep
// theirs.
func unmountStages(data string) {
	stages, _ := filepath.Glob(filepath.Join(data, "stages", "*"))
	for _, st := range stages {
		workspace.RemoveStage(st)
	}
}
