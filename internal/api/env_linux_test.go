package api

import (
	"path/filepath"
	"syscall"
)

// unmountStages detaches the overlay mounts of staged trees under dataDir.
func unmountStages(dataDir string) {
	trees, _ := filepath.Glob(filepath.Join(dataDir, "stages", "*", "tree"))
	for _, tree := range trees {
		syscall.Unmount(tree, syscall.MNT_DETACH)
	}
}
