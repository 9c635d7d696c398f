package service

import (
	"context"
	"sync"
)

// gates lets one caller at a time through per key, like keylock.Map, except
// that waiting gives up when the caller's context ends: a client that
// leaves while queued behind a hot address's logins costs nothing more.
// Memory is bounded by the callers holding or waiting.
type gates struct {
	mu sync.Mutex
	m  map[string]*gate
}

type gate struct {
	turn chan struct{} // holds a token while someone is through
	refs int           // holders and waiters
}

// enter waits for key's turn and returns the function that ends it, or the
// context's error if it ends first.
func (g *gates) enter(ctx context.Context, key string) (leave func(), err error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*gate{}
	}
	e := g.m[key]
	if e == nil {
		e = &gate{turn: make(chan struct{}, 1)}
		g.m[key] = e
	}
	e.refs++
	g.mu.Unlock()
	forget := func() {
		g.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(g.m, key)
		}
		g.mu.Unlock()
	}
	select {
	case e.turn <- struct{}{}:
		return func() { <-e.turn; forget() }, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}
