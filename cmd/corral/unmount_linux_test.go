package main

import (
	"path/filepath"

	"corral/internal/workspace"
)

// unmountStages removes the staged trees under data, with every mount they
// hold (the overlay, the run's disk): change sets waiting for review keep
// theirs.
func unmountStages(data string) {
	stages, _ := filepath.Glob(filepath.Join(data, "stages", "*"))
	for _, st := range stages {
		workspace.RemoveStage(st)
	}
}
