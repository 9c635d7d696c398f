package app

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"corral"
	"corral/internal/auth"
	"corral/internal/pgtest"
	"corral/internal/secrets"
)

// TestLoginThrottlesAcrossATakeover: on a PostgreSQL store the login
// throttles' records are the store's, so a control that takes over from
// another refuses an account the first locked; on SQLite, one server's,
// they stay in its memory and the store holds none.
func TestLoginThrottlesAcrossATakeover(t *testing.T) {
	const email, password = "alice@example.com", "correct horse battery"
	const key = "acct:" + email
	cheap := WithPasswordParams(auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})
	// A clock that stands still: the lock the failures set lasts.
	now := time.Now()
	clock := WithClock(func() time.Time { return now })
	client := netip.MustParseAddr("192.0.2.1")
	tests := []struct {
		name     string
		postgres bool
		want     string // the new control's answer to the right password
	}{
		{"postgres", true, corral.ETHROTTLED},
		{"sqlite", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := Config{Role: "control", Data: t.TempDir()}
			if tt.postgres {
				cfg.Database = pgtest.NewDatabase(t)
			}
			a, err := New(ctx, cfg, cheap, clock)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Accounts.CreateUser(ctx, email, "Alice", password, false); err != nil {
				a.Close()
				t.Fatal(err)
			}
			for i := range 5 {
				if _, _, err := a.Accounts.Login(ctx, email, "not the password", client); corral.ErrorCode(err) != corral.EUNAUTH {
					a.Close()
					t.Fatalf("failure %d: Login = %v, want unauthenticated", i+1, err)
				}
			}
			secret, _, err := secrets.LoadKeyFile(filepath.Join(cfg.Data, secrets.KeyFile))
			if err != nil {
				t.Fatal(err)
			}
			entries, err := a.Store.ThrottleState("login", secret.Digest).Entries(ctx, []string{key})
			if err != nil {
				t.Fatal(err)
			}
			a.Close() // the next takes the lease at once
			if e, kept := entries[key]; tt.postgres != kept || (kept && e.Streak != 5) {
				t.Fatalf("the store's record of %s = %+v, %v; want one of 5 failures only on PostgreSQL", key, e, kept)
			}

			b, err := New(ctx, cfg, cheap, clock)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, _, err = b.Accounts.Login(ctx, email, password, client)
			if got := corral.ErrorCode(err); got != tt.want {
				t.Fatalf("the right password on the control that took over: %v, want code %q", err, tt.want)
			}
		})
	}
}
