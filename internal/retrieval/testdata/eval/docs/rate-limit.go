// Package ratelimit limits how many requests each API key may send to
// ledger-api, so that one misbehaving customer integration cannot slow down
// billing for everyone else.
//
// The limiter is a token bucket per API key. Every key gets a default rate of
// 50 requests per second with a burst of 100, which lets a client send a short
// batch without being refused while keeping its average in check. Keys on the
// enterprise plan are configured with their own rate in the accounts table and
// read at start-up and then every 5 minutes.
//
// Counters live in Redis so that all ledger-api replicas in a data centre share
// one bucket per key. The Redis key for a bucket is "rl:{apikey}:{window}",
// where window is the current second since the Unix epoch; keys expire after 10
// seconds, so Redis never holds more than a few seconds of counters.
//
// When Redis cannot be reached within 2 seconds, the limiter fails open: it lets
// the request through and counts it in the metric
// ledger_ratelimit_failopen_total. Refusing every charge because a cache is
// down would turn a small outage into a large one. The identity service still
// checks the key, so failing open never lets an unknown client in.
//
// A refused request gets HTTP status 429 with a Retry-After header giving the
// number of whole seconds until the bucket has a token again, never less than 1.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// DefaultRate and DefaultBurst apply to every key without its own setting.
const (
	DefaultRate  = 50  // requests per second
	DefaultBurst = 100 // requests allowed at once
)

// redisTimeout is how long a check may wait for Redis before failing open.
const redisTimeout = 2 * time.Second

// ErrLimited is returned by Allow when the key has no token left.
var ErrLimited = errors.New("rate limited")

// Counter is the part of the Redis client the limiter uses. Incr adds one to
// key and returns the new value, setting the expiry when the key is new.
type Counter interface {
	Incr(ctx context.Context, key string, expire time.Duration) (int64, error)
}

// Limiter decides whether a request may proceed.
type Limiter struct {
	counter Counter
	now     func() time.Time
	rates   map[string]int // per-key rate overrides, from the accounts table
}

// New returns a limiter that counts in c. now is injected so tests can move
// time without sleeping.
func New(c Counter, now func() time.Time, rates map[string]int) *Limiter {
	return &Limiter{counter: c, now: now, rates: rates}
}

// Allow reports whether the request with the given API key may proceed. It
// returns the number of seconds the client should wait when it may not. The
// burst is approximated by allowing up to DefaultBurst in the first second of
// a window for keys at the default rate.
func (l *Limiter) Allow(ctx context.Context, apiKey string) (retryAfter int, err error) {
	rate, ok := l.rates[apiKey]
	if !ok {
		rate = DefaultRate
	}
	limit := rate
	if rate == DefaultRate {
		limit = DefaultBurst
	}
	window := l.now().Unix()
	key := "rl:" + apiKey + ":" + strconv.FormatInt(window, 10)

	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	n, err := l.counter.Incr(ctx, key, 10*time.Second)
	if err != nil {
		// Fail open: see the package comment for why.
		return 0, nil
	}
	if n > int64(limit) {
		return 1, fmt.Errorf("key %s: %w", redact(apiKey), ErrLimited)
	}
	return 0, nil
}

// redact keeps the first 6 characters of a key, enough to find it in the
// accounts table, so that full keys never reach an error message or a log.
func redact(apiKey string) string {
	if len(apiKey) <= 6 {
		return "******"
	}
	return apiKey[:6] + "…"
}
