package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"corral/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// connect opens a connection to url that ends with t.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect to %s: %v", redact(url), err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// redact hides the password of a URL in a message.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func TestNewDatabase(t *testing.T) {
	var urls []string
	for range 2 {
		start := time.Now()
		urls = append(urls, pgtest.NewDatabase(t))
		t.Logf("NewDatabase took %v", time.Since(start))
	}
	var names []string
	for _, u := range urls {
		c := connect(t, u)
		var name string
		if err := c.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatalf("current_database(): %v", err)
		}
		names = append(names, name)
		var tables int
		if err := c.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
			t.Fatalf("count tables: %v", err)
		}
		if tables != 0 {
			t.Errorf("database %s has %d tables in public, want none: it is not new", name, tables)
		}
		// The other database's table must not be here: the first loop
		// makes it, the second finds none.
		for _, stmt := range []string{
			"CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL)",
			"INSERT INTO notes VALUES (1, 'in " + name + "')",
		} {
			if _, err := c.Exec(t.Context(), stmt); err != nil {
				t.Fatalf("%s in %s: %v", stmt, name, err)
			}
		}
		var body string
		if err := c.QueryRow(t.Context(), "SELECT body FROM notes WHERE id = 1").Scan(&body); err != nil {
			t.Fatalf("select in %s: %v", name, err)
		}
		if want := "in " + name; body != want {
			t.Errorf("body in %s = %q, want %q", name, body, want)
		}
	}
	if names[0] == names[1] {
		t.Errorf("two calls gave the same database %s", names[0])
	}
}

func TestNewDatabaseParallel(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			c := connect(t, pgtest.NewDatabase(t))
			var one int
			if err := c.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Errorf("SELECT 1 = %d, %v; want 1", one, err)
			}
		})
	}
}

func TestDropOnCleanup(t *testing.T) {
	admin := connect(t, pgtest.URL(t))
	exists := func(t *testing.T, name string) bool {
		t.Helper()
		var n int
		if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			t.Fatalf("look for %s in pg_database: %v", name, err)
		}
		return n == 1
	}

	var name string
	var open *pgx.Conn
	t.Cleanup(func() {
		if open != nil {
			open.Close(context.Background())
		}
	})
	t.Run("use", func(t *testing.T) {
		u := pgtest.NewDatabase(t)
		// A session still open when the drop comes, as a test that
		// forgets to close its pool leaves one: closed by the parent
		// test, after the subtest's cleanup has dropped the database.
		c, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatalf("connect to %s: %v", redact(u), err)
		}
		open = c
		if err := c.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatalf("current_database(): %v", err)
		}
		if !exists(t, name) {
			t.Fatalf("database %s is not in pg_database while in use", name)
		}
	})
	if name == "" {
		t.Fatal("the subtest made no database")
	}
	if exists(t, name) {
		t.Errorf("database %s is still in pg_database after its test ended", name)
	}
}

func TestPasswordRequired(t *testing.T) {
	good := pgtest.NewDatabase(t)
	tests := []struct {
		name    string
		user    *url.Userinfo
		refused bool
	}{
		{name: "the right password", user: nil, refused: false},
		{name: "a wrong password", user: url.UserPassword("corral_test", "not-the-password"), refused: true},
		{name: "no password", user: url.User("corral_test"), refused: true},
		{name: "another user", user: url.UserPassword("postgres", "postgres"), refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(good)
			if err != nil {
				t.Fatal(err)
			}
			if tt.user != nil {
				u.User = tt.user
			}
			// No PGPASSWORD or ~/.pgpass may stand in for the missing one.
			t.Setenv("PGPASSWORD", "")
			t.Setenv("PGPASSFILE", os.DevNull)
			c, err := pgx.Connect(t.Context(), u.String())
			if err == nil {
				c.Close(context.Background())
			}
			if !tt.refused {
				if err != nil {
					t.Fatalf("connect with %s: %v", tt.name, err)
				}
				return
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
				t.Errorf("connect with %s: %v, want the server's invalid_password (28P01)", tt.name, err)
			}
		})
	}
}
