// Package throttletest is the login throttle's behaviour as a suite of
// tests, run unchanged against every auth.ThrottleState: the map in a
// server's memory (internal/auth) and the table in a shared store
// (internal/store), so that a throttle on either decides alike.
package throttletest

import (
	"context"
	"sync"
	"testing"
	"time"

	"corral/internal/auth"
)

// NewState returns an empty state for one throttle of a test.
type NewState func(t *testing.T) auth.ThrottleState

// Run runs every scenario against the states newState makes.
func Run(t *testing.T, newState NewState) {
	tests := []struct {
		name string
		run  func(*testing.T, NewState)
	}{
		{"Backoff", testBackoff},
		{"RetryAfterRounding", testRetryAfterRounding},
		{"MaxDelay", testMaxDelay},
		{"HugeDelays", testHugeDelays},
		{"HourlyCap", testHourlyCap},
		{"HourlyCapFirstHour", testHourlyCapFirstHour},
		{"Attacker", testAttacker},
		{"KeysIndependent", testKeysIndependent},
		{"RepeatedKey", testRepeatedKey},
		{"NoFailureLost", testNoFailureLost},
		{"Concurrent", testConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newState) })
	}
}

// Clock is the injected clock: tests move it, never sleep.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at the start of 2025.
func NewClock() *Clock {
	return &Clock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// throttle is a Throttle on a new state, with the state at hand.
type throttle struct {
	*auth.Throttle
	t     *testing.T
	state auth.ThrottleState
}

func newThrottle(t *testing.T, newState NewState, cfg auth.ThrottleConfig) *throttle {
	t.Helper()
	cfg.State = newState(t)
	return &throttle{Throttle: auth.NewThrottle(cfg), t: t, state: cfg.State}
}

// allow is Allow, failing the test on an error.
func (th *throttle) allow(keys ...string) (time.Duration, bool) {
	th.t.Helper()
	retry, ok, err := th.Allow(context.Background(), keys...)
	if err != nil {
		th.t.Fatalf("Allow(%q): %v", keys, err)
	}
	return retry, ok
}

// fail is Fail, failing the test on an error.
func (th *throttle) fail(keys ...string) {
	th.t.Helper()
	if err := th.Fail(context.Background(), keys...); err != nil {
		th.t.Fatalf("Fail(%q): %v", keys, err)
	}
}

// succeed is Succeed, failing the test on an error.
func (th *throttle) succeed(keys ...string) {
	th.t.Helper()
	if err := th.Succeed(context.Background(), keys...); err != nil {
		th.t.Fatalf("Succeed(%q): %v", keys, err)
	}
}

// entry returns the state's entry of key, and whether it has one.
func (th *throttle) entry(key string) (auth.ThrottleEntry, bool) {
	th.t.Helper()
	es, err := th.state.Entries(context.Background(), []string{key})
	if err != nil {
		th.t.Fatalf("Entries(%q): %v", key, err)
	}
	e, ok := es[key]
	return e, ok
}

// wantAllow checks Allow(keys...): ok when wait is 0, else locked for wait.
func (th *throttle) wantAllow(wait time.Duration, keys ...string) {
	th.t.Helper()
	retry, ok := th.allow(keys...)
	if wait == 0 && (!ok || retry != 0) {
		th.t.Fatalf("Allow(%q) = %v, %v; want 0, true", keys, retry, ok)
	}
	if wait != 0 && (ok || retry != wait) {
		th.t.Fatalf("Allow(%q) = %v, %v; want %v, false", keys, retry, ok, wait)
	}
}

func testBackoff(t *testing.T, newState NewState) {
	const k = "acct:victim@example.com"
	clock := NewClock()
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now})
	type step struct {
		name    string
		do      func()
		wantRet time.Duration // Allow afterwards: 0 means allowed
	}
	fail := func() { th.fail(k) }
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
		{"success does not lift a lock", func() { th.succeed(k) }, 8 * time.Second},
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
		retry, ok := th.allow(k)
		if s.wantRet == 0 && (!ok || retry != 0) {
			t.Fatalf("%s: Allow = %v, %v; want 0, true", s.name, retry, ok)
		}
		if s.wantRet != 0 && (ok || retry != s.wantRet) {
			t.Fatalf("%s: Allow = %v, %v; want %v, false", s.name, retry, ok, s.wantRet)
		}
	}
}

