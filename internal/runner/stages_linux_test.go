package runner_test

import (
	"path/filepath"
	"syscall"
)

// unmountStages detaches the overlay mounts of staged trees under dataDir,
// so that the temp dir holding them can be removed.
func unmountStages(dataDir string) {
	trees, _ := filepath.Glob(filepath.Join(dataDir, "stages", "*", "tree"))
	for _, tree := range trees {
		syscall.Unmount(tree, syscall.MNT_DETACH)
	}
}
