package api_test

import (
	"path/filepath"

	"corral/internal/workspace"
)

// unmountStages removes the staged trees under dataDir, with every mount
// they hold (the overlay, the run's disk): change sets a test left waiting
// keep theirs.
func unmountStages(dataDir string) {
	stages, _ := filepath.Glob(filepath.Join(dataDir, "stages", "*"))
	for _, st := range stages {
		workspace.RemoveStage(st)
	}
}
