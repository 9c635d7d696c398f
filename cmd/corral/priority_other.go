//go:build !linux

package main

// lowerPriority does nothing here: a backup runs at the priority it was
// started with (start it with nice).
func lowerPriority() {}
