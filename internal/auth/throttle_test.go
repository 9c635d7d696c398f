package auth

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The throttle's decisions are tested by internal/auth/throttletest,
// against this package's MemoryThrottleState (throttle_suite_test.go) and
// the store's; here are the defaults and the memory state's bound.

// fakeClock is the injected clock: tests move it, never sleep.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// memThrottle is a Throttle on a MemoryThrottleState, with both at hand;
// its methods fail the test on an error, which the memory never returns.
type memThrottle struct {
	*Throttle
	t   *testing.T
	mem *MemoryThrottleState
}

func newMemThrottle(t *testing.T, cfg ThrottleConfig) *memThrottle {
	mem := NewMemoryThrottleState(cfg.MaxKeys)
	cfg.State = mem
	return &memThrottle{Throttle: NewThrottle(cfg), t: t, mem: mem}
}

func (th *memThrottle) allow(keys ...string) (time.Duration, bool) {
	th.t.Helper()
	retry, ok, err := th.Allow(context.Background(), keys...)
	if err != nil {
		th.t.Fatalf("Allow(%q): %v", keys, err)
	}
	return retry, ok
}

func (th *memThrottle) allowed(keys ...string) bool {
	th.t.Helper()
	_, ok := th.allow(keys...)
	return ok
}

func (th *memThrottle) fail(keys ...string) {
	th.t.Helper()
	if err := th.Fail(context.Background(), keys...); err != nil {
		th.t.Fatalf("Fail(%q): %v", keys, err)
	}
}

func (th *memThrottle) succeed(keys ...string) {
	th.t.Helper()
	if err := th.Succeed(context.Background(), keys...); err != nil {
		th.t.Fatalf("Succeed(%q): %v", keys, err)
	}
}

func TestNewThrottleDefaults(t *testing.T) {
	th := NewThrottle(ThrottleConfig{})
	mem, ok := th.state.(*MemoryThrottleState)
	if th.free != 5 || th.base != time.Second || th.max != 15*time.Minute || th.cap != 100 || !ok || mem.maxKeys != 100_000 {
		t.Fatalf("NewThrottle(zero config) = free %d, base %v, max %v, cap %d, state %T; want 5, 1s, 15m, 100, a memory of 100000 keys",
			th.free, th.base, th.max, th.cap, th.state)
	}
	// With the real clock: a fresh key is allowed, five failures lock it.
	ctx := context.Background()
	const k = "acct:someone@example.com"
	if _, ok, err := th.Allow(ctx, k); !ok || err != nil {
		t.Fatalf("Allow(fresh key) = %v, %v; want allowed", ok, err)
	}
	if err := th.Fail(ctx, k, k, k, k, k); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := th.Allow(ctx, k); ok {
		t.Errorf("Allow after 5 failures with the real clock = ok, want locked")
	}
}

func TestCeilMillis(t *testing.T) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		t    time.Time
		want int64
	}{
		{"whole", base, base.UnixMilli()},
		{"1ns past", base.Add(time.Nanosecond), base.UnixMilli() + 1},
		{"1ms less 1ns", base.Add(time.Millisecond - time.Nanosecond), base.UnixMilli() + 1},
		{"1ms", base.Add(time.Millisecond), base.UnixMilli() + 1},
	}
	for _, tt := range tests {
		if got := ceilMillis(tt.t); got != tt.want {
			t.Errorf("ceilMillis(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestThrottleEvictionBound(t *testing.T) {
	for _, maxKeys := range []int{1, 2, 16, 100, 1000} {
		t.Run(fmt.Sprint(maxKeys), func(t *testing.T) {
			clock := newFakeClock()
			th := newMemThrottle(t, ThrottleConfig{Now: clock.Now, MaxKeys: maxKeys})
			for i := range 10 * maxKeys {
				th.fail(fmt.Sprintf("addr:%d", i))
				if n := th.mem.Len(); n > maxKeys {
					t.Fatalf("after %d keys: Len() = %d, want at most %d", i+1, n, maxKeys)
				}
				clock.Advance(time.Millisecond)
			}
		})
	}
}

func TestThrottleEvictsStaleFirst(t *testing.T) {
	clock := newFakeClock()
	th := newMemThrottle(t, ThrottleConfig{Now: clock.Now, MaxKeys: 100, FreeFailures: 1})
	for i := range 50 {
		th.fail(fmt.Sprintf("old:%d", i))
	}
	clock.Advance(2 * time.Hour) // their locks and failures are past
	for i := range 50 {
		th.fail(fmt.Sprintf("new:%d", i))
	}
	if n := th.mem.Len(); n != 100 {
		t.Fatalf("Len() = %d, want 100", n)
	}
	th.fail("x")
	if n := th.mem.Len(); n != 51 {
		t.Errorf("Len() after the sweep = %d, want 51", n)
	}
	for i := range 50 {
		k := fmt.Sprintf("new:%d", i)
		if retry, ok := th.allow(k); ok || retry != time.Second {
			t.Fatalf("Allow(%s) = %v, %v; want 1s, false: its lock was evicted", k, retry, ok)
		}
	}
}

func TestThrottleEvictsLeastRecentlyActive(t *testing.T) {
	clock := newFakeClock()
	// Locks last an hour, so every entry matters and the sweep frees none.
	th := newMemThrottle(t, ThrottleConfig{Now: clock.Now, MaxKeys: 100, FreeFailures: 1, BaseDelay: time.Hour})
	for i := range 100 {
		th.fail(fmt.Sprintf("k:%d", i))
		clock.Advance(time.Second)
	}
	th.succeed("k:0") // k:0 is now the most recently active
	clock.Advance(time.Second)
	th.fail("x")
	// 100 - 100/16 = 94 kept, then x.
	if n := th.mem.Len(); n != 95 {
		t.Errorf("Len() = %d, want 95", n)
	}
	if th.allowed("k:0") {
		t.Errorf("k:0, active recently, was evicted")
	}
	for i := 1; i <= 6; i++ {
		if !th.allowed(fmt.Sprintf("k:%d", i)) {
			t.Errorf("k:%d, among the least recently active, was kept", i)
		}
	}
	for i := 7; i < 100; i++ {
		if th.allowed(fmt.Sprintf("k:%d", i)) {
			t.Errorf("k:%d was evicted, want only k:1..k:6", i)
		}
	}
}

func TestThrottleSucceedKeepsNothingNew(t *testing.T) {
	th := newMemThrottle(t, ThrottleConfig{})
	th.allowed("a")
	th.succeed("a", "b")
	if n := th.mem.Len(); n != 0 {
		t.Errorf("Len() after Allow and Succeed of keys without failures = %d, want 0", n)
	}
}

func TestThrottleConcurrent(t *testing.T) {
	clock := newFakeClock()
	th := newMemThrottle(t, ThrottleConfig{Now: clock.Now, MaxKeys: 50})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprintf("k:%d", (g*7+i)%80)
				if _, ok, _ := th.Allow(ctx, k, "addr:shared"); ok {
					th.Fail(ctx, k, "addr:shared")
				}
				if i%10 == 0 {
					th.Succeed(ctx, k)
					clock.Advance(time.Second)
				}
				if n := th.mem.Len(); n > 50 {
					t.Errorf("Len() = %d, want at most 50", n)
					return
				}
			}
		})
	}
	wg.Wait()
}
