package poll

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a TB that remembers how the test would have ended.
type recorder struct{ failed string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestWithin(t *testing.T) {
	tests := []struct {
		name   string
		trueAt int32 // the check that first holds; 0 for never
		limit  time.Duration
		fail   string // what the failure says; "" for none
		checks int32  // how many checks, at least
	}{
		{name: "already true", trueAt: 1, limit: time.Minute, checks: 1},
		{name: "true later", trueAt: 5, limit: time.Minute, checks: 5},
		{name: "never", limit: 30 * time.Millisecond, fail: "for the thing", checks: 2},
		{name: "no time at all is still one check", trueAt: 1, limit: 0, checks: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			r := &recorder{}
			start := time.Now()
			Within(r, tt.limit, "the thing", func() bool { return n.Add(1) == tt.trueAt })
			if tt.fail == "" && r.failed != "" {
				t.Fatalf("Within failed: %s", r.failed)
			}
			if tt.fail != "" {
				if !strings.Contains(r.failed, tt.fail) || !strings.HasPrefix(r.failed, "waited ") {
					t.Fatalf("Within failed with %q, want it to say how long it waited %s", r.failed, tt.fail)
				}
				if waited := time.Since(start); waited < tt.limit {
					t.Errorf("Within gave up after %v, before its %v", waited, tt.limit)
				}
			}
			if got := n.Load(); got < tt.checks || (tt.trueAt > 0 && got != tt.trueAt) {
				t.Errorf("cond checked %d times, want %d", got, max(tt.checks, tt.trueAt))
			}
		})
	}
}

// TestPauses: the pause between checks grows to maxPause (a sleep is
// never shorter than asked, so this holds however loaded the machine).
func TestPauses(t *testing.T) {
	var n atomic.Int32
	var last time.Time
	var longest time.Duration
	Eventually(time.Minute, func() bool {
		now := time.Now()
		if !last.IsZero() {
			longest = max(longest, now.Sub(last))
		}
		last = now
		return n.Add(1) == 12 // 11 pauses: 1, 2, 4, 8, 16, then 20 ms
	})
	if longest < maxPause {
		t.Errorf("the longest pause was %v: the pause should grow to %v", longest, maxPause)
	}
}

// TestUntil: Until returns as soon as its condition holds.
func TestUntil(t *testing.T) {
	r := &recorder{}
	Until(r, "nothing", func() bool { return true })
	if r.failed != "" {
		t.Fatalf("Until(true) failed: %s", r.failed)
	}
}
