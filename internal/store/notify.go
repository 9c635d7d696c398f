package store

// Notifications: one control tells the others sharing a PostgreSQL store
// that something happened (NOTIFY), and they listen (LISTEN). A
// notification is a wake-up, never the record: what it is about is read
// from the store. PostgreSQL delivers one sender's notifications in the
// order sent, each once, to every listener connected then; a listener
// whose connection breaks may have missed some, and its Next says so.

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"corral"
)

// MaxNotification bounds a notification's payload in bytes: PostgreSQL
// refuses one of 8000 or more.
const MaxNotification = 7999

var errNoNotifications = corral.Errorf(corral.EUNAVAIL, "notifications between servers need a PostgreSQL store")

// Notify sends each payload on channel, in order, in one round trip. On
// SQLite, where one server is all there is, it does nothing.
func (db *DB) Notify(ctx context.Context, channel string, payloads []string) error {
	if !db.pg || len(payloads) == 0 {
		return nil
	}
	for _, p := range payloads {
		if len(p) > MaxNotification {
			return corral.Errorf(corral.EINVALID, "a notification of %d bytes is longer than %d", len(p), MaxNotification)
		}
	}
	// unnest yields the array's elements in order, and pg_notify is
	// called for each as it comes.
	_, err := db.w.ExecContext(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, channel, payloads)
	if err != nil {
		return corral.Internal("postgres.Notify", err)
	}
	return nil
}

// Listener receives the notifications sent on one channel, on a
// connection of its own.
type Listener struct {
	conn *pgx.Conn
}

// Listen connects and listens on channel. It fails on SQLite.
func (db *DB) Listen(ctx context.Context, channel string) (*Listener, error) {
	if !db.pg {
		return nil, errNoNotifications
	}
	conn, err := pgx.ConnectConfig(ctx, db.pgcfg)
	if err != nil {
		return nil, &corral.Error{Code: corral.EUNAVAIL, Err: err, Message: "cannot connect to PostgreSQL to listen: " + pgReason(err)}
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, corral.Internal("postgres.Listen", err)
	}
	return &Listener{conn: conn}, nil
}

// ErrListenerBroken is Next's error once the listener's connection has
// broken: notifications may have been missed since the last one
// received, and the listener is of no further use.
var ErrListenerBroken = errors.New("the listener's connection to PostgreSQL broke: notifications may have been missed")

// Next waits for the next notification's payload. Its error is ctx's
// when ctx ended, and wraps ErrListenerBroken otherwise.
func (l *Listener) Next(ctx context.Context) (string, error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%w: %v", ErrListenerBroken, err)
	}
	return n.Payload, nil
}

// Close ends the listener's connection.
func (l *Listener) Close(ctx context.Context) error { return l.conn.Close(ctx) }
