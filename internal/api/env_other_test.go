//go:build !linux

package api

// unmountStages has nothing to do where staging is not supported.
func unmountStages(string) {}
