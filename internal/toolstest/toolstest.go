// Package toolstest is how a test finds the agent CLIs (Codex, Claude
// Code, OpenCode) that make tools installs, and how it says it cannot run
// without them. Where they are expected (CI sets CORRAL_REQUIRE_TOOLS=1,
// and make test installs them first), a missing CLI fails the test
// instead: a test of the agent CLIs that silently skips in CI proves
// nothing. It is the rule package kerneltest keeps for kernel features.
//
// It does not import package driver, whose own tests use it: a caller
// hands Need what driver.Installed answered.
package toolstest

import (
	"fmt"
	"os"
)

const (
	// DirEnv names the directory make tools installs the CLIs into.
	DirEnv = "CORRAL_TOOLS_DIR"
	// Env is the variable that turns a skip for want of them into a
	// failure.
	Env = "CORRAL_REQUIRE_TOOLS"
)

// TB is what Need needs of a test; *testing.T and *testing.B have it.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Required reports whether this run must have the agent CLIs. It is read
// from the environment here, not in cmd/, because it configures the test
// binary, not Corral.
func Required() bool { return os.Getenv(Env) == "1" }

// Dir is the directory the CLIs are installed in, "" when none is named.
func Dir() string { return os.Getenv(DirEnv) }

// Need skips t when missing, the answer of driver.Installed (or of
// another check that the CLIs are there), is not nil, or fails t with it
// when Required. It does nothing when missing is nil.
func Need(t TB, missing error) {
	t.Helper()
	if missing == nil {
		return
	}
	Skip(t, "%v", missing)
}

// Skip skips t with the reason, or fails it with the same reason when
// Required.
func Skip(t TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (%s=1: this machine must have the agent CLIs; make tools installs them)", fmt.Sprintf(format, args...), Env)
		return
	}
	t.Skipf(format, args...)
}
