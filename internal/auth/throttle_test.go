package auth

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

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

// wantAllow checks Allow(keys...): ok when wait is 0, else locked for wait.
func wantAllow(t *testing.T, th *Throttle, wait time.Duration, keys ...string) {
	t.Helper()
	retry, ok := th.Allow(keys...)
	if wait == 0 && (!ok || retry != 0) {
		t.Fatalf("Allow(%q) = %v, %v; want 0, true", keys, retry, ok)
	}
	if wait != 0 && (ok || retry != wait) {
		t.Fatalf("Allow(%q) = %v, %v; want %v, false", keys, retry, ok, wait)
	}
}

func TestNewThrottleDefaults(t *testing.T) {
	th := NewThrottle(ThrottleConfig{})
	if th.free != 5 || th.base != time.Second || th.max != 15*time.Minute || th.cap != 100 || th.maxKeys != 100_000 {
		t.Errorf("NewThrottle(zero config) = free %d, base %v, max %v, cap %d, maxKeys %d; want 5, 1s, 15m, 100, 100000",
			th.free, th.base, th.max, th.cap, th.maxKeys)
	}
	// With the real clock: a fresh key is allowed, five failures lock it.
	const k = "acct:someone@example.com"
	wantAllow(t, th, 0, k)
	th.Fail(k, k, k, k, k)
	if _, ok := th.Allow(k); ok {
		t.Errorf("Allow after 5 failures with the real clock = ok, want locked")
	}
}

func TestThrottleBackoff(t *testing.T) {
	const k = "acct:victim@example.com"
	clock := newFakeClock()
	th := NewThrottle(ThrottleConfig{Now: clock.Now})
	type step struct {
		name    string
		do      func()
		wantRet time.Duration // Allow afterwards: 0 means allowed
	}
	fail := func() { th.Fail(k) }
	wait := func(d time.Duration) func() { return func() { clock.Advance(d) } }
	steps := []step{
		{"fresh", func() {}, 0},
		{"failure 1", fail, 0},
		{"failure 2", fail, 0},
		{"failure 3", fail, 0},
		{"failure 4", fail, 0},
		{"failure 5 locks 1s", fail, time.Second},
		{"999ms later, rounded up", wait(999 * time.Millisecond), time.Second},
		{"1s later", wait(time.Millisecond), 0},
		{"failure 6 locks 2s", fail, 2 * time.Second},
		{"1.5s later", wait(1500 * time.Millisecond), time.Second},
		{"2s later", wait(500 * time.Millisecond), 0},
		{"failure 7 locks 4s", fail, 4 * time.Second},
		{"4s later", wait(4 * time.Second), 0},
		{"failure 8 locks 8s", fail, 8 * time.Second},
		{"success does not lift a lock", func() { th.Succeed(k) }, 8 * time.Second},
		{"8s later", wait(8 * time.Second), 0},
		{"after success, failure 1", fail, 0},
		{"after success, failure 2", fail, 0},
		{"after success, failure 3", fail, 0},
		{"after success, failure 4", fail, 0},
		{"after success, failure 5 locks 1s again", fail, time.Second},
		{"1s later again", wait(time.Second), 0},
		{"after success, failure 6 locks 2s", fail, 2 * time.Second},
	}
	for _, s := range steps {
		s.do()
		retry, ok := th.Allow(k)
		if s.wantRet == 0 && (!ok || retry != 0) {
			t.Fatalf("%s: Allow = %v, %v; want 0, true", s.name, retry, ok)
		}
		if s.wantRet != 0 && (ok || retry != s.wantRet) {
			t.Fatalf("%s: Allow = %v, %v; want %v, false", s.name, retry, ok, s.wantRet)
		}
	}
}

func TestThrottleRetryAfterRounding(t *testing.T) {
	tests := []struct {
		name string
		lock time.Duration
		want time.Duration
	}{
		{"1ns", time.Nanosecond, time.Second},
		{"1ms", time.Millisecond, time.Second},
		{"1s", time.Second, time.Second},
		{"1.001s", 1001 * time.Millisecond, 2 * time.Second},
		{"1.5s", 1500 * time.Millisecond, 2 * time.Second},
		{"59.9s", 59900 * time.Millisecond, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			th := NewThrottle(ThrottleConfig{Now: clock.Now, FreeFailures: 1, BaseDelay: tt.lock})
			th.Fail("k")
			wantAllow(t, th, tt.want, "k")
		})
	}
}

