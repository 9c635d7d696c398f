package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"corral"
)

func TestLeases(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	term := 15 * time.Second
	steps := []struct {
		name   string
		holder string
		at     time.Duration
		want   bool
	}{
		{"free: taken", "a", 0, true},
		{"held: refused", "b", time.Second, false},
		{"renewed by its holder", "a", 10 * time.Second, true},
		{"held from the renewal on: refused", "b", 20 * time.Second, false},
		{"expired: taken", "b", 25 * time.Second, true},
		{"the old holder is refused", "a", 26 * time.Second, false},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		got, err := db.TakeLease(ctx, "control", s.holder, now, now.Add(term))
		if err != nil || got != s.want {
			t.Fatalf("%s: TakeLease(%s, +%v) = %v, %v; want %v", s.name, s.holder, s.at, got, err, s.want)
		}
	}
	holder, until, err := db.Lease(ctx, "control")
	if err != nil || holder != "b" || !until.Equal(t0.Add(40*time.Second)) {
		t.Fatalf("Lease = %q until %v, %v; want b until +40s", holder, until, err)
	}
	// A release by another does nothing; by the holder frees the lease.
	if err := db.ReleaseLease(ctx, "control", "a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.TakeLease(ctx, "control", "a", t0.Add(27*time.Second), t0.Add(40*time.Second)); got {
		t.Fatal("a took the lease b holds after a's release")
	}
	if err := db.ReleaseLease(ctx, "control", "b"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.TakeLease(ctx, "control", "a", t0.Add(27*time.Second), t0.Add(40*time.Second)); !got || err != nil {
		t.Fatalf("TakeLease after the holder's release = %v, %v; want taken", got, err)
	}
	_, _, err = db.Lease(ctx, "nothing")
	wantNotFound(t, err, "lease")
	_, err = db.TakeLease(ctx, "control", "a", t0, t0)
	wantCode(t, err, corral.EINVALID)
}

// TestLeaseOneHolder: many servers racing for a free lease, one takes it.
func TestLeaseOneHolder(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := db.TakeLease(ctx, "control", string(rune('a'+i)), t0, t0.Add(time.Minute))
			if err != nil {
				t.Error(err)
			}
			if got {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d servers took the lease, want 1", won)
	}
}

func TestSharedKey(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	got, err := db.SharedKey(ctx, "secret", []byte("first"))
	if err != nil || string(got) != "first" {
		t.Fatalf("SharedKey(first) = %q, %v; want first kept", got, err)
	}
	got, err = db.SharedKey(ctx, "secret", []byte("second"))
	if err != nil || string(got) != "first" {
		t.Fatalf("SharedKey(second) = %q, %v; want the first, still", got, err)
	}
}

// TestClock: on PostgreSQL the lease clock is the database's (it moves on
// its own, near this machine's since both run here), and Now follows it
// without asking, even from a process whose clock is three hours fast; on
// SQLite both are the store's (t0 in the tests).
func TestClock(t *testing.T) {
	db := newDB(t)
	if !onPostgres() {
		got, err := db.Clock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(t0) || !db.Now().Equal(t0) {
			t.Fatalf("Clock = %v, Now = %v, want the store's, %v", got, db.Now(), t0)
		}
		return
	}
	const fast = 3 * time.Hour
	db.now = func() time.Time { return time.Now().Add(fast) }
	if d := time.Until(db.Now()); d < fast-time.Minute {
		t.Fatalf("before any Clock, Now is %v from this machine's, want this process's clock (%v ahead)", d, fast)
	}
	got, err := db.Clock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(got); d < -time.Minute || d > time.Minute {
		t.Fatalf("Clock = %v, %v from this machine's: not the database's clock", got, d)
	}
	if d := time.Since(db.Now()); d < -time.Minute || d > time.Minute {
		t.Fatalf("after Clock, Now is %v from the database's clock: it kept this process's, %v fast", d, fast)
	}
}

// TestFence: a handle fenced on a lease writes while its holder holds it,
// and nothing once another has taken it, it was given up or it lapsed;
// the lease's own writes are not fenced, so its holder can take it again.
// PostgreSQL only: SQLite's file is one process's, and Fence does nothing.
func TestFence(t *testing.T) {
	if !onPostgres() {
		t.Skip("the fence is for servers sharing a PostgreSQL store")
	}
	ctx := context.Background()
	dbs := newDBs(t, 2)
	mine, theirs := dbs[0], dbs[1]
	now, err := mine.Clock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	take := func(db *DB, holder string, from, until time.Time) {
		t.Helper()
		if ok, err := db.TakeLease(ctx, "control", holder, from, until); !ok || err != nil {
			t.Fatalf("TakeLease(%s) = %v, %v", holder, ok, err)
		}
	}
	users := 0
	write := func() error {
		users++
		_, err := mine.CreateUser(ctx, corral.NewUser{Email: fmt.Sprintf("u%d@example.com", users), Name: "U", PasswordHash: "x"})
		return err
	}
	take(mine, "a", now, now.Add(time.Hour))
	mine.Fence("control", "a")
	if err := write(); err != nil {
		t.Fatalf("a write while the lease holds: %v", err)
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"taken by another (an hour past its term)", func() { take(theirs, "b", now.Add(2*time.Hour), now.Add(3*time.Hour)) }},
		{"given up by the other", func() {
			if err := theirs.ReleaseLease(ctx, "control", "b"); err != nil {
				t.Fatal(err)
			}
		}},
		{"lapsed", func() { take(mine, "a", now.Add(-2*time.Hour), now.Add(-time.Hour)) }},
	}
	for _, s := range steps {
		s.do()
		if err := write(); !errors.Is(err, errFenced) {
			t.Fatalf("%s: a fenced write = %v, want refused", s.name, err)
		}
	}
	if _, err := theirs.CreateUser(ctx, corral.NewUser{Email: "other@example.com", Name: "O", PasswordHash: "x"}); err != nil {
		t.Fatalf("an unfenced handle's write: %v", err)
	}
	now, _ = mine.Clock(ctx)
	take(mine, "a", now, now.Add(time.Hour))
	if err := write(); err != nil {
		t.Fatalf("a write once the lease is its holder's again: %v", err)
	}
}

// BenchmarkFence: one small write transaction (a session's last-seen
// time) on PostgreSQL, fenced against unfenced, interleaved in one run:
// the fence's cost is one indexed read inside each write transaction.
// Run with CORRAL_STORE_TEST=postgres.
func BenchmarkFence(b *testing.B) {
	if !onPostgres() {
		b.Skip("the fence is for servers sharing a PostgreSQL store: CORRAL_STORE_TEST=postgres")
	}
	ctx := context.Background()
	dbs := newDBs(b, 2)
	plain, fenced := dbs[0], dbs[1]
	now, err := fenced.Clock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if ok, err := fenced.TakeLease(ctx, "control", "a", now, now.Add(time.Hour)); !ok || err != nil {
		b.Fatal(ok, err)
	}
	fenced.Fence("control", "a")
	write := func(db *DB) time.Duration {
		start := time.Now()
		if _, err := db.exec(ctx, `UPDATE leases SET holder = holder WHERE name = ?`, "control"); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var tPlain, tFenced time.Duration
	for range b.N {
		tPlain += write(plain)
		tFenced += write(fenced)
	}
	b.ReportMetric(float64(tPlain.Microseconds())/float64(b.N), "unfenced-µs")
	b.ReportMetric(float64(tFenced.Microseconds())/float64(b.N), "fenced-µs")
	b.ReportMetric(float64(tFenced)/float64(tPlain), "fenced/unfenced")
}
