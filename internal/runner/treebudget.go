package runner

import (
	"context"
	"fmt"
	"sync"

	"corral"
)

// treeBudgets hold a tree's token cap (--delegation-tokens) across all its
// runs. Before each model call a run reserves an estimate of the call's
// tokens: the call goes out at once when the tree's recorded tokens, the
// calls in flight and this one all fit under the cap; otherwise it waits
// for the calls in flight to end, and then goes out alone. So the cap is
// crossed by at most the one call that goes out alone (plus what calls
// that fit use beyond their estimates), and a tree whose recorded tokens
// reach the cap makes no further call.
type treeBudgets struct {
	mu    sync.Mutex
	trees map[string]*treeBudget // by root run id; only trees with calls in flight or waiting
}

type treeBudget struct {
	reserved int64         // estimates of the calls in flight
	inflight int           // calls in flight
	users    int           // calls in flight or waiting: the entry goes with the last
	changed  chan struct{} // closed when a call ends
}

// errTreeSpent ends a run whose tree has used its token cap.
type errTreeSpent struct{ cap int64 }

func (e errTreeSpent) Error() string {
	return fmt.Sprintf("the delegation tree has used its token cap (%d, --delegation-tokens)", e.cap)
}

// reserve waits until a call of est tokens of a run in tree root may go
// out under cap, and returns what to call when it has ended (its usage
// recorded). used reads the tree's recorded tokens.
func (t *treeBudgets) reserve(ctx context.Context, root string, cap, est int64, used func(context.Context) (int64, error)) (release func(), err error) {
	t.mu.Lock()
	if t.trees == nil {
		t.trees = map[string]*treeBudget{}
	}
	b := t.trees[root]
	if b == nil {
		b = &treeBudget{changed: make(chan struct{})}
		t.trees[root] = b
	}
	b.users++
	t.mu.Unlock()
	leave := func() {
		t.mu.Lock()
		if b.users--; b.users == 0 {
			delete(t.trees, root)
		}
		t.mu.Unlock()
	}
	for {
		n, err := used(ctx)
		if err != nil {
			leave()
			return nil, err
		}
		t.mu.Lock()
		if n >= cap {
			t.mu.Unlock()
			leave()
			return nil, errTreeSpent{cap}
		}
		if n+b.reserved+est <= cap || b.inflight == 0 {
			b.reserved += est
			b.inflight++
			t.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					t.mu.Lock()
					b.reserved -= est
					b.inflight--
					close(b.changed)
					b.changed = make(chan struct{})
					t.mu.Unlock()
					leave()
				})
			}, nil
		}
		wait := b.changed
		t.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			leave()
			return nil, ctx.Err()
		}
	}
}

// outputAllowance is what a call's answer is reckoned at before it comes.
const outputAllowance = 4096

// estimate reckons a call's tokens from its request's size: a token is
// rarely under three bytes of English or code, and the answer is reckoned
// at outputAllowance.
func estimate(requestBytes int) int64 { return int64(requestBytes)/3 + outputAllowance }

// reserveTree reserves a call of run under its tree's token cap; a no-op
// release when the server sets none.
func (r *Runner) reserveTree(ctx context.Context, run corral.Run, requestBytes int) (func(), error) {
	if r.deleg == nil || r.deleg.Caps().Tokens <= 0 {
		return func() {}, nil
	}
	root := run.Root()
	return r.trees.reserve(ctx, root, r.deleg.Caps().Tokens, estimate(requestBytes), func(ctx context.Context) (int64, error) {
		return r.store.TreeTokens(ctx, root)
	})
}
