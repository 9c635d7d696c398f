package node_test

import (
	"os"
	"testing"

	"corral/internal/nodetest"
	"corral/internal/supervisor"
)

// TestMain lets the test binary act as sessions' supervisors and the
// sandbox's init.
func TestMain(m *testing.M) {
	supervisor.Dispatch()
	os.Exit(m.Run())
}

// TestConformance: node.Local passes the suite every implementation of
// corral.Trees and corral.Sessions passes.
func TestConformance(t *testing.T) {
	nodetest.Run(t, nodetest.LocalSubject)
}
