package api_test

import (
	"os"
	"testing"

	"corral/internal/pgtest"
	"corral/internal/supervisor"
)

// TestMain lets the test binary act as the sandbox's init: runs re-execute
// it with sandbox.InitArg.
func TestMain(m *testing.M) {
	supervisor.Dispatch() // the sandbox's init and sessions' supervisors

	os.Exit(pgtest.Main(m)) // a PostgreSQL server, for the tests that ask for one
}
