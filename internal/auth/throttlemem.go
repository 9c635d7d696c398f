package auth

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryThrottleState keeps a Throttle's entries in this process's
// memory: what one server alone needs, and forgotten when it stops.
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
// A MemoryThrottleState is safe for concurrent use.
type MemoryThrottleState struct {
	maxKeys int

	mu sync.Mutex
	// keys' entries are never changed in place once kept (Update hands f a
	// copy), so Entries can return them without copying their Fails.
	keys map[string]ThrottleEntry
}

// NewMemoryThrottleState returns an empty state that remembers at most
// maxKeys keys (default 100_000).
func NewMemoryThrottleState(maxKeys int) *MemoryThrottleState {
	if maxKeys <= 0 {
		maxKeys = 100_000
	}
	return &MemoryThrottleState{maxKeys: maxKeys, keys: make(map[string]ThrottleEntry)}
}

// Entries implements ThrottleState; it never fails.
func (m *MemoryThrottleState) Entries(_ context.Context, keys []string) (map[string]ThrottleEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]ThrottleEntry, len(keys))
	for _, k := range keys {
		if e, ok := m.keys[k]; ok {
			out[k] = e
		}
	}
	return out, nil
}

// Update implements ThrottleState; it never fails. A new key in a full
// map first makes room (see MemoryThrottleState).
func (m *MemoryThrottleState) Update(_ context.Context, now time.Time, keys []string, f func(string, *ThrottleEntry)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		old, kept := m.keys[k]
		e := old
		e.Fails = append(make([]int64, 0, len(old.Fails)+1), old.Fails...)
		f(k, &e)
		switch {
		case e.IsZero():
			delete(m.keys, k)
			continue
		case !kept && len(m.keys) >= m.maxKeys:
			m.makeRoom(now)
		}
		m.keys[k] = e
	}
	return nil
}

// Len returns the number of keys remembered.
func (m *MemoryThrottleState) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.keys)
}

// makeRoom shrinks a full map to at most lowWater entries: first by
// dropping entries that neither lock nor remember a failure from the last
// hour, losing nothing that matters; then by evicting the least recently
// active. Freeing a margin, not one slot, keeps a flood of new keys from
// paying a full scan each.
func (m *MemoryThrottleState) makeRoom(now time.Time) {
	lowWater := m.maxKeys - max(1, m.maxKeys/16)
	for k, e := range m.keys {
		if e.stale(now) {
			delete(m.keys, k)
		}
	}
	excess := len(m.keys) - lowWater
	if excess <= 0 {
		return
	}
	type aged struct {
		key  string
		last int64
	}
	all := make([]aged, 0, len(m.keys))
	for k, e := range m.keys {
		all = append(all, aged{k, e.LastActive})
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.last, b.last) })
	for _, a := range all[:excess] {
		delete(m.keys, a.key)
	}
}
