package store

import (
	"context"
	"corral/internal/pgtest"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"corral"

	"github.com/pressly/goose/v3"
	sqlite3 "modernc.org/sqlite/lib"
)

// t0 is the tests' "now": times are passed in, never read from the clock.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

// newDB opens a fresh database whose clock stands at t0: a file in a
// temporary directory, or, when the suite runs on PostgreSQL
// (CORRAL_STORE_TEST=postgres), a new database on the tests' server.
func newDB(t *testing.T) *DB {
	t.Helper()
	if onPostgres() {
		return openPG(t, newPGDatabase(t))
	}
	return openAt(t, filepath.Join(t.TempDir(), "corral.db"))
}

// newDBs opens n handles on one fresh store, as n servers sharing it.
func newDBs(t testing.TB, n int) []*DB {
	t.Helper()
	var open func() *DB
	if onPostgres() {
		url := newPGDatabase(t)
		open = func() *DB { return openPG(t, url) }
	} else {
		path := filepath.Join(t.TempDir(), "corral.db")
		open = func() *DB { return openAt(t, path) }
	}
	var dbs []*DB
	for range n {
		dbs = append(dbs, open())
	}
	return dbs
}

// onPostgres says whether the suite runs on PostgreSQL.
func onPostgres() bool { return os.Getenv("CORRAL_STORE_TEST") == "postgres" }

// sqliteOnly skips a test of what only the SQLite store has (its file,
// its migrations' history) when the suite runs on PostgreSQL.
func sqliteOnly(t *testing.T) {
	t.Helper()
	if onPostgres() {
		t.Skip("of the SQLite store only")
	}
}

