// Package kerneltest is how a test says it cannot run on this machine for
// want of a kernel feature, root, cgroups, overlayfs, Landlock, seccomp,
// user namespaces or a loop device. Where those are expected (CI sets
// CORRAL_REQUIRE_KERNEL=1), the same reason fails the test instead: a
// sandbox test that silently skips in CI proves nothing.
//
// Skips for other reasons (a missing tool, another architecture, a host
// file or listener) stay plain t.Skip: CI cannot be asked to have those.
package kerneltest

import "os"

// Env is the variable that turns these skips into failures.
const Env = "CORRAL_REQUIRE_KERNEL"

// TB is what Skip needs of a test; *testing.T and *testing.B have it.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Required reports whether this run must have every kernel feature. It is
// read from the environment here, not in cmd/, because it configures the
// test binary, not Corral.
func Required() bool { return os.Getenv(Env) == "1" }

// Skip skips t with the reason, or fails it with the same reason when
// Required.
func Skip(t TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf(format+" ("+Env+"=1: this machine must be able to run it)", args...)
		return
	}
	t.Skipf(format, args...)
}