func TestThrottleMaxDelay(t *testing.T) {
	clock := newFakeClock()
	th := NewThrottle(ThrottleConfig{Now: clock.Now, FreeFailures: 1, BaseDelay: time.Second, MaxDelay: 10 * time.Second, HourlyCap: 1000})
	want := []time.Duration{1, 2, 4, 8, 10, 10, 10}
	for i, w := range want {
		th.Fail("k")
		retry, ok := th.Allow("k")
		if ok || retry != w*time.Second {
			t.Fatalf("after failure %d: Allow = %v, %v; want %v, false", i+1, retry, ok, w*time.Second)
		}
		clock.Advance(retry)
	}
	// A streak far past any shift width stays at the cap.
	for i := range 500 {
		th.Fail("k")
		retry, ok := th.Allow("k")
		if ok || retry != 10*time.Second {
			t.Fatalf("after failure %d: Allow = %v, %v; want 10s, false", len(want)+i+1, retry, ok)
		}
		clock.Advance(retry)
	}
}

func TestThrottleHugeDelays(t *testing.T) {
	const year = 365 * 24 * time.Hour
	clock := newFakeClock()
	th := NewThrottle(ThrottleConfig{Now: clock.Now, FreeFailures: 1, BaseDelay: 1 << 62, MaxDelay: 1<<63 - 1})
	for i := range 70 {
		th.Fail("k")
		retry, ok := th.Allow("k")
		if ok || retry <= 0 || retry > year {
			t.Fatalf("after failure %d: Allow = %v, %v; want a lock of at most a year", i+1, retry, ok)
		}
	}
}

func TestThrottleHourlyCap(t *testing.T) {
	const k = "addr:192.0.2.1"
	clock := newFakeClock()
	// Backoff never starts, so only the hourly cap applies.
	th := NewThrottle(ThrottleConfig{Now: clock.Now, FreeFailures: 1000})
	for range 100 {
		wantAllow(t, th, 0, k)
		th.Fail(k)
		clock.Advance(10 * time.Second)
	}
	// 1000s after the first failure, the 101st attempt waits for it to be
	// an hour old.
	wantAllow(t, th, 2600*time.Second, k)
	clock.Advance(2599 * time.Second)
	wantAllow(t, th, time.Second, k)
	clock.Advance(time.Second)
	wantAllow(t, th, 0, k)
	th.Fail(k)
	// Now the oldest failure is the second, made 10s after the first.
	wantAllow(t, th, 10*time.Second, k)
	// Success does not clear the hourly record.
	th.Succeed(k)
	wantAllow(t, th, 10*time.Second, k)
}

func TestThrottleHourlyCapFirstHour(t *testing.T) {
	const k = "acct:victim@example.com"
	clock := newFakeClock()
	th := NewThrottle(ThrottleConfig{Now: clock.Now, FreeFailures: 1000})
	allowed := 0
	for range 3600 {
		if _, ok := th.Allow(k); ok {
			allowed++
			th.Fail(k)
		}
		clock.Advance(time.Second)
	}
	if allowed != 100 {
		t.Errorf("failures allowed in the first hour, one attempt a second = %d, want 100", allowed)
	}
}

