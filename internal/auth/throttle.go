package auth

import (
	"context"
	"slices"
	"time"
)

// ThrottleConfig configures a Throttle. Zero (or negative) fields take the
// defaults.
type ThrottleConfig struct {
	Now          func() time.Time // default time.Now
	FreeFailures int              // the streak length that first locks; default 5
	BaseDelay    time.Duration    // the first lock; default 1s; at most a year
	MaxDelay     time.Duration    // the longest backoff lock; default 15m; at most a year
	HourlyCap    int              // failures per key per rolling hour; default 100
	// State keeps the entries; default a MemoryThrottleState of MaxKeys
	// keys, this process's own. Servers sharing a store share a state kept
	// in it, so that they count the same failures.
	State   ThrottleState
	MaxKeys int // keys the default state remembers; default 100_000
}

// ThrottleState keeps a Throttle's entries, one per key. Its methods
// return an error only when the entries cannot be read or written (a
// store away); the Throttle passes it on, and a login must then be
// refused.
type ThrottleState interface {
	// Entries returns the entries of keys; absent keys are missing from
	// the map.
	Entries(ctx context.Context, keys []string) (map[string]ThrottleEntry, error)
	// Update changes the entries of keys in one transaction: f gets each
	// key's entry, the zero entry when it is absent, and changes it in
	// place; a key named twice gets f twice, the second time with what
	// the first left. An entry f leaves zero is not kept. now is the
	// Throttle's clock, for the state's housekeeping (dropping stale
	// entries) only.
	Update(ctx context.Context, now time.Time, keys []string, f func(key string, e *ThrottleEntry)) error
}

// ThrottleEntry is what a Throttle remembers of one key. Its times are
// wall-clock unix milliseconds, so that they mean the same to every
// server sharing a state; a time is rounded up to its millisecond, so
// that no lock is cut short.
type ThrottleEntry struct {
	Streak      int   // consecutive failures
	LockedUntil int64 // the end of the backoff lock
	LastFail    int64
	LastActive  int64 // the last Fail or Succeed
	// Fails holds the times of the key's failures in the last hour, at
	// most HourlyCap of them, oldest first.
	Fails []int64
}

// IsZero reports whether e is the entry of a key never seen.
func (e *ThrottleEntry) IsZero() bool {
	return e.Streak == 0 && e.LockedUntil == 0 && e.LastFail == 0 && e.LastActive == 0 && len(e.Fails) == 0
}

// stale reports whether e neither locks nor remembers a failure from the
// last hour at now: forgetting it changes no decision.
func (e *ThrottleEntry) stale(now time.Time) bool {
	return !time.UnixMilli(e.LockedUntil).After(now) && !time.UnixMilli(e.LastFail).Add(time.Hour).After(now)
}

// Throttle slows down password guessing. It tracks failed logins per key;
// keys are opaque strings. The server's login uses one Throttle for
// "acct:"+normalised email (also for emails without an account) and for
// the pair "addr:"+client address+" acct:"+email, and another, more
// lenient one for "addr:"+client address alone, whose lock only slows an
// address down and never refuses it (see service.Accounts.Login).
//
// Two independent limits lock a key:
//
//   - Backoff: the FreeFailures-th consecutive failure locks the key for
//     BaseDelay, and each further one for twice as long as the one before,
//     up to MaxDelay. Succeed ends the streak.
//   - Hourly cap: a key with HourlyCap failures in the last rolling hour is
//     locked until the oldest of them is an hour old. Succeed does not
//     clear this record.
//
// The server calls Allow before checking a password, then Fail or Succeed.
// So no key gets more than HourlyCap wrong passwords checked per hour, as
// long as attempts on a key are sequential: Allow and Fail are separate
// calls, and attempts in flight at the same time all pass Allow before any
// of them is recorded. The server should bound concurrent logins.
//
// The Throttle decides; its ThrottleState remembers. Each Fail or Succeed
// is one Update of the state, so failures recorded at once, by one
// process or by several servers sharing a state, are all counted.
//
// A Throttle is safe for concurrent use.
type Throttle struct {
	now       func() time.Time
	free      int
	base, max time.Duration
	cap       int
	state     ThrottleState
}

