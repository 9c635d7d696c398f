// Package poll is how a test waits for something another goroutine or
// process makes true: a run that ends, a file that appears, a count that
// reaches its mark. Every wait has a deadline, so a condition that never
// comes fails the test naming what it waited for, instead of hanging it
// until go test's own timeout.
//
// The deadline is a liveness bound, not a timing assertion: it is long
// (Patience unless told), and a test must never pass or fail by how fast
// the machine is. The condition is checked again after a short, growing
// pause, so a loaded machine is not asked to spin.
package poll

import (
	"time"
)

// Patience is how long Until waits: far longer than anything a test
// waits for takes even under CI's load.
const Patience = 2 * time.Minute

// The pause between two checks starts at firstPause and doubles up to
// maxPause: quick for what is nearly there, light on the machine for
// what takes seconds.
const (
	firstPause = time.Millisecond
	maxPause   = 20 * time.Millisecond
)

// TB is what Until needs of a test; *testing.T and *testing.B have it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Until waits up to Patience for cond to hold, and fails t naming what
// it waited for when it does not. cond runs on the caller's goroutine, so
// it may call t.Fatal itself.
func Until(t TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Patience, what, cond)
}

// Within is Until with a deadline of its own, limit from now.
func Within(t TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	if !Eventually(limit, cond) {
		t.Fatalf("waited %v for %s", time.Since(start).Round(time.Millisecond), what)
	}
}

// Eventually reports whether cond held within limit from now, for a
// caller that says more than Within would when it did not. cond is
// checked at least once, and once more at the deadline.
func Eventually(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	pause := firstPause
	for !cond() {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, maxPause)
	}
	return true
}
