package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"corral"
)

func TestCreateUserFirstIsAdmin(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	cases := []struct {
		name      string
		forced    bool
		wantAdmin bool
	}{
		{"first account", false, true},
		{"second account", false, false},
		{"forced admin", true, true},
		{"fourth account", false, false},
	}
	for i, c := range cases {
		u, err := db.CreateUser(ctx, corral.NewUser{
			Email: fmt.Sprintf("u%d@example.com", i), Name: c.name,
			PasswordHash: "$argon2id$fake", Admin: c.forced,
		})
		if err != nil {
			t.Fatalf("%s: CreateUser: %v", c.name, err)
		}
		if u.Admin != c.wantAdmin {
			t.Errorf("%s: Admin = %v, want %v", c.name, u.Admin, c.wantAdmin)
		}
		stored, err := db.UserByID(ctx, u.ID)
		if err != nil {
			t.Fatalf("%s: UserByID: %v", c.name, err)
		}
		if stored != u {
			t.Errorf("%s: stored %+v, CreateUser returned %+v", c.name, stored, u)
		}
	}
}

func TestCreateUserConcurrentFirstAdmin(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	// Two handles on one file, as two processes would have: the writers
	// contend inside SQLite, not only in database/sql's pool.
	dbs := []*DB{openAt(t, path), openAt(t, path)}

	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = dbs[i%2].CreateUser(ctx, corral.NewUser{
				Email: fmt.Sprintf("u%d@example.com", i), Name: "U", PasswordHash: "$argon2id$fake",
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("CreateUser %d: %v", i, err)
		}
	}
	users, err := dbs[0].Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admins := 0
	for _, u := range users {
		if u.Admin {
			admins++
		}
	}
	if len(users) != n || admins != 1 {
		t.Errorf("%d users with %d admins, want %d users with 1 admin", len(users), admins, n)
	}
}

func TestCreateUserDuplicateEmail(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	nu := corral.NewUser{Email: "a@example.com", Name: "A", PasswordHash: "$argon2id$fake"}
	if _, err := db.CreateUser(ctx, nu); err != nil {
		t.Fatal(err)
	}
	_, err := db.CreateUser(ctx, nu)
	wantCode(t, err, corral.ECONFLICT)
	if msg := corral.ErrorMessage(err); msg != "email already registered" {
		t.Errorf("message = %q, want %q", msg, "email already registered")
	}
	if n, err := countUsers(ctx, db); err != nil || n != 1 {
		t.Errorf("CountUsers = %d, %v; want 1, nil", n, err)
	}
}

func TestUserReads(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	a := mustUser(t, db, "a")
	b := mustUser(t, db, "b")

	if a.CreatedAt != t0.Truncate(time.Millisecond) {
		t.Errorf("CreatedAt = %v, want %v", a.CreatedAt, t0.Truncate(time.Millisecond))
	}
	if got, err := db.UserByEmail(ctx, b.Email); err != nil || got != b {
		t.Errorf("UserByEmail(%q) = %+v, %v; want %+v", b.Email, got, err, b)
	}
	users, err := db.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 {
		t.Fatalf("Users = %+v, want a and b", users)
	}
	// Same created_at: the tie is broken by id.
	if users[0].ID > users[1].ID {
		t.Errorf("Users not ordered by (created_at, id): %+v", users)
	}
	if n, err := countUsers(ctx, db); err != nil || n != 2 {
		t.Errorf("CountUsers = %d, %v; want 2, nil", n, err)
	}

	cred, err := db.Credential(ctx, a.Email)
	if err != nil {
		t.Fatal(err)
	}
	if want := (corral.Credential{UserID: a.ID, PasswordHash: "$argon2id$fake"}); cred != want {
		t.Errorf("Credential = %+v, want %+v", cred, want)
	}

	missing := []struct {
		name string
		call func() error
	}{
		{"UserByID", func() error { _, err := db.UserByID(ctx, "usr_nope"); return err }},
		{"UserByEmail", func() error { _, err := db.UserByEmail(ctx, "nope@example.com"); return err }},
		{"Credential", func() error { _, err := db.Credential(ctx, "nope@example.com"); return err }},
		{"SetDisabled", func() error { return db.SetDisabled(ctx, "usr_nope", true, "") }},
	}
	for _, m := range missing {
		t.Run(m.name, func(t *testing.T) { wantNotFound(t, m.call(), "user") })
	}
}

