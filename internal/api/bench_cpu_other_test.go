//go:build !unix

package api_test

import "time"

// processCPU is unknown here: the CPU metrics of the benchmarks read 0 (or
// NaN for their ratio).
func processCPU() time.Duration { return 0 }
