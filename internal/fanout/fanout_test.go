package fanout

import (
	"testing"

	"corral"
)

// drain reads what ch holds now, and whether it is still open.
func drain(ch <-chan corral.RunEvent) (n int, open bool) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return n, false
			}
			n++
		default:
			return n, true
		}
	}
}

// TestHub: each watcher of a run gets its events, and no other run's; a
// watcher that falls Buffer events behind is let go without blocking the
// publisher, while the others go on; End lets a run's watchers go,
// EndAll every run's; cancel may be called after either.
func TestHub(t *testing.T) {
	h := New()
	fast, cancelFast := h.Subscribe("run_1")
	slow, cancelSlow := h.Subscribe("run_1")
	other, cancelOther := h.Subscribe("run_2")
	defer cancelOther()
	if !h.Watched("run_1") || h.Watched("run_3") {
		t.Fatal("Watched: want run_1 watched, run_3 not")
	}
	for i := range Buffer + 1 {
		h.Publish("run_1", corral.RunEvent{Delta: "x"})
		if i < Buffer {
			if n, open := drain(fast); n != 1 || !open {
				t.Fatalf("event %d: the fast watcher got %d (open %v), want 1", i, n, open)
			}
		}
	}
	if n, open := drain(slow); n != Buffer || open {
		t.Fatalf("the slow watcher got %d events (open %v), want %d, then let go", n, open, Buffer)
	}
	if n, open := drain(fast); n != 1 || !open {
		t.Fatalf("the fast watcher got %d (open %v) after the slow one was let go, want 1, open", n, open)
	}
	if n, open := drain(other); n != 0 || !open {
		t.Fatalf("run_2's watcher got %d of run_1's events (open %v)", n, open)
	}
	h.End("run_1")
	if _, open := drain(fast); open || h.Watched("run_1") {
		t.Fatal("End: want run_1's watcher let go")
	}
	cancelFast()
	cancelSlow()
	h.EndAll()
	if _, open := drain(other); open {
		t.Fatal("EndAll: want run_2's watcher let go")
	}
}
