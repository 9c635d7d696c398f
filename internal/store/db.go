// Package store is Corral's storage: one *DB implements every interface
// in the root package's store.go, on an embedded SQLite file (the
// default) or on PostgreSQL.
//
// On SQLite a *DB holds two pools on the same file. All writes go through
// a writer pool of exactly one connection whose transactions begin
// IMMEDIATE, so writers queue in Go instead of failing with SQLITE_BUSY
// halfway through a transaction; reads go through a small pool of
// read-only connections that, thanks to WAL, never wait for the writer.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"corral"

	"github.com/pressly/goose/v3"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// readers is the size of the read pool. Reads in WAL mode run in parallel
// with each other and with the writer; a handful covers a small server.
const readers = 4

// DB is Corral's store on one SQLite file. It is safe for concurrent use.
type DB struct {
	w  *sql.DB // one connection, BEGIN IMMEDIATE
	r  *sql.DB // read-only connections
	ws stmts   // prepared statements on w
	rs stmts   // prepared statements on r

	now func() time.Time // the clock for times the caller does not pass

	// pg: the database is PostgreSQL (postgres.go). Queries, written
	// once in SQLite's dialect, are translated as they are prepared, and
	// write transactions take one lock, as SQLite's single writer does.
	pg bool
	// pgcfg is how to connect to it: a listener (Listen) holds a
	// connection of its own.
	pgcfg *pgx.ConnConfig
	// fence, once set (Fence), is the lease every write transaction on
	// PostgreSQL checks it still holds.
	fence atomic.Pointer[fence]
	// skew is how far the database's clock is ahead of now's, in
	// nanoseconds, as Clock last measured it (Now).
	skew atomic.Int64
}

// The compiler checks that *DB implements every storage interface.
var (
	_ corral.UserStore    = (*DB)(nil)
	_ corral.SessionStore = (*DB)(nil)
	_ corral.TokenStore   = (*DB)(nil)
	_ corral.InviteStore  = (*DB)(nil)
	_ corral.AgentStore   = (*DB)(nil)
	_ corral.ShareStore   = (*DB)(nil)
	_ corral.MessageStore = (*DB)(nil)
)

// Open opens the database at path, creating it and its directory when they
// do not exist, and brings its schema up to date.
func Open(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, true)
}

// OpenExisting opens the database at path only if it exists and its schema
// is this release's: it creates nothing and migrates nothing, so a command
// given a wrong directory says so instead of making an empty database. A
// server migrating the file at the same moment is waited for.
func OpenExisting(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, false)
}

func open(ctx context.Context, path string, create bool) (*DB, error) {
	const op = "sqlite.Open"
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	if create {
		if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
			return nil, corral.Internal(op, err)
		}
	} else if _, err := os.Stat(abs); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, corral.Errorf(corral.ENOTFOUND, "there is no Corral database at %s: give the --data of a control that has started at least once", abs)
		}
		return nil, corral.Internal(op, err)
	}
	// Two processes migrating one file at once would both apply the same
	// migration ("table users already exists"): whoever creates, migrates
	// or checks the file holds the migration lock meanwhile.
	unlock, err := lockMigrations(ctx, abs)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	defer unlock()
	// SQLite would create the file with the umask's permissions; creating
	// it first keeps it private. The -wal and -shm files copy its mode.
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(abs, flags, 0o600)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	if err := f.Close(); err != nil {
		return nil, corral.Internal(op, err)
	}

	w, err := openPool(ctx, dsn(abs, "&_txlock=immediate"), 1)
	if err != nil {
		return nil, corral.Internal(op, fmt.Errorf("writer: %w", err))
	}
	if create {
		err = migrate(ctx, w)
	} else {
		err = checkSchema(ctx, w, abs)
	}
	if err != nil {
		w.Close()
		var e *corral.Error
		if errors.As(err, &e) {
			return nil, err
		}
		return nil, corral.Internal(op, err)
	}
	// The readers open after the migrations so that, on a new file, the
	// switch to WAL has happened before any of them connects.
	r, err := openPool(ctx, dsn(abs, "&_pragma=query_only(1)"), readers)
	if err != nil {
		w.Close()
		return nil, corral.Internal(op, fmt.Errorf("reader: %w", err))
	}
	return &DB{w: w, r: r, ws: stmts{pool: w}, rs: stmts{pool: r}, now: time.Now}, nil
}

// Close closes both pools.
func (db *DB) Close() error {
	err := errors.Join(db.rs.close(), db.ws.close(), db.r.Close(), db.w.Close())
	if err != nil {
		return corral.Internal("sqlite.Close", err)
	}
	return nil
}