func testRetryAfterRounding(t *testing.T, newState NewState) {
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
			clock := NewClock()
			th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now, FreeFailures: 1, BaseDelay: tt.lock})
			th.fail("k")
			th.wantAllow(tt.want, "k")
		})
	}
	// A clock between milliseconds: the lock still lasts its whole length.
	clock := NewClock()
	clock.Advance(time.Millisecond / 2)
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now, FreeFailures: 1, BaseDelay: time.Second})
	th.fail("k")
	clock.Advance(time.Second - time.Nanosecond)
	th.wantAllow(time.Second, "k")
	clock.Advance(time.Millisecond)
	th.wantAllow(0, "k")
}

func testMaxDelay(t *testing.T, newState NewState) {
	clock := NewClock()
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now, FreeFailures: 1, BaseDelay: time.Second, MaxDelay: 10 * time.Second, HourlyCap: 1000})
	want := []time.Duration{1, 2, 4, 8, 10, 10, 10}
	for i, w := range want {
		th.fail("k")
		retry, ok := th.allow("k")
		if ok || retry != w*time.Second {
			t.Fatalf("after failure %d: Allow = %v, %v; want %v, false", i+1, retry, ok, w*time.Second)
		}
		clock.Advance(retry)
	}
	// A streak far past any shift width stays at the cap.
	for i := range 500 {
		th.fail("k")
		retry, ok := th.allow("k")
		if ok || retry != 10*time.Second {
			t.Fatalf("after failure %d: Allow = %v, %v; want 10s, false", len(want)+i+1, retry, ok)
		}
		clock.Advance(retry)
	}
}

func testHugeDelays(t *testing.T, newState NewState) {
	const year = 365 * 24 * time.Hour
	clock := NewClock()
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now, FreeFailures: 1, BaseDelay: 1 << 62, MaxDelay: 1<<63 - 1})
	for i := range 70 {
		th.fail("k")
		retry, ok := th.allow("k")
		if ok || retry <= 0 || retry > year {
			t.Fatalf("after failure %d: Allow = %v, %v; want a lock of at most a year", i+1, retry, ok)
		}
	}
}

func testHourlyCap(t *testing.T, newState NewState) {
	const k = "addr:192.0.2.1"
	clock := NewClock()
	// Backoff never starts, so only the hourly cap applies.
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now, FreeFailures: 1000})
	for range 100 {
		th.wantAllow(0, k)
		th.fail(k)
		clock.Advance(10 * time.Second)
	}
	// 1000s after the first failure, the 101st attempt waits for it to be
	// an hour old.
	th.wantAllow(2600*time.Second, k)
	clock.Advance(2599 * time.Second)
	th.wantAllow(time.Second, k)
	clock.Advance(time.Second)
	th.wantAllow(0, k)
	th.fail(k)
	// Now the oldest failure is the second, made 10s after the first.
	th.wantAllow(10*time.Second, k)
	// Success does not clear the hourly record.
	th.succeed(k)
	th.wantAllow(10*time.Second, k)
	// The record holds the last hour's failures, at most HourlyCap.
	if e, _ := th.entry(k); len(e.Fails) != 100 {
		t.Errorf("the entry remembers %d failures, want 100", len(e.Fails))
	}
	clock.Advance(2 * time.Hour)
	th.wantAllow(0, k)
	th.fail(k)
	if e, _ := th.entry(k); len(e.Fails) != 1 {
		t.Errorf("after two quiet hours and a failure the entry remembers %d failures, want 1", len(e.Fails))
	}
}

func testHourlyCapFirstHour(t *testing.T, newState NewState) {
	const k = "acct:victim@example.com"
	clock := NewClock()
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now, FreeFailures: 1000})
	allowed := 0
	for range 3600 {
		if _, ok := th.allow(k); ok {
			allowed++
			th.fail(k)
		}
		clock.Advance(time.Second)
	}
	if allowed != 100 {
		t.Errorf("failures allowed in the first hour, one attempt a second = %d, want 100", allowed)
	}
}

