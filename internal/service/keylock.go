package service

import "sync"

// keyLock serialises work per key. Login holds the account's lock from the
// throttle check to the recorded outcome, so parallel guesses at one account
// are counted one after another and the throttle's hourly cap holds even
// for an attacker who sends them all at once.
type keyLock struct {
	mu   sync.Mutex
	keys map[string]*keyLockEntry
}

type keyLockEntry struct {
	mu   sync.Mutex
	refs int
}

// lock blocks until key is free and returns its unlock function.
func (k *keyLock) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.keys == nil {
		k.keys = map[string]*keyLockEntry{}
	}
	e := k.keys[key]
	if e == nil {
		e = &keyLockEntry{}
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