func openPG(t testing.TB, url string) *DB {
	t.Helper()
	db, err := OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	db.now = func() time.Time { return t0 }
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func openAt(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	db.now = func() time.Time { return t0 }
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// wantCode fails the test unless err carries code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := corral.ErrorCode(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}

// wantNotFound fails the test unless err is NotFound(kind).
func wantNotFound(t *testing.T, err error, kind string) {
	t.Helper()
	var e *corral.Error
	if !errors.As(err, &e) || e.Code != corral.ENOTFOUND || e.Message != kind+" not found" {
		t.Fatalf("error = %v, want NotFound(%q)", err, kind)
	}
}

var userSeq int

// mustUser creates an account with a unique email.
func mustUser(t testing.TB, db *DB, name string) corral.User {
	t.Helper()
	userSeq++
	u, err := db.CreateUser(context.Background(), corral.NewUser{
		Email:        fmt.Sprintf("%s-%d@example.com", name, userSeq),
		Name:         name,
		PasswordHash: "$argon2id$fake",
	})
	if err != nil {
		t.Fatalf("CreateUser(%s): %v", name, err)
	}
	return u
}

func TestOpenTwice(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("first Open: %v", err)
	}
	u, err := db.CreateUser(ctx, corral.NewUser{Email: "a@example.com", Name: "A", PasswordHash: "$argon2id$fake"})
	if err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// Reopening applies nothing and keeps the data; so does a second
	// handle on a file that is still open.
	db1 := openAt(t, path)
	db2 := openAt(t, path)
	for i, db := range []*DB{db1, db2} {
		got, err := db.UserByID(ctx, u.ID)
		if err != nil {
			t.Fatalf("handle %d: UserByID: %v", i, err)
		}
		if got != u {
			t.Errorf("handle %d: UserByID = %+v, want %+v", i, got, u)
		}
		var applied int
		if err := db.queryRow(ctx,
			`SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil {
			t.Fatalf("handle %d: count migrations: %v", i, err)
		}
		if want := len(mustMigrations(t)) + len(goMigrations); applied != want {
			t.Errorf("handle %d: %d migrations recorded, want %d", i, applied, want)
		}
	}
}

// downTo takes db's schema back to version the way goose goes down, so
// that the next Open runs the migrations after it again, on the rows the
// test left.
func downTo(t *testing.T, db *DB, version int64) {
	t.Helper()
	fsys, err := fs.Sub(migrations, "migrations/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db.w, fsys, goose.WithGoMigrations(goMigrations...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
}

func mustMigrations(t *testing.T) []string {
	t.Helper()
	names, err := migrations.ReadDir("migrations/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, n := range names {
		s = append(s, n.Name())
	}
	return s
}

func TestPragmas(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	db := newDB(t)
	pools := []struct {
		name      string
		conns     int
		queryOnly int
	}{
		{"writer", 1, 0},
		{"reader", readers, 1},
	}
	for _, p := range pools {
		t.Run(p.name, func(t *testing.T) {
			pool := db.w
			if p.name == "reader" {
				pool = db.r
			}
			// Hold every connection of the pool at once, so each one is
			// checked, not the same idle one again and again.
			for i := range p.conns {
				conn, err := pool.Conn(ctx)
				if err != nil {
					t.Fatalf("conn %d: %v", i, err)
				}
				defer conn.Close()
				want := []struct {
					pragma string
					value  string
				}{
					{"foreign_keys", "1"},
					{"journal_mode", "wal"},
					{"busy_timeout", "10000"},
					{"synchronous", "2"}, // FULL
					{"query_only", fmt.Sprint(p.queryOnly)},
				}
				for _, w := range want {
					var got string
					if err := conn.QueryRowContext(ctx, "PRAGMA "+w.pragma).Scan(&got); err != nil {
						t.Fatalf("conn %d: PRAGMA %s: %v", i, w.pragma, err)
					}
					if got != w.value {
						t.Errorf("conn %d: PRAGMA %s = %q, want %q", i, w.pragma, got, w.value)
					}
				}
			}
		})
	}
	if got := db.r.Stats().MaxOpenConnections; got != readers {
		t.Errorf("reader MaxOpenConnections = %d, want %d", got, readers)
	}
	if got := db.w.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("writer MaxOpenConnections = %d, want 1", got)
	}
}

func TestReaderCannotWrite(t *testing.T) {
	sqliteOnly(t)
	db := newDB(t)
	_, err := db.r.ExecContext(context.Background(),
		`INSERT INTO users (id, email, name, password_hash, created_at) VALUES ('x', 'x', 'x', 'x', 0)`)
	if code := sqliteCode(err); code&0xff != sqlite3.SQLITE_READONLY {
		t.Fatalf("insert through the reader pool: %v (code %d), want SQLITE_READONLY", err, code)
	}
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "corral")
	path := filepath.Join(dir, "corral.db")
	openAt(t, path)
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{
		{dir, 0o700 | os.ModeDir},
		{path, 0o600},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.mode {
			t.Errorf("mode of %s = %v, want %v", c.path, fi.Mode(), c.mode)
		}
	}
}

func TestOpenOddPath(t *testing.T) {
	// Characters that mean something in a file: URI.
	path := filepath.Join(t.TempDir(), "a?b#c%20d&e", "corral.db")
	db := openAt(t, path)
	mustUser(t, db, "odd")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database is not at %q: %v", path, err)
	}
}

// TestOpenConcurrently: processes opening one new file at the same moment
// (a server's first start and `corral node token` pasted right after it)
// do not both migrate it ("table users already exists"): every Open
// succeeds, and an OpenExisting meanwhile either waits for the migration
// and succeeds or says plainly that there is no database yet.
func TestOpenConcurrently(t *testing.T) {
	ctx := context.Background()
	for round := range 5 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("round%d.db", round))
		errs := make(chan error, 8)
		for i := range cap(errs) {
			go func() {
				open := Open
				if i%4 == 3 {
					open = OpenExisting
				}
				db, err := open(ctx, path)
				if err == nil {
					err = db.Close()
				} else if i%4 == 3 && (corral.ErrorCode(err) == corral.ENOTFOUND || corral.ErrorCode(err) == corral.EUNAVAIL) {
					err = nil // it came first: nothing there yet
				}
				errs <- err
			}()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// TestOpenExisting: OpenExisting opens a migrated file, and refuses, with
// what to do, a path with no file, and a file no server has migrated,
// creating neither.
func TestOpenExisting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	migrated := filepath.Join(dir, "corral.db")
	openAt(t, migrated)
	db, err := OpenExisting(ctx, migrated)
	if err != nil {
		t.Fatalf("OpenExisting of a migrated file: %v", err)
	}
	db.Close()

	missing := filepath.Join(dir, "nowhere", "corral.db")
	_, err = OpenExisting(ctx, missing)
	wantCode(t, err, corral.ENOTFOUND)
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Fatalf("OpenExisting made %s (%v)", filepath.Dir(missing), err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenExisting(ctx, empty)
	wantCode(t, err, corral.EUNAVAIL)
}

// TestMain runs the suite with a PostgreSQL server at hand, started when
// a test first asks for a database (the suite on PostgreSQL, the copy).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newPGDatabase(t testing.TB) string { return pgtest.NewDatabase(t) }
