package auth

import (
	"cmp"
	"slices"
	"sync"
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
	MaxKeys      int              // keys remembered; default 100_000
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
// Memory is bounded by MaxKeys. When the map is full, entries that hold no
// lock and no failure from the last hour are dropped; if that frees too
// little, the least recently active entries are evicted (a sort, O(n log n)
// once per MaxKeys/16 new keys, which only a flood of distinct keys
// causes). Eviction forgets a key's record, which an attacker with many
// addresses can force; preferring the least recently active keeps the
// records of keys under active attack. A key takes 8 bytes per remembered
// failure, at most HourlyCap of them.
//
// A Throttle is safe for concurrent use.
type Throttle struct {
	now       func() time.Time
	epoch     time.Time // times are kept as offsets from epoch: 8 bytes, monotonic
	free      int
	base, max time.Duration
	cap       int
	maxKeys   int

	mu   sync.Mutex
	keys map[string]*throttleEntry
}

type throttleEntry struct {
	streak      int           // consecutive failures
	lockedUntil time.Duration // end of the backoff lock
	lastFail    time.Duration
	lastActive  time.Duration // last Fail or Succeed
	// fails holds the times of the last HourlyCap failures: appended until
	// full, then a ring whose oldest element is fails[head].
	fails []time.Duration
	head  int
}

// NewThrottle returns a Throttle with cfg's settings.
func NewThrottle(cfg ThrottleConfig) *Throttle {
	t := &Throttle{
		now:     cfg.Now,
		free:    cfg.FreeFailures,
		base:    cfg.BaseDelay,
		max:     cfg.MaxDelay,
		cap:     cfg.HourlyCap,
		maxKeys: cfg.MaxKeys,
		keys:    make(map[string]*throttleEntry),
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
	// offsets far from overflowing.
	const year = 365 * 24 * time.Hour
	t.base = min(t.base, year)
	t.max = min(max(t.max, t.base), year)
	if t.cap <= 0 {
		t.cap = 100
	}
	if t.maxKeys <= 0 {
		t.maxKeys = 100_000
	}
	t.epoch = t.now()
	return t
}

// clock returns the current time as an offset from t.epoch.
func (t *Throttle) clock() time.Duration { return t.now().Sub(t.epoch) }

// Allow reports whether a login naming keys may proceed to the password
// check. When it may not, retryAfter is how long until every key is
// unlocked, in whole seconds and at least one.
func (t *Throttle) Allow(keys ...string) (retryAfter time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	var wait time.Duration
	for _, k := range keys {
		if e := t.keys[k]; e != nil {
			wait = max(wait, t.unlockAt(e)-now)
		}
	}
	if wait <= 0 {
		return 0, true
	}
	return max(time.Second, (wait+time.Second-1)/time.Second*time.Second), false
}

// unlockAt returns when e's locks end: a time not after now when there are
// none.
func (t *Throttle) unlockAt(e *throttleEntry) time.Duration {
	until := e.lockedUntil
	if len(e.fails) == t.cap {
		until = max(until, e.fails[e.head]+time.Hour)
	}
	return until
}

// Fail records a failed login for each key.
func (t *Throttle) Fail(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	for _, k := range keys {
		e := t.keys[k]
		if e == nil {
			if len(t.keys) >= t.maxKeys {
				t.makeRoom(now)
			}
			e = &throttleEntry{}
			t.keys[k] = e
		}
		e.streak++
		e.lastFail, e.lastActive = now, now
		if len(e.fails) < t.cap {
			e.fails = append(e.fails, now)
		} else {
			e.fails[e.head] = now
			e.head = (e.head + 1) % t.cap
		}
		if e.streak >= t.free {
			e.lockedUntil = max(e.lockedUntil, now+t.backoff(e.streak-t.free))
		}
	}
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
// a running lock nor forgets the failures of the last hour.
func (t *Throttle) Succeed(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	for _, k := range keys {
		if e := t.keys[k]; e != nil {
			e.streak = 0
			e.lastActive = now
		}
	}
}

// Len returns the number of keys remembered.
func (t *Throttle) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}

// makeRoom shrinks a full map to at most lowWater entries: first by
// dropping entries that neither lock nor remember a failure from the last
// hour, losing nothing that matters; then by evicting the least recently
// active. Freeing a margin, not one slot, keeps a flood of new keys from
// paying a full scan each.
func (t *Throttle) makeRoom(now time.Duration) {
	lowWater := t.maxKeys - max(1, t.maxKeys/16)
	for k, e := range t.keys {
		if e.lockedUntil <= now && e.lastFail <= now-time.Hour {
			delete(t.keys, k)
		}
	}
	excess := len(t.keys) - lowWater
	if excess <= 0 {
		return
	}
	type aged struct {
		key  string
		last time.Duration
	}
	all := make([]aged, 0, len(t.keys))
	for k, e := range t.keys {
		all = append(all, aged{k, e.lastActive})
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.last, b.last) })
	for _, a := range all[:excess] {
		delete(t.keys, a.key)
	}
}
