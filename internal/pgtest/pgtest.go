// Package pgtest gives tests a real PostgreSQL: a throwaway server that
// the test binary starts itself, and a fresh, empty database on it for
// each test that asks. Code that talks to PostgreSQL is tested against
// the real thing, never a fake of it.
//
// The server is started the first time a test asks for a database, from
// the PostgreSQL installed on the machine (initdb and postgres on PATH,
// else the newest under /usr/lib/postgresql/*/bin; `make postgres`
// installs Debian's). It lives in a directory of its own, in /dev/shm
// when that has room (a disk made it ten times as slow), else under
// os.TempDir(); it listens on 127.0.0.1 only, trades durability for
// speed (fsync off) and goes when the test binary exits, even when the
// binary is killed. As root it runs as nobody, since PostgreSQL refuses
// root.
//
// A package that calls NewDatabase must call Main from its TestMain,
// which stops the server once the tests are done:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// Without PostgreSQL the tests that need it skip, saying why; where it is
// expected (CI sets CORRAL_REQUIRE_POSTGRES=1) they fail instead, as they
// do when the server does not start.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env is the variable that turns "no PostgreSQL here" skips into
// failures. It is read here, not in cmd/, because it configures the test
// binary, not Corral.
const Env = "CORRAL_REQUIRE_POSTGRES"

// superuser is the server's one role; every database belongs to it.
const superuser = "corral_test"

// statementTimeout bounds CREATE and DROP DATABASE: far longer than they
// take even under CI's load, so a wedged server fails the test instead
// of hanging it until go test's timeout.
const statementTimeout = time.Minute

var (
	// inMain is set by Main: without it nothing would stop the server.
	inMain atomic.Bool

	// once starts the server for the whole binary; srv, or startErr,
	// is what it made.
	once     sync.Once
	srv      *server
	startErr error
)

// server is one running PostgreSQL.
type server struct {
	dir      string // its directory: data/, postgres.log, owner.pid
	port     int
	password string // the superuser's, made up at initdb
	version  string // server_version, for the log
	programs string // the directory of postgres, for the log

	cmd    *exec.Cmd
	exited chan struct{} // closed when the postmaster has exited
	waited error         // why it exited; read after exited is closed

	mu    sync.Mutex // guards admin
	admin *pgx.Conn  // to the "postgres" database: creates and drops the tests' databases
}

// Main runs the tests of m, then stops the server if one was started and
// removes its directory. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	inMain.Store(true)
	code := m.Run()
	// No test starts a server after this, and srv is safe to read: Do
	// returns only once any start in flight has finished.
	once.Do(func() {})
	if srv != nil {
		if err := srv.stop(); err != nil {
			// The tests are done and passed or failed on their own; a
			// directory left behind is removed by a later binary's sweep.
			fmt.Fprintf(os.Stderr, "pgtest: stop the server: %v\n", err)
		}
	}
	return code
}

// NewDatabase makes a new, empty database on the shared server and
// returns its URL (postgres://corral_test:PASSWORD@127.0.0.1:PORT/NAME
// ?sslmode=disable). The database is dropped when tb ends, connections
// still open to it or not. It skips tb when PostgreSQL is not installed,
// unless CORRAL_REQUIRE_POSTGRES=1.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	s := shared(tb)
	// A copy of template1: a few files copied, tens of milliseconds.
	name := "test_" + strings.ToLower(rand.Text()[:16])
	ident := pgx.Identifier{name}.Sanitize()
	if err := s.exec("CREATE DATABASE " + ident); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		// FORCE ends the sessions a test left open, which would
		// otherwise make DROP fail.
		if err := s.exec("DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return s.url(name)
}

// URL returns the URL of the shared server's maintenance database,
// "postgres", for a test that looks at the server as a whole (which
// databases exist, who is connected). Tests keep their own data in a
// NewDatabase.
func URL(tb testing.TB) string {
	tb.Helper()
	return shared(tb).url("postgres")
}

// shared returns the server, starting it on first use, or ends tb when
// there is none.
func shared(tb testing.TB) *server {
	tb.Helper()
	if !inMain.Load() {
		tb.Fatal("pgtest: this package's TestMain must call os.Exit(pgtest.Main(m)), which stops the server")
	}
	once.Do(func() {
		start := time.Now()
		srv, startErr = startServer()
		if startErr == nil {
			tb.Logf("pgtest: PostgreSQL %s (%s) started on 127.0.0.1:%d in %v", srv.version, srv.programs, srv.port, time.Since(start).Round(time.Millisecond))
		}
	})
	if startErr != nil {
		skip(tb, startErr)
	}
	return srv
}

// skipper is what skip needs of a test; testing.TB has it.
type skipper interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// skip skips t with the reason there is no server, or fails it where a
// server is required: a PostgreSQL test that silently skips in CI
// proves nothing.
func skip(t skipper, err error) {
	t.Helper()
	if os.Getenv(Env) == "1" {
		t.Fatalf("PostgreSQL is required here (%s=1): %v", Env, err)
		return
	}
	t.Skipf("%v", err)
}

// url is the URL of database db on s.
func (s *server) url(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, s.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// exec runs one statement on the maintenance database. Tests in parallel
// share one connection, one statement at a time: creating a database is
// quick, and a connection each would cost a SCRAM handshake each.
func (s *server) exec(sql string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
	defer cancel()
	if s.admin == nil || s.admin.IsClosed() {
		c, err := pgx.Connect(ctx, s.url("postgres"))
		if err != nil {
			return err
		}
		s.admin = c
	}
	if _, err := s.admin.Exec(ctx, sql); err != nil {
		// Whatever went wrong, the next statement starts on a fresh
		// connection rather than one that may be broken.
		s.admin.Close(ctx)
		s.admin = nil
		return err
	}
	return nil
}

// closeAdmin ends the maintenance connection before the server stops.
func (s *server) closeAdmin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.admin.Close(ctx)
		s.admin = nil
	}
}
