package service

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"corral"
	"corral/internal/auth"
	"corral/internal/secrets"
	"corral/internal/store"
)

// unwritable is a throttle state whose reads work and whose writes fail,
// as a store refusing writes (its disk full) would.
type unwritable struct{ auth.ThrottleState }

func (unwritable) Update(context.Context, time.Time, []string, func(string, *auth.ThrottleEntry)) error {
	return errors.New("disk full")
}

// TestLoginFailsClosed: a login or signup whose throttle's records cannot
// be read or written is refused as unavailable, whatever its password, and
// starts no session.
func TestLoginFailsClosed(t *testing.T) {
	// states returns the throttles' states in a store of their own, apart
	// from the accounts' store.
	states := func(t *testing.T, closed, readOnly bool) func(string) auth.ThrottleState {
		dir := t.TempDir()
		db, err := store.Open(context.Background(), filepath.Join(dir, "throttles.db"))
		if err != nil {
			t.Fatal(err)
		}
		key, _, err := secrets.LoadKeyFile(filepath.Join(dir, secrets.KeyFile))
		if err != nil {
			t.Fatal(err)
		}
		if closed {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Cleanup(func() { db.Close() })
		}
		return func(name string) auth.ThrottleState {
			if readOnly {
				return unwritable{db.ThrottleState(name, key.Digest)}
			}
			return db.ThrottleState(name, key.Digest)
		}
	}
	tests := []struct {
		name             string
		closed, readOnly bool
		password         string
		want             string
	}{
		{"store open, right password", false, false, testPassword, ""},
		{"store open, wrong password", false, false, wrong, corral.EUNAUTH},
		{"store closed, right password", true, false, testPassword, corral.EUNAVAIL},
		{"store closed, wrong password", true, false, wrong, corral.EUNAVAIL},
		{"writes fail, right password", false, true, testPassword, corral.EUNAVAIL},
		{"writes fail, wrong password", false, true, wrong, corral.EUNAVAIL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newLoginEnvConfig(t, Config{ThrottleState: states(t, tt.closed, tt.readOnly)})
			ctx := context.Background()
			_, token, err := e.s.Login(ctx, "alice@example.com", tt.password, netip.MustParseAddr(addrA))
			if got := corral.ErrorCode(err); got != tt.want || (err == nil) != (token != "") {
				t.Fatalf("Login = token %q, %v; want code %q", token, err, tt.want)
			}
			_, token, err = e.s.Signup(ctx, SignupInput{Email: "carol@example.com", Name: "c", Password: testPassword}, netip.MustParseAddr(addrB))
			want := tt.want
			if want == corral.EUNAUTH {
				want = ""
			}
			if got := corral.ErrorCode(err); got != want || (err == nil) != (token != "") {
				t.Fatalf("Signup = token %q, %v; want code %q", token, err, want)
			}
		})
	}
}
