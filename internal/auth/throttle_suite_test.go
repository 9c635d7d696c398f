package auth_test

import (
	"testing"

	"corral/internal/auth"
	"corral/internal/auth/throttletest"
)

// TestMemoryThrottle runs the throttle's scenarios on the state a server
// alone keeps in its memory.
func TestMemoryThrottle(t *testing.T) {
	throttletest.Run(t, func(*testing.T) auth.ThrottleState { return auth.NewMemoryThrottleState(0) })
}