func TestSessions(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	u := mustUser(t, db, "a")
	expires := t0.Add(time.Hour)
	s := corral.Session{ID: corral.NewID("ses"), UserID: u.ID, TokenHash: []byte("hash-1"), ExpiresAt: expires}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}

	via := u
	via.Via = s.ID // the session it was authenticated by
	cases := []struct {
		name string
		hash string
		now  time.Time
		ok   bool
	}{
		{"live", "hash-1", t0, true},
		{"a millisecond before expiry", "hash-1", expires.Add(-time.Millisecond), true},
		{"at expiry", "hash-1", expires, false},
		{"after expiry", "hash-1", expires.Add(time.Minute), false},
		{"unknown token", "hash-2", t0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := db.SessionUser(ctx, []byte(c.hash), c.now)
			if !c.ok {
				wantNotFound(t, err, "session")
				return
			}
			if err != nil || got != via {
				t.Fatalf("SessionUser = %+v, %v; want %+v", got, err, via)
			}
		})
	}

	t.Run("duplicate hash", func(t *testing.T) {
		dup := s
		dup.ID = corral.NewID("ses")
		wantCode(t, db.CreateSession(ctx, dup), corral.ECONFLICT)
	})
	t.Run("unknown user", func(t *testing.T) {
		bad := corral.Session{ID: corral.NewID("ses"), UserID: "usr_nope", TokenHash: []byte("x"), ExpiresAt: expires}
		wantNotFound(t, db.CreateSession(ctx, bad), "user")
	})

	t.Run("delete", func(t *testing.T) {
		if err := db.DeleteSession(ctx, []byte("hash-1")); err != nil {
			t.Fatal(err)
		}
		_, err := db.SessionUser(ctx, []byte("hash-1"), t0)
		wantNotFound(t, err, "session")
		wantNotFound(t, db.DeleteSession(ctx, []byte("hash-1")), "session")
	})

	t.Run("delete expired", func(t *testing.T) {
		for i, exp := range []time.Time{t0.Add(-time.Minute), t0, t0.Add(time.Minute)} {
			s := corral.Session{ID: corral.NewID("ses"), UserID: u.ID, TokenHash: fmt.Appendf(nil, "e%d", i), ExpiresAt: exp}
			if err := db.CreateSession(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		// Expired at t0 includes the one expiring exactly then.
		n, err := db.DeleteExpiredSessions(ctx, t0)
		if err != nil || n != 2 {
			t.Fatalf("DeleteExpiredSessions = %d, %v; want 2, nil", n, err)
		}
		if _, err := db.SessionUser(ctx, []byte("e2"), t0); err != nil {
			t.Errorf("live session was deleted: %v", err)
		}
	})
}

func TestSetDisabled(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	u := mustUser(t, db, "a")
	other := mustUser(t, db, "b")
	for i, id := range []string{u.ID, u.ID, other.ID} {
		s := corral.Session{ID: corral.NewID("ses"), UserID: id, TokenHash: fmt.Appendf(nil, "s%d", i), ExpiresAt: t0.Add(time.Hour)}
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	if err := db.SetDisabled(ctx, u.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.queryRow(ctx, `SELECT count(*) FROM sessions WHERE user_id = ?`, u.ID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d sessions left after disabling, want 0", left)
	}
	if _, err := db.SessionUser(ctx, []byte("s2"), t0); err != nil {
		t.Errorf("another account's session was affected: %v", err)
	}
	if got, _ := db.UserByID(ctx, u.ID); !got.Disabled {
		t.Errorf("UserByID after disabling: Disabled = false")
	}
	if c, _ := db.Credential(ctx, u.Email); !c.Disabled {
		t.Errorf("Credential after disabling: Disabled = false")
	}

	// A session that exists anyway does not let a disabled account in.
	late := corral.Session{ID: corral.NewID("ses"), UserID: u.ID, TokenHash: []byte("late"), ExpiresAt: t0.Add(time.Hour)}
	if err := db.CreateSession(ctx, late); err != nil {
		t.Fatal(err)
	}
	_, err := db.SessionUser(ctx, []byte("late"), t0)
	wantNotFound(t, err, "session")

	if err := db.SetDisabled(ctx, u.ID, false, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SessionUser(ctx, []byte("late"), t0); err != nil {
		t.Errorf("SessionUser after enabling again: %v", err)
	}
}

func TestTokens(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	other := mustUser(t, db, "other")
	tok := corral.APIToken{ID: corral.NewID("tok"), UserID: owner.ID, Name: "ci", CreatedAt: t0}
	hash := []byte("token-hash")
	if err := db.CreateToken(ctx, tok, hash); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.CreateToken(ctx, corral.APIToken{ID: corral.NewID("tok"), UserID: other.ID}, hash), corral.ECONFLICT)
	wantNotFound(t, db.CreateToken(ctx, corral.APIToken{ID: corral.NewID("tok"), UserID: "usr_nope"}, []byte("h2")), "user")

	lastUsed := func() time.Time {
		t.Helper()
		ts, err := db.Tokens(ctx, owner.ID)
		if err != nil || len(ts) != 1 {
			t.Fatalf("Tokens = %+v, %v; want one token", ts, err)
		}
		return ts[0].LastUsed
	}
	if lu := lastUsed(); !lu.IsZero() {
		t.Fatalf("LastUsed of a new token = %v, want zero", lu)
	}

	uses := []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{"first use", t0, t0},
		{"within a minute", t0.Add(59 * time.Second), t0},
		{"a minute later", t0.Add(time.Minute), t0},
		{"over a minute later", t0.Add(61 * time.Second), t0.Add(61 * time.Second)},
		{"an earlier clock", t0, t0.Add(61 * time.Second)},
	}
	via := owner
	via.Via = tok.ID // the token it was authenticated by
	for _, u := range uses {
		got, err := db.TokenUser(ctx, hash, u.now)
		if err != nil || got != via {
			t.Fatalf("%s: TokenUser = %+v, %v; want %+v", u.name, got, err, via)
		}
		if lu := lastUsed(); !lu.Equal(u.want.Truncate(time.Millisecond)) {
			t.Errorf("%s: LastUsed = %v, want %v", u.name, lu, u.want)
		}
	}

	_, err := db.TokenUser(ctx, []byte("unknown"), t0)
	wantNotFound(t, err, "token")

	if ts, err := db.Tokens(ctx, other.ID); err != nil || len(ts) != 0 {
		t.Errorf("Tokens(other) = %+v, %v; want none", ts, err)
	}
	wantNotFound(t, db.DeleteToken(ctx, other.ID, tok.ID), "token")
	if _, err := db.TokenUser(ctx, hash, t0); err != nil {
		t.Fatalf("token stopped working after another user's delete: %v", err)
	}

	if err := db.SetDisabled(ctx, owner.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	_, err = db.TokenUser(ctx, hash, t0)
	wantNotFound(t, err, "token")
	if err := db.SetDisabled(ctx, owner.ID, false, ""); err != nil {
		t.Fatal(err)
	}

	if err := db.DeleteToken(ctx, owner.ID, tok.ID); err != nil {
		t.Fatal(err)
	}
	_, err = db.TokenUser(ctx, hash, t0)
	wantNotFound(t, err, "token")
	wantNotFound(t, db.DeleteToken(ctx, owner.ID, tok.ID), "token")
}

func TestInvites(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	admin := mustUser(t, db, "admin")
	expires := t0.Add(24 * time.Hour)
	invite := func(hash string) {
		t.Helper()
		inv := corral.Invite{ID: corral.NewID("inv"), CreatedBy: admin.ID, CreatedAt: t0, ExpiresAt: expires}
		if err := db.CreateInvite(ctx, inv, []byte(hash)); err != nil {
			t.Fatal(err)
		}
	}
	invite("inv-1")
	invite("inv-2")
	wantNotFound(t, db.CreateInvite(ctx, corral.Invite{ID: corral.NewID("inv"), CreatedBy: "usr_nope", ExpiresAt: expires}, []byte("inv-3")), "user")
	nu := func(email string) corral.NewUser {
		return corral.NewUser{Email: email, Name: "N", PasswordHash: "$argon2id$fake"}
	}

	// A taken email fails the signup and leaves the invite unused.
	_, err := db.CreateUserWithInvite(ctx, []byte("inv-1"), t0, nu(admin.Email))
	wantCode(t, err, corral.ECONFLICT)

	u, err := db.CreateUserWithInvite(ctx, []byte("inv-1"), t0, nu("new@example.com"))
	if err != nil {
		t.Fatalf("CreateUserWithInvite: %v", err)
	}
	if u.Admin {
		t.Errorf("invited account is an admin")
	}
	if got, err := db.UserByEmail(ctx, "new@example.com"); err != nil || got != u {
		t.Errorf("UserByEmail = %+v, %v; want %+v", got, err, u)
	}
	var usedBy string
	if err := db.queryRow(ctx, `SELECT used_by FROM invites WHERE token_hash = ?`, []byte("inv-1")).Scan(&usedBy); err != nil || usedBy != u.ID {
		t.Errorf("invite used_by = %q, %v; want %q", usedBy, err, u.ID)
	}

	refused := []struct {
		name string
		hash string
		now  time.Time
	}{
		{"used", "inv-1", t0},
		{"at expiry", "inv-2", expires},
		{"after expiry", "inv-2", expires.Add(time.Hour)},
		{"unknown", "inv-9", t0},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			_, err := db.CreateUserWithInvite(ctx, []byte(c.hash), c.now, nu("x-"+c.name+"@example.com"))
			wantNotFound(t, err, "invite")
		})
	}
	if n, _ := countUsers(ctx, db); n != 2 {
		t.Errorf("CountUsers = %d, want 2", n)
	}
}

// countUsers reports how many accounts exist.
func countUsers(ctx context.Context, db *DB) (int, error) {
	us, err := db.Users(ctx)
	return len(us), err
}
