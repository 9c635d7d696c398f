// Package keylock serialises work per key: one holder of a key at a time,
// any number of keys at once, and nothing remembered of a key nobody holds.
// Login holds an account's lock from the throttle check to the recorded
// outcome, so parallel guesses at one account are counted one after
// another; a node holds an agent's lock for every write to its workspace.
package keylock

import "sync"

// Map is a lock per key. The zero Map is ready.
type Map struct {
	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	mu   sync.Mutex
	refs int
}

// Lock blocks until key is free and returns its unlock function.
func (k *Map) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.keys == nil {
		k.keys = map[string]*entry{}
	}
	e := k.keys[key]
	if e == nil {
		e = &entry{}
		k.keys[key] = e
	}
	e.refs++
	k.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.keys, key)
		}
		k.mu.Unlock()
	}
}