// TestThrottleAttacker lets an attacker guess one account's password for
// two simulated hours and counts the guesses that would have been answered
// with anything but 429 in every rolling hour. A polite attacker waits
// exactly the Retry-After it is given; an impatient one retries every step
// regardless. The account's owner may log in now and then, which ends the
// streak and so defeats the backoff, leaving the hourly cap as the limit.
func TestThrottleAttacker(t *testing.T) {
	const key = "acct:victim@example.com"
	hourlyOnly := ThrottleConfig{FreeFailures: 1000}
	tests := []struct {
		name      string
		cfg       ThrottleConfig
		impatient bool
		// step is the attacker's pause after a guess that was let through,
		// and an impatient attacker's pause after any attempt.
		step time.Duration
		// ownerEvery is how often the owner tries to log in (and does,
		// when Allow lets them); 0 for never.
		ownerEvery time.Duration
		// minAttempts and wantBusiest make sure the scenario bites.
		minAttempts int
		wantBusiest int // 0: only the bound of 100 is checked
	}{
		{name: "polite, defaults", step: time.Second},
		{name: "polite, defaults, owner every second", step: time.Second, ownerEvery: time.Second, wantBusiest: 100},
		{name: "impatient, defaults", impatient: true, step: time.Second, minAttempts: 7000},
		{name: "impatient, defaults, owner every second", impatient: true, step: time.Second, ownerEvery: time.Second, minAttempts: 7000, wantBusiest: 100},
		{name: "impatient, defaults, owner every 10s", impatient: true, step: 250 * time.Millisecond, ownerEvery: 10 * time.Second, minAttempts: 20000},
		{name: "polite, hourly cap only", cfg: hourlyOnly, step: time.Second, wantBusiest: 100},
		{name: "polite, hourly cap only, bursts", cfg: hourlyOnly, step: 0, wantBusiest: 100},
		{name: "impatient, hourly cap only", cfg: hourlyOnly, impatient: true, step: time.Second, minAttempts: 7000, wantBusiest: 100},
		{name: "impatient, hourly cap only, 0.7s", cfg: hourlyOnly, impatient: true, step: 700 * time.Millisecond, minAttempts: 10000, wantBusiest: 100},
		{name: "impatient, hourly cap only, owner every 10s", cfg: hourlyOnly, impatient: true, step: time.Second, ownerEvery: 10 * time.Second, minAttempts: 7000, wantBusiest: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			cfg := tt.cfg
			cfg.Now = clock.Now
			th := NewThrottle(cfg)
			start := clock.Now()
			end := start.Add(2 * time.Hour)
			attackerNext, ownerNext := start, start.Add(tt.ownerEvery)
			var allowed []time.Time
			attempts := 0
			for {
				next := attackerNext
				ownerDue := tt.ownerEvery > 0 && ownerNext.Before(attackerNext)
				if ownerDue {
					next = ownerNext
				}
				if !next.Before(end) {
					break
				}
				clock.Advance(next.Sub(clock.Now()))
				now := clock.Now()
				if ownerDue {
					if _, ok := th.Allow(key); ok {
						th.Succeed(key)
					}
					ownerNext = now.Add(tt.ownerEvery)
					continue
				}
				attempts++
				retry, ok := th.Allow(key)
				if !ok {
					if tt.impatient {
						attackerNext = now.Add(tt.step)
					} else {
						attackerNext = now.Add(retry)
					}
					continue
				}
				allowed = append(allowed, now)
				th.Fail(key)
				attackerNext = now.Add(tt.step)
			}
			if attempts < tt.minAttempts {
				t.Errorf("attempts = %d, want at least %d", attempts, tt.minAttempts)
			}
			// The busiest rolling hour starts at some allowed guess.
			busiest, j := 0, 0
			for i := range allowed {
				for j < len(allowed) && allowed[j].Sub(allowed[i]) < time.Hour {
					j++
				}
				busiest = max(busiest, j-i)
			}
			t.Logf("%d attempts, %d let through, at most %d in an hour", attempts, len(allowed), busiest)
			if busiest > 100 {
				t.Errorf("%d guesses let through in one rolling hour, want at most 100", busiest)
			}
			if tt.wantBusiest > 0 && busiest != tt.wantBusiest {
				t.Errorf("busiest hour let through %d guesses, want exactly %d (the cap must bind)", busiest, tt.wantBusiest)
			}
		})
	}
}