// dsn returns the modernc DSN for path: every connection gets the same
// pragmas, so no connection of either pool can run without foreign keys.
func dsn(path, extra string) string {
	// In a file: URI, SQLite decodes %XX in the path, and the driver splits
	// its own parameters at the first '?'; escaping keeps odd paths intact.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	return "file:" + esc +
		"?_pragma=foreign_keys(1)" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=busy_timeout(10000)" +
		// FULL: a commit is on disk before it is acknowledged (in WAL mode,
		// NORMAL may lose the last commits on power loss).
		"&_pragma=synchronous(FULL)" +
		extra
}

// openPool opens a pool of at most n connections and checks, on one of
// them, that the pragmas the schema depends on really took effect.
func openPool(ctx context.Context, dsn string, n int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := checkPragmas(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// checkPragmas fails unless foreign keys are enforced and the journal is in
// WAL mode: without the first, cascades and references silently do nothing;
// without the second, readers and the writer block each other.
func checkPragmas(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var fk int
	if err := conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		return fmt.Errorf("read foreign_keys: %w", err)
	}
	if fk != 1 {
		return fmt.Errorf("foreign_keys is %d, want 1", fk)
	}
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal_mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	return nil
}

// migrate applies the embedded migrations that the file has not seen yet.
func migrate(ctx context.Context, db *sql.DB) error {
	p, err := migrator(db)
	if err != nil {
		return err
	}
	// p.Close would close db, which the caller still owns.
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// checkSchema refuses a file whose schema is not this release's: one that
// no server has migrated yet, or that an older release left.
func checkSchema(ctx context.Context, db *sql.DB, path string) error {
	p, err := migrator(db)
	if err != nil {
		return err
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return corral.Errorf(corral.EUNAVAIL, "%s is not a Corral database that a server has started on (%v): "+
			"give the --data of a control that has started at least once", path, err)
	}
	if current == 0 {
		return corral.Errorf(corral.EUNAVAIL, "%s is not a Corral database that a server has started on: "+
			"give the --data of a control that has started at least once", path)
	}
	if current != target {
		return corral.Errorf(corral.EUNAVAIL, "the Corral database at %s is at schema version %d, and this release's is %d: "+
			"start this release's corral serve on it once, then try again", path, current, target)
	}
	return nil
}

func migrator(db *sql.DB) (*goose.Provider, error) {
	fsys, err := fs.Sub(migrations, "migrations/sqlite")
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithGoMigrations(goMigrations...))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// lockMigrations takes an exclusive flock on a file beside the database
// (never the database itself: closing a second descriptor of it would
// drop SQLite's own POSIX locks), waiting for another process that holds
// it until ctx is done or a minute passes.
func lockMigrations(ctx context.Context, db string) (unlock func(), err error) {
	f, err := os.OpenFile(db+"-migrate.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("migration lock: another process has held %s for a minute: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sqliteCode returns the extended result code of the SQLite error in err's
// chain, or 0 when there is none.
func sqliteCode(err error) int {
	var e *msqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

func isUnique(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY ||
		pgCode(err) == pgUniqueViolation
}

func isForeignKey(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY || pgCode(err) == pgForeignKeyViolation
}

// isRefused says whether a trigger refused the statement (the trace's
// chain, the append-only tables).
func isRefused(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_TRIGGER || pgCode(err) == pgRestrictViolation
}

// conflict is the answer to a uniqueness violation.
func conflict(msg string) *corral.Error {
	return &corral.Error{Code: corral.ECONFLICT, Message: msg}
}

// rowsAffected turns a DELETE's or UPDATE's result into ENOTFOUND for kind
// when it touched nothing.
func rowsAffected(op, kind string, res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return corral.Internal(op, err)
	}
	if n == 0 {
		return corral.NotFound(kind)
	}
	return nil
}

// rollback undoes tx when the function that began it returns early; after a
// commit it does nothing.
func rollback(tx *txn) { _ = tx.Rollback() }

// txn is a transaction that speaks the store's dialect: its queries are
// written for SQLite and translated for PostgreSQL.
type txn struct {
	*sql.Tx
	pg bool
}

func (t *txn) q(query string, args []any) (string, []any) {
	if t.pg {
		return pgQuery(query), pgArgs(args)
	}
	return query, args
}

func (t *txn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	query, args = t.q(query, args)
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *txn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	query, args = t.q(query, args)
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *txn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	query, args = t.q(query, args)
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// bytes passes s, bytes a run wrote that need not be UTF-8, for a
// column that holds them: on PostgreSQL a BYTEA (its TEXT refuses them).
func (t *txn) bytes(s string) any {
	if t.pg {
		return []byte(s)
	}
	return s
}

// begin starts a write transaction. On SQLite the writer pool's one
// connection makes writers take turns; on PostgreSQL every write
// transaction, on any replica, first takes one transaction-scoped
// advisory lock, so they take turns the same way and every guarantee
// written for SQLite's serial writer (compare-and-set reads, the audit
// log's seq order being commit order) holds unchanged.
func (db *DB) begin(ctx context.Context) (*txn, error) {
	return db.beginWrite(ctx, true)
}

// beginWrite is begin; a write transaction that is not fenced (fenced
// false) is one of the lease's own (taking, renewing, giving it up).
func (db *DB) beginWrite(ctx context.Context, fenced bool) (*txn, error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	t := &txn{Tx: tx, pg: db.pg}
	if db.pg {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, writeLock); err != nil {
			tx.Rollback()
			return nil, err
		}
		if f := db.fence.Load(); f != nil && fenced {
			if err := f.check(ctx, t); err != nil {
				tx.Rollback()
				return nil, err
			}
		}
	}
	return t, nil
}

// beginRead starts a read-only transaction whose reads all see one
// snapshot (SQLite's WAL readers do; PostgreSQL needs REPEATABLE READ).
func (db *DB) beginRead(ctx context.Context) (*txn, error) {
	var opts *sql.TxOptions
	if db.pg {
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	tx, err := db.r.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &txn{Tx: tx, pg: db.pg}, nil
}

// millis is how every time is stored: unix milliseconds, UTC.
func millis(t time.Time) int64 { return t.UnixMilli() }

// fromMillis is the inverse of millis.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// nullMillis stores the zero time as NULL ("never").
func nullMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// fromNullMillis is the inverse of nullMillis.
func fromNullMillis(ms sql.NullInt64) time.Time {
	if !ms.Valid {
		return time.Time{}
	}
	return fromMillis(ms.Int64)
}

// orNow returns t, or the store's clock when t is zero.
func (db *DB) orNow(t time.Time) time.Time {
	if t.IsZero() {
		return db.now()
	}
	return t
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// needID rejects an empty primary key: ids are the caller's to generate
// (corral.NewID), and an empty one is a bug, not a user's mistake.
func needID(op, id string) error {
	if id == "" {
		return corral.Internal(op, errors.New("empty id"))
	}
	return nil
}

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner interface {
	Scan(dest ...any) error
}

// collect scans every row with scan, then closes rows.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// stmts caches prepared statements by their text. SQLite spends most of a
// small query's time parsing it: preparing each statement once per
// connection (database/sql does that per *sql.Stmt) multiplied the
// throughput of the hottest reads, the session lookup and the agent list.
type stmts struct {
	pool *sql.DB
	pg   bool // translate to PostgreSQL's dialect
	mu   sync.Mutex
	m    map[string]*sql.Stmt
}

func (c *stmts) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[query]; ok {
		return s, nil
	}
	text := query
	if c.pg {
		text = pgQuery(query)
	}
	s, err := c.pool.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = s
	return s, nil
}

func (c *stmts) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, s := range c.m {
		errs = append(errs, s.Close())
	}
	c.m = nil
	return errors.Join(errs...)
}

// errRow is a row whose query could not be prepared.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// queryRow runs a cached read statement that returns at most one row.
func (db *DB) queryRow(ctx context.Context, query string, args ...any) scanner {
	s, err := db.rs.get(ctx, query)
	if err != nil {
		return errRow{err}
	}
	if db.pg {
		args = pgArgs(args)
	}
	return s.QueryRowContext(ctx, args...)
}

// query runs a cached read statement.
func (db *DB) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := db.rs.get(ctx, query)
	if err != nil {
		return nil, err
	}
	if db.pg {
		args = pgArgs(args)
	}
	return s.QueryContext(ctx, args...)
}

// exec runs a cached write statement outside a transaction (on
// PostgreSQL, in one of its own, under the write lock: see begin).
func (db *DB) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return db.execWrite(ctx, true, query, args...)
}

// execWrite is exec, fenced or not (see beginWrite).
func (db *DB) execWrite(ctx context.Context, fenced bool, query string, args ...any) (sql.Result, error) {
	if db.pg {
		tx, err := db.beginWrite(ctx, fenced)
		if err != nil {
			return nil, err
		}
		defer rollback(tx)
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		return res, tx.Commit()
	}
	s, err := db.ws.get(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}
