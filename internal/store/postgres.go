package store

// The store on PostgreSQL. The queries are written once, in the subset of
// SQL both engines read alike, with SQLite's placeholders; pgQuery turns
// those into PostgreSQL's as a statement is prepared. Where the engines
// differ in more than placeholders (a JSON array's elements, a few
// functions), the query says so with db.pg. The schema has its own
// migrations (migrations/postgres), enforcing the same constraints and
// the same append-only triggers.
//
// Writes take turns (see begin): the guarantees the methods give were
// written for SQLite's one writer, and a transaction-scoped advisory lock
// gives them across any number of replicas on one database. Reads, the
// bulk of the work, run in parallel on the pool.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"corral"
)

// writeLock is the advisory lock every write transaction holds: "corral"
// in ASCII, so that it is recognisable in pg_locks.
const writeLock int64 = 0x636f7272616c

// pgConns bounds the connections one server opens.
const pgConns = 16

// PostgreSQL's SQLSTATE codes the store answers with an error code of its
// own.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
	pgRestrictViolation   = "23001" // what the schema's triggers raise
)

// pgArgs passes booleans as the 0 and 1 the schema stores (SQLite's
// driver does the same), so the columns and the queries stay one.
func pgArgs(args []any) []any {
	copied := false
	for i, a := range args {
		if b, ok := a.(bool); ok {
			if !copied {
				args, copied = append([]any(nil), args...), true
			}
			args[i] = boolInt(b)
		}
	}
	return args
}

// IsPostgresURL says whether s names a PostgreSQL database rather than a
// directory.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// OpenPostgres connects to the PostgreSQL database at url and brings its
// schema up to date. Several servers may do so at once: the migrations
// take turns under a session lock.
func OpenPostgres(ctx context.Context, url string) (*DB, error) {
	return openPostgres(ctx, url, true)
}

// OpenPostgresExisting connects to the PostgreSQL database at url only if
// its schema is this release's: it migrates nothing.
func OpenPostgresExisting(ctx context.Context, url string) (*DB, error) {
	return openPostgres(ctx, url, false)
}

func openPostgres(ctx context.Context, url string, migrateIt bool) (*DB, error) {
	const op = "store.OpenPostgres"
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// The URL may hold a password: say what is wrong with it, never it.
		return nil, corral.Errorf(corral.EINVALID, "the database URL is not a PostgreSQL connection URL")
	}
	pool := stdlib.OpenDB(*cfg)
	pool.SetMaxOpenConns(pgConns)
	pool.SetMaxIdleConns(pgConns)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pool.PingContext(pctx); err != nil {
		pool.Close()
		return nil, &corral.Error{Code: corral.EUNAVAIL, Err: err,
			Message: fmt.Sprintf("cannot reach the PostgreSQL database at %s:%d as %s: %s", cfg.Host, cfg.Port, cfg.User, pgReason(err))}
	}
	fsys, err := fs.Sub(migrations, "migrations/postgres")
	if err != nil {
		pool.Close()
		return nil, corral.Internal(op, err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		pool.Close()
		return nil, corral.Internal(op, err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, pool, fsys, goose.WithSessionLocker(locker))
	if err != nil {
		pool.Close()
		return nil, corral.Internal(op, err)
	}
	if migrateIt {
		_, err = p.Up(ctx)
	} else {
		var current, target int64
		current, target, err = p.GetVersions(ctx)
		if err == nil && (current == 0 || current != target) {
			pool.Close()
			return nil, corral.Errorf(corral.EUNAVAIL, "the PostgreSQL database is at schema version %d, and this release's is %d: "+
				"start this release's corral serve on it once, then try again", current, target)
		}
	}
	if err != nil {
		pool.Close()
		return nil, corral.Internal(op, fmt.Errorf("migrations: %w", err))
	}
	return &DB{w: pool, r: pool, ws: stmts{pool: pool, pg: true}, rs: stmts{pool: pool, pg: true}, now: time.Now, pg: true, pgcfg: cfg}, nil
}

// pgReason is what a connection error says, without the server's
// address again.
func pgReason(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return ce.Unwrap().Error()
	}
	return err.Error()
}

// pgCode returns the SQLSTATE of the PostgreSQL error in err's chain, or
// "" when there is none.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

var pgQueries sync.Map // SQLite text → PostgreSQL text

// sqliteHints are the words that steer SQLite's planner and mean
// nothing else: CROSS JOIN ... ON is an inner join in a fixed order, and
// INDEXED BY names the index to read. PostgreSQL's planner has statistics
// and takes neither.
var sqliteHints = regexp.MustCompile(`\bCROSS JOIN\b|\s+INDEXED BY \w+`)

// pgQuery translates a query from SQLite's dialect: its placeholders (?
// and ?NNN) become PostgreSQL's ($NNN), a bare ? numbered as SQLite does
// (one more than the largest number so far), and the planner's hints go.
// Text in quotes and comments is left alone.
func pgQuery(q string) string {
	if v, ok := pgQueries.Load(q); ok {
		return v.(string)
	}
	orig := q
	q = sqliteHints.ReplaceAllStringFunc(q, func(h string) string {
		if h == "CROSS JOIN" {
			return "JOIN"
		}
		return ""
	})
	var b strings.Builder
	b.Grow(len(q) + 8)
	largest := 0
	quoted := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		if !quoted && c == '-' && i+1 < len(q) && q[i+1] == '-' {
			// A comment, to the end of its line: an apostrophe in it
			// opens no string.
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				end = len(q) - i
			}
			b.WriteString(q[i : i+end])
			i += end - 1
			continue
		}
		if c == '\'' {
			quoted = !quoted // '' inside a string closes and reopens it
		}
		if c != '?' || quoted {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(q) && q[j] >= '0' && q[j] <= '9' {
			j++
		}
		n := largest + 1
		if j > i+1 {
			n, _ = strconv.Atoi(q[i+1 : j])
		}
		largest = max(largest, n)
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
		i = j - 1
	}
	out := b.String()
	pgQueries.Store(orig, out)
	return out
}
