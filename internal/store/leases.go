package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"corral"
)

// A lease is held by one server at a time, until it expires unless its
// holder renews it. Its times are Clock's: the database's own on
// PostgreSQL, so servers sharing it need not keep their clocks in step.

// TakeLease takes the lease name for holder until until, or renews it,
// when it is free, expired at now, or already holder's; it reports
// whether holder holds it now. The check and the take are one statement.
func (db *DB) TakeLease(ctx context.Context, name, holder string, now, until time.Time) (bool, error) {
	if name == "" || holder == "" || !until.After(now) {
		return false, corral.Errorf(corral.EINVALID, "a lease needs a name, a holder and a term")
	}
	res, err := db.execWrite(ctx, false, `
		INSERT INTO leases (name, holder, expires_at) VALUES (?1, ?2, ?4)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= ?3`,
		name, holder, millis(now), millis(until))
	if err != nil {
		return false, corral.Internal("store.TakeLease", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, corral.Internal("store.TakeLease", err)
	}
	return n == 1, nil
}

// Lease says who holds the lease name and until when; ENOTFOUND when
// nobody ever took it.
func (db *DB) Lease(ctx context.Context, name string) (holder string, until time.Time, err error) {
	var ms int64
	err = db.queryRow(ctx, `SELECT holder, expires_at FROM leases WHERE name = ?`, name).Scan(&holder, &ms)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", time.Time{}, corral.NotFound("lease")
	case err != nil:
		return "", time.Time{}, corral.Internal("store.Lease", err)
	}
	return holder, fromMillis(ms), nil
}

// ReleaseLease gives the lease up if holder holds it, so that another
// server need not wait for it to expire.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := db.execWrite(ctx, false, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder); err != nil {
		return corral.Internal("store.ReleaseLease", err)
	}
	return nil
}

// SharedKey keeps value as name unless a value is kept already, and
// returns the one kept: the first server's, which every other server
// sharing the store uses (a sealed check of the secret key, the egress
// CA).
func (db *DB) SharedKey(ctx context.Context, name string, value []byte) ([]byte, error) {
	if _, err := db.exec(ctx, `INSERT INTO shared_keys (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, value); err != nil {
		return nil, corral.Internal("store.SharedKey", err)
	}
	var kept []byte
	if err := db.queryRow(ctx, `SELECT value FROM shared_keys WHERE name = ?`, name).Scan(&kept); err != nil {
		return nil, corral.Internal("store.SharedKey", err)
	}
	return kept, nil
}

// Clock is the time leases are reckoned by: on PostgreSQL the database's
// own clock, which every server sharing it reads alike, so their clocks
// need not agree; on SQLite, which one machine's servers share, the
// store's.
//
// Each reading on PostgreSQL also sets how far this process's clock is
// from the database's, which Now applies.
func (db *DB) Clock(ctx context.Context) (time.Time, error) {
	if !db.pg {
		return db.now(), nil
	}
	var ms int64
	asked := db.now()
	if err := db.queryRow(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint`).Scan(&ms); err != nil {
		return time.Time{}, corral.Internal("store.Clock", err)
	}
	at := fromMillis(ms)
	// The database read its clock somewhere in the round trip: take the
	// middle, so the offset is off by half the round trip at most.
	mid := asked.Add(db.now().Sub(asked) / 2)
	db.skew.Store(int64(at.Sub(mid)))
	return at, nil
}

// Now is the database's time without asking it: this process's clock
// moved by the offset the last Clock measured (a few milliseconds off at
// most, and following the database's clock as often as Clock is read; a
// control reads it with every lease renewal). Servers sharing a
// PostgreSQL store that compare times they each wrote (the login
// throttles' locks) use it, so their own clocks need not agree. On
// SQLite, and before any Clock, it is this process's clock.
func (db *DB) Now() time.Time {
	return db.now().Add(time.Duration(db.skew.Load()))
}

// A fence keeps a server that lost its lease from writing: once Fence is
// called, every write transaction on PostgreSQL (under the write lock, so
// in turn with any takeover) first checks, by the database's clock, that
// the lease is still the holder's and has not lapsed, and fails with
// EUNAVAIL when it is not. So a control that was paused past its term (a
// frozen VM, a stopped process) and wakes while another serves changes
// nothing before it notices and stops. The lease's own writes (TakeLease,
// ReleaseLease) are not fenced. On SQLite, which one process holds, Fence
// does nothing.
type fence struct{ name, holder string }

// Fence makes every later write transaction check that holder holds the
// lease name.
func (db *DB) Fence(name, holder string) {
	if db.pg {
		db.fence.Store(&fence{name: name, holder: holder})
	}
}

// errFenced is a write refused by the fence.
var errFenced = corral.Errorf(corral.EUNAVAIL, "this server no longer holds its lease: another serves from this store now")

// check is the fence's test, in the write transaction t.
func (f *fence) check(ctx context.Context, t *txn) error {
	var holds bool
	err := t.QueryRowContext(ctx, `
		SELECT EXISTS (SELECT 1 FROM leases WHERE name = ? AND holder = ?
			AND expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint)`, f.name, f.holder).Scan(&holds)
	switch {
	case err != nil:
		return err
	case !holds:
		return errFenced
	}
	return nil
}

// HasSharedKey says whether a value is kept as name.
func (db *DB) HasSharedKey(ctx context.Context, name string) (bool, error) {
	var n int
	if err := db.queryRow(ctx, `SELECT count(*) FROM shared_keys WHERE name = ?`, name).Scan(&n); err != nil {
		return false, corral.Internal("store.HasSharedKey", err)
	}
	return n > 0, nil
}