func TestThrottleKeysIndependent(t *testing.T) {
	clock := newFakeClock()
	th := NewThrottle(ThrottleConfig{Now: clock.Now})
	const a, b = "acct:a@example.com", "addr:192.0.2.7 acct:a@example.com"
	th.Fail(a, a, a, a, a) // locks a for 1s
	wantAllow(t, th, time.Second, a)
	wantAllow(t, th, 0, b)
	wantAllow(t, th, 0, "acct:other@example.com")
	wantAllow(t, th, time.Second, a, b)
	th.Fail(b, b, b, b, b, b, b) // locks b for 4s
	wantAllow(t, th, 4*time.Second, a, b)
	wantAllow(t, th, 4*time.Second, b, a)
	wantAllow(t, th, time.Second, a)
	clock.Advance(time.Second)
	wantAllow(t, th, 0, a)
	wantAllow(t, th, 3*time.Second, a, b)
	th.Succeed(a)
	wantAllow(t, th, 3*time.Second, b)
	wantAllow(t, th, 0)
	if n := th.Len(); n != 2 {
		t.Errorf("Len() = %d, want 2: Allow and Succeed must not add keys", n)
	}
}

func TestThrottleEvictionBound(t *testing.T) {
	for _, maxKeys := range []int{1, 2, 16, 100, 1000} {
		t.Run(fmt.Sprint(maxKeys), func(t *testing.T) {
			clock := newFakeClock()
			th := NewThrottle(ThrottleConfig{Now: clock.Now, MaxKeys: maxKeys})
			for i := range 10 * maxKeys {
				th.Fail(fmt.Sprintf("addr:%d", i))
				if n := th.Len(); n > maxKeys {
					t.Fatalf("after %d keys: Len() = %d, want at most %d", i+1, n, maxKeys)
				}
				clock.Advance(time.Millisecond)
			}
		})
	}
}

func TestThrottleEvictsStaleFirst(t *testing.T) {
	clock := newFakeClock()
	th := NewThrottle(ThrottleConfig{Now: clock.Now, MaxKeys: 100, FreeFailures: 1})
	for i := range 50 {
		th.Fail(fmt.Sprintf("old:%d", i))
	}
	clock.Advance(2 * time.Hour) // their locks and failures are past
	for i := range 50 {
		th.Fail(fmt.Sprintf("new:%d", i))
	}
	if n := th.Len(); n != 100 {
		t.Fatalf("Len() = %d, want 100", n)
	}
	th.Fail("x")
	if n := th.Len(); n != 51 {
		t.Errorf("Len() after the sweep = %d, want 51", n)
	}
	for i := range 50 {
		wantAllow(t, th, time.Second, fmt.Sprintf("new:%d", i))
	}
}

func TestThrottleEvictsLeastRecentlyActive(t *testing.T) {
	clock := newFakeClock()
	// Locks last an hour, so every entry matters and the sweep frees none.
	th := NewThrottle(ThrottleConfig{Now: clock.Now, MaxKeys: 100, FreeFailures: 1, BaseDelay: time.Hour})
	for i := range 100 {
		th.Fail(fmt.Sprintf("k:%d", i))
		clock.Advance(time.Second)
	}
	th.Succeed("k:0") // k:0 is now the most recently active
	clock.Advance(time.Second)
	th.Fail("x")
	// 100 - 100/16 = 94 kept, then x.
	if n := th.Len(); n != 95 {
		t.Errorf("Len() = %d, want 95", n)
	}
	if _, ok := th.Allow("k:0"); ok {
		t.Errorf("k:0, active recently, was evicted")
	}
	for i := 1; i <= 6; i++ {
		if _, ok := th.Allow(fmt.Sprintf("k:%d", i)); !ok {
			t.Errorf("k:%d, among the least recently active, was kept", i)
		}
	}
	for i := 7; i < 100; i++ {
		if _, ok := th.Allow(fmt.Sprintf("k:%d", i)); ok {
			t.Errorf("k:%d was evicted, want only k:1..k:6", i)
		}
	}
}

func TestThrottleConcurrent(t *testing.T) {
	clock := newFakeClock()
	th := NewThrottle(ThrottleConfig{Now: clock.Now, MaxKeys: 50})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprintf("k:%d", (g*7+i)%80)
				if _, ok := th.Allow(k, "addr:shared"); ok {
					th.Fail(k, "addr:shared")
				}
				if i%10 == 0 {
					th.Succeed(k)
					clock.Advance(time.Second)
				}
				if n := th.Len(); n > 50 {
					t.Errorf("Len() = %d, want at most 50", n)
					return
				}
			}
		})
	}
	wg.Wait()
}
