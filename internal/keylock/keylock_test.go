package keylock

import (
	"runtime"
	"sync"
	"testing"
)

// TestSerialisesOneKey: read-yield-write on a counter guarded only by
// the key's lock loses updates unless the lock really excludes.
func TestSerialisesOneKey(t *testing.T) {
	var k Map
	var wg sync.WaitGroup
	counts := map[string]*int{"a": new(int), "b": new(int)}
	const n = 200
	for i := 0; i < n; i++ {
		for key, c := range counts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				unlock := k.Lock(key)
				v := *c
				runtime.Gosched()
				*c = v + 1
				unlock()
			}()
		}
	}
	wg.Wait()
	for key, c := range counts {
		if *c != n {
			t.Errorf("key %q counted %d, want %d: the lock let holders overlap", key, *c, n)
		}
	}
	if len(k.keys) != 0 {
		t.Fatalf("%d keys remembered after every lock was released, want 0", len(k.keys))
	}
}
