//go:build !linux

package main

func unmountStages(string) {}
