package runner_test

import (
	"os"
	"testing"

	"corral/internal/sandbox"
)

// TestMain lets the test binary act as the sandbox's init: tool calls
// re-execute it with sandbox.InitArg.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitArg {
		sandbox.Init() // never returns
	}
	os.Exit(m.Run())
}
