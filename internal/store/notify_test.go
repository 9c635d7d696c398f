package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"corral"
)

// TestNotify: what one server sends on a channel reaches a listener on
// another, each payload once and in order, and nothing sent on another
// channel; a listener whose connection is cut says notifications may
// have been missed. On SQLite, one server alone, Notify does nothing and
// Listen says it needs PostgreSQL.
func TestNotify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbs := newDBs(t, 2)
	if !onPostgres() {
		if err := dbs[0].Notify(ctx, "runs", []string{"a"}); err != nil {
			t.Fatalf("Notify on SQLite = %v, want nil", err)
		}
		if _, err := dbs[0].Listen(ctx, "runs"); corral.ErrorCode(err) != corral.EUNAVAIL {
			t.Fatalf("Listen on SQLite = %v, want unavailable", err)
		}
		return
	}
	l, err := dbs[1].Listen(ctx, "runs")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	var want []string
	for i := range 300 {
		want = append(want, fmt.Sprintf("payload %d %s", i, strings.Repeat("x", i)))
	}
	if err := dbs[0].Notify(ctx, "other", []string{"not for runs"}); err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]string{want[:1], want[1:200], want[200:]} {
		if err := dbs[0].Notify(ctx, "runs", batch); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range want {
		got, err := l.Next(ctx)
		if err != nil || got != w {
			t.Fatalf("notification %d = %.20q, %v; want %.20q", i, got, err, w)
		}
	}
	if err := dbs[0].Notify(ctx, "runs", []string{strings.Repeat("x", MaxNotification+1)}); corral.ErrorCode(err) != corral.EINVALID {
		t.Fatalf("Notify with a payload too long = %v, want invalid", err)
	}

	// The listener's connection is cut (as a restarted database or a
	// network break would).
	var cut bool
	if err := dbs[0].r.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, l.conn.PgConn().PID()).Scan(&cut); err != nil || !cut {
		t.Fatalf("pg_terminate_backend = %v, %v", cut, err)
	}
	if _, err := l.Next(ctx); !errors.Is(err, ErrListenerBroken) {
		t.Fatalf("Next after the connection was cut = %v, want ErrListenerBroken", err)
	}
}