// testAttacker lets an attacker guess one account's password for two
// simulated hours and counts the guesses that would have been answered
// with anything but 429 in every rolling hour. A polite attacker waits
// exactly the Retry-After it is given; an impatient one retries every step
// regardless. The account's owner may log in now and then, which ends the
// streak and so defeats the backoff, leaving the hourly cap as the limit.
func testAttacker(t *testing.T, newState NewState) {
	const key = "acct:victim@example.com"
	hourlyOnly := auth.ThrottleConfig{FreeFailures: 1000}
	tests := []struct {
		name      string
		cfg       auth.ThrottleConfig
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
			clock := NewClock()
			cfg := tt.cfg
			cfg.Now = clock.Now
			th := newThrottle(t, newState, cfg)
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
					if _, ok := th.allow(key); ok {
						th.succeed(key)
					}
					ownerNext = now.Add(tt.ownerEvery)
					continue
				}
				attempts++
				retry, ok := th.allow(key)
				if !ok {
					if tt.impatient {
						attackerNext = now.Add(tt.step)
					} else {
						attackerNext = now.Add(retry)
					}
					continue
				}
				allowed = append(allowed, now)
				th.fail(key)
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

func testKeysIndependent(t *testing.T, newState NewState) {
	clock := NewClock()
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now})
	const a, b = "acct:a@example.com", "addr:192.0.2.7 acct:a@example.com"
	const other = "acct:other@example.com"
	th.fail(a, a, a, a, a) // locks a for 1s
	th.wantAllow(time.Second, a)
	th.wantAllow(0, b)
	th.wantAllow(0, other)
	th.wantAllow(time.Second, a, b)
	th.fail(b, b, b, b, b, b, b) // locks b for 4s
	th.wantAllow(4*time.Second, a, b)
	th.wantAllow(4*time.Second, b, a)
	th.wantAllow(time.Second, a)
	clock.Advance(time.Second)
	th.wantAllow(0, a)
	th.wantAllow(3*time.Second, a, b)
	th.succeed(a, other)
	th.wantAllow(3*time.Second, b)
	th.wantAllow(0)
	// Allow and Succeed remember nothing of a key without failures.
	if e, ok := th.entry(other); ok {
		t.Errorf("%s, allowed and succeeded but never failed, has an entry: %+v", other, e)
	}
	if e, ok := th.entry(a); !ok || e.Streak != 0 || len(e.Fails) != 5 {
		t.Errorf("%s after its success = %+v, %v; want streak 0, 5 failures", a, e, ok)
	}
}

// testRepeatedKey: a key named twice in one call counts twice, and a
// Succeed between failures of one call's keys applies in order.
func testRepeatedKey(t *testing.T, newState NewState) {
	clock := NewClock()
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now})
	th.fail("k", "k", "j", "k")
	if e, _ := th.entry("k"); e.Streak != 3 || len(e.Fails) != 3 {
		t.Errorf("k after Fail(k, k, j, k) = %+v; want streak 3, 3 failures", e)
	}
	if e, _ := th.entry("j"); e.Streak != 1 || len(e.Fails) != 1 {
		t.Errorf("j after Fail(k, k, j, k) = %+v; want streak 1, 1 failure", e)
	}
}

// testNoFailureLost: failures recorded at once are all counted.
func testNoFailureLost(t *testing.T, newState NewState) {
	clock := NewClock()
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now, FreeFailures: 1000})
	const n = 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			if err := th.Fail(context.Background(), "k", "addr:shared"); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, k := range []string{"k", "addr:shared"} {
		if e, _ := th.entry(k); e.Streak != n || len(e.Fails) != n {
			t.Errorf("%s after %d failures at once: streak %d, %d failures remembered", k, n, e.Streak, len(e.Fails))
		}
	}
}

// testConcurrent runs logins from many goroutines, for the race detector.
func testConcurrent(t *testing.T, newState NewState) {
	clock := NewClock()
	th := newThrottle(t, newState, auth.ThrottleConfig{Now: clock.Now})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := "k:" + string(rune('a'+(g*7+i)%26))
				_, ok, err := th.Allow(ctx, k, "addr:shared")
				if err == nil && ok {
					err = th.Fail(ctx, k, "addr:shared")
				}
				if err == nil && i%10 == 0 {
					err = th.Succeed(ctx, k)
					clock.Advance(time.Second)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
