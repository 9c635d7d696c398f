package main

import (
	"path/filepath"
	"syscall"
)

// unmountStages detaches the overlay mounts of staged trees under data:
// change sets waiting for review keep theirs.
func unmountStages(data string) {
	trees, _ := filepath.Glob(filepath.Join(data, "stages", "*", "tree"))
	for _, tree := range trees {
		syscall.Unmount(tree, syscall.MNT_DETACH)
	}
}