// NewThrottle returns a Throttle with cfg's settings.
func NewThrottle(cfg ThrottleConfig) *Throttle {
	t := &Throttle{
		now:   cfg.Now,
		free:  cfg.FreeFailures,
		base:  cfg.BaseDelay,
		max:   cfg.MaxDelay,
		cap:   cfg.HourlyCap,
		state: cfg.State,
	}
	if t.now == nil {
		t.now = time.Now
	}
	if t.free <= 0 {
		t.free = 5
	}
	if t.base <= 0 {
		t.base = time.Second
	}
	if t.max <= 0 {
		t.max = 15 * time.Minute
	}
	// A year is longer than any sane lock and keeps the arithmetic on
	// times far from overflowing.
	const year = 365 * 24 * time.Hour
	t.base = min(t.base, year)
	t.max = min(max(t.max, t.base), year)
	if t.cap <= 0 {
		t.cap = 100
	}
	if t.state == nil {
		t.state = NewMemoryThrottleState(cfg.MaxKeys)
	}
	return t
}

// ceilMillis returns t in unix milliseconds, rounded up.
func ceilMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// Allow reports whether a login naming keys may proceed to the password
// check. When it may not, retryAfter is how long until every key is
// unlocked, in whole seconds and at least one. An error says the state
// could not be read: the caller must refuse the login.
func (t *Throttle) Allow(ctx context.Context, keys ...string) (retryAfter time.Duration, ok bool, err error) {
	if len(keys) == 0 {
		return 0, true, nil
	}
	entries, err := t.state.Entries(ctx, keys)
	if err != nil {
		return 0, false, err
	}
	now := t.now()
	var wait time.Duration
	for _, e := range entries {
		wait = max(wait, time.UnixMilli(t.unlockAt(&e)).Sub(now))
	}
	if wait <= 0 {
		return 0, true, nil
	}
	return max(time.Second, (wait+time.Second-1)/time.Second*time.Second), false, nil
}

// unlockAt returns when e's locks end, in unix milliseconds: a time not
// after now when there are none.
func (t *Throttle) unlockAt(e *ThrottleEntry) int64 {
	until := e.LockedUntil
	if n := len(e.Fails); n >= t.cap {
		until = max(until, e.Fails[n-t.cap]+time.Hour.Milliseconds())
	}
	return until
}

// Fail records a failed login for each key. An error says the state could
// not be written: the failure may not have been counted, and the caller
// must refuse the login.
func (t *Throttle) Fail(ctx context.Context, keys ...string) error {
	now := t.now()
	at := ceilMillis(now)
	return t.state.Update(ctx, now, keys, func(_ string, e *ThrottleEntry) {
		e.Streak++
		e.LastFail, e.LastActive = max(e.LastFail, at), max(e.LastActive, at)
		e.Fails = t.record(e.Fails, now, at)
		if e.Streak >= t.free {
			e.LockedUntil = max(e.LockedUntil, ceilMillis(now.Add(t.backoff(e.Streak-t.free))))
		}
	})
}

// record adds a failure at at to fails, dropping those an hour old at now
// (they lock nothing any more) and all but the last HourlyCap.
func (t *Throttle) record(fails []int64, now time.Time, at int64) []int64 {
	fails = slices.DeleteFunc(fails, func(f int64) bool { return !time.UnixMilli(f).Add(time.Hour).After(now) })
	fails = append(fails, at)
	if excess := len(fails) - t.cap; excess > 0 {
		fails = append(fails[:0], fails[excess:]...)
	}
	return fails
}

// backoff returns BaseDelay·2^n, capped at MaxDelay without overflowing.
func (t *Throttle) backoff(n int) time.Duration {
	d := t.base
	for ; n > 0 && d < t.max; n-- {
		if d > t.max/2 {
			return t.max
		}
		d *= 2
	}
	return min(d, t.max)
}

// Succeed ends the streak of consecutive failures of each key. The server
// calls it with the account key after a correct password. It neither lifts
// a running lock nor forgets the failures of the last hour, and remembers
// nothing of a key without failures. An error says the state could not be
// written.
func (t *Throttle) Succeed(ctx context.Context, keys ...string) error {
	now := t.now()
	at := ceilMillis(now)
	return t.state.Update(ctx, now, keys, func(_ string, e *ThrottleEntry) {
		if e.IsZero() {
			return
		}
		e.Streak = 0
		e.LastActive = max(e.LastActive, at)
	})
}
