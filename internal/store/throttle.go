package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"corral"
	"corral/internal/auth"
)

// The login throttles' records (auth.Throttle), kept in the store when
// servers share it: every server then reads the locks the others set, and
// a standby that takes over forgets none. A row is one key of one
// throttle; the key itself (an email, a client address) is not kept, only
// a keyed hash of it.

// Stale entries are swept by the updates themselves, at most one batch
// each and a batch a minute while there are few, so that no update waits
// on a long delete and the table holds little more than the last hour's
// keys.
const (
	throttleSweepEvery = time.Minute
	throttleSweepBatch = 1000
)

// ThrottleState is one throttle's entries in the store: an
// auth.ThrottleState that every server sharing the store shares. An
// Update is one write transaction, so failures recorded at once, on any
// number of servers, are all counted.
type ThrottleState struct {
	db     *DB
	name   string
	digest func(purpose string, data []byte) []byte
	// sweepAt is when, in unix milliseconds by the throttle's clock,
	// Update next drops stale entries.
	sweepAt atomic.Int64
}

var _ auth.ThrottleState = (*ThrottleState)(nil)

// ThrottleState returns the entries of the throttle called name ("login",
// "spray", "signup"): throttles of different names keep different
// entries for the same key. A key (an email, a client address) is kept
// only as digest(name, key), a keyed hash (secrets.Key.Digest), so that
// the table cannot be read back by hashing every address or a list of
// emails.
func (db *DB) ThrottleState(name string, digest func(purpose string, data []byte) []byte) *ThrottleState {
	return &ThrottleState{db: db, name: name, digest: digest}
}

// hash is the row's key for key.
func (s *ThrottleState) hash(key string) string {
	return hex.EncodeToString(s.digest("throttle "+s.name, []byte(key)))
}

// hashes returns the distinct hashes of keys, in their first order, as
// query arguments, and the key of each.
func (s *ThrottleState) hashes(keys []string) ([]any, map[string]string) {
	var args []any
	byHash := make(map[string]string, len(keys))
	for _, k := range keys {
		h := s.hash(k)
		if _, ok := byHash[h]; !ok {
			byHash[h] = k
			args = append(args, h)
		}
	}
	return args, byHash
}

// selectThrottleEntries reads the rows of n hashes.
func selectThrottleEntries(n int) string {
	return `SELECT key_hash, streak, locked_until, last_fail, last_active, fails FROM throttle_entries
		WHERE key_hash IN (` + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `)`
}

// scanThrottleEntries reads rows of selectThrottleEntries by hash.
func scanThrottleEntries(rows *sql.Rows) (map[string]auth.ThrottleEntry, error) {
	defer rows.Close()
	out := map[string]auth.ThrottleEntry{}
	for rows.Next() {
		var h string
		var e auth.ThrottleEntry
		var fails []byte
		if err := rows.Scan(&h, &e.Streak, &e.LockedUntil, &e.LastFail, &e.LastActive, &fails); err != nil {
			return nil, err
		}
		if len(fails)%8 != 0 {
			return nil, fmt.Errorf("throttle entry %s: its failures are %d bytes, not 8 each", h, len(fails))
		}
		for b := fails; len(b) > 0; b = b[8:] {
			e.Fails = append(e.Fails, int64(binary.BigEndian.Uint64(b)))
		}
		out[h] = e
	}
	return out, rows.Err()
}

// Entries implements auth.ThrottleState.
func (s *ThrottleState) Entries(ctx context.Context, keys []string) (map[string]auth.ThrottleEntry, error) {
	const op = "store.ThrottleEntries"
	out := map[string]auth.ThrottleEntry{}
	if len(keys) == 0 {
		return out, nil
	}
	args, byHash := s.hashes(keys)
	rows, err := s.db.query(ctx, selectThrottleEntries(len(args)), args...)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	byRow, err := scanThrottleEntries(rows)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	for h, e := range byRow {
		out[byHash[h]] = e
	}
	return out, nil
}

// Update implements auth.ThrottleState: it reads the entries of keys,
// applies f and writes what changed in one write transaction, which on
// PostgreSQL takes the store's write lock (see begin), so that no update
// on any server reads an entry another is changing.
func (s *ThrottleState) Update(ctx context.Context, now time.Time, keys []string, f func(string, *auth.ThrottleEntry)) error {
	const op = "store.ThrottleUpdate"
	if len(keys) == 0 {
		return nil
	}
	args, byHash := s.hashes(keys)
	tx, err := s.db.begin(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer rollback(tx)
	if err := s.sweep(ctx, tx, now); err != nil {
		return corral.Internal(op, err)
	}
	rows, err := tx.QueryContext(ctx, selectThrottleEntries(len(args)), args...)
	if err != nil {
		return corral.Internal(op, err)
	}
	old, err := scanThrottleEntries(rows)
	if err != nil {
		return corral.Internal(op, err)
	}
	cur := make(map[string]auth.ThrottleEntry, len(args))
	for _, k := range keys {
		h := s.hash(k)
		e, ok := cur[h]
		if !ok {
			e = old[h]
			e.Fails = slices.Clone(e.Fails)
		}
		f(k, &e)
		cur[h] = e
	}
	for _, a := range args {
		h := a.(string)
		e, was := cur[h], old[h]
		switch {
		case sameThrottleEntry(&e, &was):
			continue
		case e.IsZero():
			_, err = tx.ExecContext(ctx, `DELETE FROM throttle_entries WHERE key_hash = ?`, h)
		default:
			fails := make([]byte, 0, 8*len(e.Fails))
			for _, t := range e.Fails {
				fails = binary.BigEndian.AppendUint64(fails, uint64(t))
			}
			_, err = tx.ExecContext(ctx, `
				INSERT INTO throttle_entries (key_hash, streak, locked_until, last_fail, last_active, fails)
				VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (key_hash) DO UPDATE SET streak = excluded.streak, locked_until = excluded.locked_until,
					last_fail = excluded.last_fail, last_active = excluded.last_active, fails = excluded.fails`,
				h, e.Streak, e.LockedUntil, e.LastFail, e.LastActive, fails)
		}
		if err != nil {
			return corral.Internal(op, fmt.Errorf("throttle entry of %q: %w", byHash[h], err))
		}
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}

func sameThrottleEntry(a, b *auth.ThrottleEntry) bool {
	return a.Streak == b.Streak && a.LockedUntil == b.LockedUntil && a.LastFail == b.LastFail &&
		a.LastActive == b.LastActive && slices.Equal(a.Fails, b.Fails)
}

// sweep drops, when it is due, up to a batch of entries of every throttle
// that neither lock nor remember a failure from the last hour at now:
// forgetting them changes no decision. A full batch leaves the next one
// due at once.
func (s *ThrottleState) sweep(ctx context.Context, tx *txn, now time.Time) error {
	ms := now.UnixMilli()
	if ms < s.sweepAt.Load() {
		return nil
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM throttle_entries WHERE key_hash IN (
		SELECT key_hash FROM throttle_entries WHERE last_fail <= ? AND locked_until <= ? LIMIT ?)`,
		ms-time.Hour.Milliseconds(), ms, throttleSweepBatch)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if n < throttleSweepBatch {
		s.sweepAt.Store(ms + throttleSweepEvery.Milliseconds())
	}
	return nil
}
