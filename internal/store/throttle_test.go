package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/auth"
	"corral/internal/auth/throttletest"
)

// TestThrottleState runs the throttle's scenarios on the store's state,
// each throttle under a name of its own in one store.
func TestThrottleState(t *testing.T) {
	db := newDB(t)
	n := 0
	throttletest.Run(t, func(*testing.T) auth.ThrottleState {
		n++
		return db.ThrottleState(fmt.Sprint("test-", n), digest)
	})
}

// sharedThrottles returns a login throttle on each of n handles of one
// store, as n servers sharing it would have, on one clock.
func sharedThrottles(t *testing.T, n int, cfg auth.ThrottleConfig) ([]*auth.Throttle, []*DB) {
	t.Helper()
	dbs := newDBs(t, n)
	var ths []*auth.Throttle
	for _, db := range dbs {
		c := cfg
		c.State = db.ThrottleState("login", digest)
		ths = append(ths, auth.NewThrottle(c))
	}
	return ths, dbs
}

// TestThrottleSharedByServers: failures counted through one server lock
// the key on the other, and on one that starts after them.
func TestThrottleSharedByServers(t *testing.T) {
	ctx := context.Background()
	clock := throttletest.NewClock()
	ths, dbs := sharedThrottles(t, 2, auth.ThrottleConfig{Now: clock.Now})
	const k = "acct:victim@example.com"
	for i := range 5 {
		if _, ok, err := ths[1].Allow(ctx, k); !ok || err != nil {
			t.Fatalf("attempt %d through server 2: Allow = %v, %v; want allowed", i+1, ok, err)
		}
		if err := ths[0].Fail(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	retry, ok, err := ths[1].Allow(ctx, k)
	if ok || err != nil || retry != time.Second {
		t.Fatalf("6th attempt through server 2: Allow = %v, %v, %v; want refused for 1s", retry, ok, err)
	}
	// A server that starts now, as a standby taking over, reads the lock.
	later := auth.NewThrottle(auth.ThrottleConfig{Now: clock.Now, State: dbs[0].ThrottleState("login", digest)})
	if _, ok, err := later.Allow(ctx, k); ok || err != nil {
		t.Fatalf("through a new throttle: Allow = %v, %v; want refused", ok, err)
	}
	// The names keep apart: the spray throttle has no record of the key.
	spray := auth.NewThrottle(auth.ThrottleConfig{Now: clock.Now, State: dbs[1].ThrottleState("spray", digest)})
	if _, ok, err := spray.Allow(ctx, k); !ok || err != nil {
		t.Fatalf("through another throttle's name: Allow = %v, %v; want allowed", ok, err)
	}
	// A success through one ends the streak for both.
	clock.Advance(time.Second)
	if err := ths[1].Succeed(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := ths[0].Fail(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ths[1].Allow(ctx, k); !ok || err != nil {
		t.Fatalf("after a success and one failure: Allow = %v, %v; want allowed", ok, err)
	}
}

// TestThrottleAcrossSkewedClocks: two servers whose own clocks are an
// hour apart reckon the throttles' locks by the database's clock (Now), so
// a lock one sets holds on the other. With their own clocks, the one an
// hour fast would find a 15-minute lock long over.
func TestThrottleAcrossSkewedClocks(t *testing.T) {
	if !onPostgres() {
		t.Skip("servers with clocks of their own share a PostgreSQL store")
	}
	ctx := context.Background()
	dbs := newDBs(t, 2)
	var ths []*auth.Throttle
	for i, db := range dbs {
		skew := time.Duration(i) * time.Hour
		db.now = func() time.Time { return time.Now().Add(skew) }
		if _, err := db.Clock(ctx); err != nil { // a lease renewal does this
			t.Fatal(err)
		}
		ths = append(ths, auth.NewThrottle(auth.ThrottleConfig{Now: db.Now, FreeFailures: 1, BaseDelay: 15 * time.Minute,
			State: db.ThrottleState("login", digest)}))
	}
	const k = "acct:victim@example.com"
	if err := ths[0].Fail(ctx, k); err != nil {
		t.Fatal(err)
	}
	retry, ok, err := ths[1].Allow(ctx, k)
	if ok || err != nil || retry < 14*time.Minute || retry > 15*time.Minute {
		t.Fatalf("through the server an hour fast: Allow = %v, %v, %v; want refused for about 15 minutes", retry, ok, err)
	}
}

// TestThrottleNoFailureLostAcrossServers: failures recorded at once
// through two servers are all counted.
func TestThrottleNoFailureLostAcrossServers(t *testing.T) {
	ctx := context.Background()
	clock := throttletest.NewClock()
	ths, dbs := sharedThrottles(t, 2, auth.ThrottleConfig{Now: clock.Now, FreeFailures: 1000})
	const n = 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			if err := ths[i%2].Fail(ctx, "k", "addr:192.0.2.1"); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	es, err := dbs[0].ThrottleState("login", digest).Entries(ctx, []string{"k", "addr:192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k", "addr:192.0.2.1"} {
		if e := es[k]; e.Streak != n || len(e.Fails) != n {
			t.Errorf("%s after %d failures through two servers at once: streak %d, %d failures in the hour; want %d, %d",
				k, n, e.Streak, len(e.Fails), n, n)
		}
	}
}

// throttleRows counts the rows of every throttle.
func throttleRows(t *testing.T, db *DB) int {
	t.Helper()
	var n int
	if err := db.queryRow(context.Background(), `SELECT count(*) FROM throttle_entries`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestThrottleSweep: updates drop the entries that neither lock nor
// remember a failure from the last hour, a bounded batch at a time, and
// keep the others.
func TestThrottleSweep(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := throttletest.NewClock()
	short := auth.NewThrottle(auth.ThrottleConfig{Now: clock.Now, State: db.ThrottleState("short", digest)})
	long := auth.NewThrottle(auth.ThrottleConfig{Now: clock.Now, FreeFailures: 1, BaseDelay: 3 * time.Hour, MaxDelay: 3 * time.Hour,
		State: db.ThrottleState("long", digest)})
	stale := throttleSweepBatch + 10
	keys := make([]string, stale)
	for i := range keys {
		keys[i] = fmt.Sprint("addr:", i)
	}
	if err := short.Fail(ctx, keys...); err != nil {
		t.Fatal(err)
	}
	if err := long.Fail(ctx, "locked"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second)
	if err := short.Fail(ctx, "recent"); err != nil {
		t.Fatal(err)
	}
	if n := throttleRows(t, db); n != stale+2 {
		t.Fatalf("%d rows, want %d", n, stale+2)
	}
	// An hour after their failure the first entries are stale: the next
	// update drops a batch, the one after it (due at once after a full
	// batch) the rest; then none for a minute, and then the next stale
	// one. The lock is kept throughout.
	steps := []struct {
		name    string
		advance time.Duration
		want    int
	}{
		{"an hour on, a batch", time.Hour - 30*time.Second, 12},
		{"at once, the rest", 0, 2},
		{"30s on, recent is stale but no sweep is due", 30 * time.Second, 2},
		{"a minute on, a sweep", 30 * time.Second, 1},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		if err := short.Succeed(ctx, "nobody"); err != nil {
			t.Fatal(err)
		}
		if n := throttleRows(t, db); n != s.want {
			t.Fatalf("%s: %d rows, want %d", s.name, n, s.want)
		}
	}
	if _, ok, err := long.Allow(ctx, "locked"); ok || err != nil {
		t.Fatalf("Allow(locked) = %v, %v: its lock was swept", ok, err)
	}
}

// digest is a keyed hash, as the server's secret key gives one
// (secrets.Key.Digest).
func digest(purpose string, data []byte) []byte {
	m := hmac.New(sha256.New, []byte("a test's key"))
	m.Write([]byte(purpose))
	m.Write(data)
	return m.Sum(nil)
}

// TestThrottleKeysHashed: the table holds no email or address in clear,
// only its keyed digest.
func TestThrottleKeysHashed(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	const k = "addr:192.0.2.1 acct:someone@example.com"
	if err := auth.NewThrottle(auth.ThrottleConfig{State: db.ThrottleState("login", digest)}).Fail(ctx, k); err != nil {
		t.Fatal(err)
	}
	var h string
	if err := db.queryRow(ctx, `SELECT key_hash FROM throttle_entries`).Scan(&h); err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(digest("throttle login", []byte(k))); h != want || strings.Contains(h, "example") || strings.Contains(h, "192.0.2.1") {
		t.Fatalf("key_hash = %q, want the keyed digest %s", h, want)
	}
}

// TestThrottleStateClosed: a state whose store is away says so.
func TestThrottleStateClosed(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	s := db.ThrottleState("login", digest)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Entries(ctx, []string{"k"}); err == nil {
		t.Error("Entries on a closed store succeeded")
	}
	if err := s.Update(ctx, time.Now(), []string{"k"}, func(string, *auth.ThrottleEntry) {}); err == nil {
		t.Error("Update on a closed store succeeded")
	}
}
