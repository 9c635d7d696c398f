package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"corral"
)

// userColumns selects a user without its password hash, from a users table
// aliased u. Only Credential ever reads password_hash.
const userColumns = `u.id, u.email, u.name, u.admin, u.disabled, u.created_at`

func scanUser(s scanner) (corral.User, error) {
	var u corral.User
	var created int64
	err := s.Scan(&u.ID, &u.Email, &u.Name, &u.Admin, &u.Disabled, &created)
	u.CreatedAt = fromMillis(created)
	return u, err
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// insertUser inserts an account on q, which must be the writer or one of
// its transactions. The admin flag is decided by the same statement that
// inserts the row: the first account is an admin whatever u.Admin says, and
// no two concurrent first accounts can both see an empty table.
func insertUser(ctx context.Context, q querier, op string, u corral.NewUser, now time.Time) (corral.User, error) {
	user := corral.User{
		ID:        corral.NewID("usr"),
		Email:     u.Email,
		Name:      u.Name,
		CreatedAt: fromMillis(millis(now)),
	}
	err := q.QueryRowContext(ctx, `
		INSERT INTO users (id, email, name, password_hash, admin, disabled, created_at)
		VALUES (?1, ?2, ?3, ?4, CASE WHEN ?5 = 1 OR NOT EXISTS (SELECT 1 FROM users) THEN 1 ELSE 0 END, 0, ?6)
		RETURNING admin`,
		user.ID, u.Email, u.Name, u.PasswordHash, boolInt(u.Admin), millis(now),
	).Scan(&user.Admin)
	if isUnique(err) {
		return corral.User{}, conflict("email already registered")
	}
	if err != nil {
		return corral.User{}, corral.Internal(op, err)
	}
	return user, nil
}

// CreateUser stores a new account; the first one is an admin.
func (db *DB) CreateUser(ctx context.Context, u corral.NewUser) (corral.User, error) {
	const op = "sqlite.CreateUser"
	var user corral.User
	err := db.write(ctx, op, func(tx *txn) error {
		now := db.now()
		var err error
		if user, err = insertUser(ctx, tx, op, u, now); err != nil {
			return err
		}
		origin := u.Origin
		if origin == "" {
			origin = "signup"
		}
		return recordCreated(ctx, tx, op, now, user.ID, origin)
	})
	if err != nil {
		return corral.User{}, err
	}
	return user, nil
}

// recordCreated records that account id was made: by itself at signup, or on
// the command line.
func recordCreated(ctx context.Context, tx *txn, op string, now time.Time, id, origin string) error {
	actor := id
	if origin == "cli" {
		actor = ""
	}
	if err := recordAccount(ctx, tx, now, corral.AccountEvent{Type: corral.AccountCreated, Actor: actor, User: id, Detail: origin}); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}

// HasUsers reports whether any account exists: until one does, the next
// signup makes the server's first administrator.
func (db *DB) HasUsers(ctx context.Context) (bool, error) {
	var exists bool
	if err := db.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&exists); err != nil {
		return false, corral.Internal("sqlite.HasUsers", err)
	}
	return exists, nil
}

// UserByID returns an account by id.
func (db *DB) UserByID(ctx context.Context, id string) (corral.User, error) {
	u, err := scanUser(db.queryRow(ctx,
		`SELECT `+userColumns+` FROM users u WHERE u.id = ?`, id))
	return u, userErr("sqlite.UserByID", err)
}

// UserByEmail returns an account by its exact email.
func (db *DB) UserByEmail(ctx context.Context, email string) (corral.User, error) {
	u, err := scanUser(db.queryRow(ctx,
		`SELECT `+userColumns+` FROM users u WHERE u.email = ?`, email))
	return u, userErr("sqlite.UserByEmail", err)
}

// userErr maps a single-user read's error.
func userErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return corral.NotFound("user")
	default:
		return corral.Internal(op, err)
	}
}

// Users lists every account, oldest first.
func (db *DB) Users(ctx context.Context) ([]corral.User, error) {
	const op = "sqlite.Users"
	rows, err := db.query(ctx,
		`SELECT `+userColumns+` FROM users u ORDER BY u.created_at, u.id`)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	users, err := collect(rows, scanUser)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return users, nil
}

// Credential returns what login needs for an email.
func (db *DB) Credential(ctx context.Context, email string) (corral.Credential, error) {
	var c corral.Credential
	err := db.queryRow(ctx,
		`SELECT id, password_hash, disabled FROM users WHERE email = ?`, email,
	).Scan(&c.UserID, &c.PasswordHash, &c.Disabled)
	if err != nil {
		return corral.Credential{}, userErr("sqlite.Credential", err)
	}
	return c, nil
}

// SetDisabled disables or enables an account, as by; disabling also signs
// it out everywhere, in the same transaction.
func (db *DB) SetDisabled(ctx context.Context, id string, disabled bool, by string) error {
	const op = "sqlite.SetDisabled"
	return db.write(ctx, op, func(tx *txn) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE users SET disabled = ? WHERE id = ?`, boolInt(disabled), id)
		if err != nil {
			return corral.Internal(op, err)
		}
		if err := rowsAffected(op, "user", res); err != nil {
			return err
		}
		ev := corral.AccountEvent{Type: corral.AccountEnabled, Actor: by, User: id}
		if disabled {
			ev.Type = corral.AccountDisabled
			if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, id); err != nil {
				return corral.Internal(op, err)
			}
		}
		if err := recordAccount(ctx, tx, db.now(), ev); err != nil {
			return corral.Internal(op, err)
		}
		return nil
	})
}

// CreateSession stores a session by the hash of its token.
func (db *DB) CreateSession(ctx context.Context, s corral.Session) error {
	const op = "sqlite.CreateSession"
	if err := needID(op, s.ID); err != nil {
		return err
	}
	at := db.orNow(s.CreatedAt)
	err := db.write(ctx, op, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO sessions (id, user_id, token_hash, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?)`,
			s.ID, s.UserID, s.TokenHash, millis(at), millis(s.ExpiresAt)); err != nil {
			return err
		}
		return recordAccount(ctx, tx, at, corral.AccountEvent{Type: corral.AccountLogin, Actor: s.UserID, Object: s.ID})
	})
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return corral.NotFound("user")
	case isUnique(err):
		return conflict("session already exists")
	default:
		return corral.Internal(op, err)
	}
}

// SessionUser returns the account of a session that is live at now.
func (db *DB) SessionUser(ctx context.Context, tokenHash []byte, now time.Time) (corral.User, error) {
	var u corral.User
	var created int64
	err := db.queryRow(ctx, `
		SELECT `+userColumns+`, s.id
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.token_hash = ? AND s.expires_at > ? AND u.disabled = 0`,
		tokenHash, millis(now)).Scan(&u.ID, &u.Email, &u.Name, &u.Admin, &u.Disabled, &created, &u.Via)
	u.CreatedAt = fromMillis(created)
	switch {
	case err == nil:
		return u, nil
	case errors.Is(err, sql.ErrNoRows):
		return corral.User{}, corral.NotFound("session")
	default:
		return corral.User{}, corral.Internal("sqlite.SessionUser", err)
	}
}

// DeleteSession deletes a session by the hash of its token.
func (db *DB) DeleteSession(ctx context.Context, tokenHash []byte) error {
	const op = "sqlite.DeleteSession"
	return db.write(ctx, op, func(tx *txn) error {
		var id, userID string
		err := tx.QueryRowContext(ctx, `DELETE FROM sessions WHERE token_hash = ? RETURNING id, user_id`, tokenHash).Scan(&id, &userID)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return corral.NotFound("session")
		case err != nil:
			return corral.Internal(op, err)
		}
		if err := recordAccount(ctx, tx, db.now(), corral.AccountEvent{Type: corral.AccountLogout, Actor: userID, Object: id}); err != nil {
			return corral.Internal(op, err)
		}
		return nil
	})
}

// DeleteExpiredSessions removes the sessions SessionUser would refuse at
// now, and reports how many there were.
func (db *DB) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	const op = "sqlite.DeleteExpiredSessions"
	res, err := db.exec(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, millis(now))
	if err != nil {
		return 0, corral.Internal(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, corral.Internal(op, err)
	}
	return n, nil
}

// CreateToken stores an API token by the hash of its secret.
func (db *DB) CreateToken(ctx context.Context, t corral.APIToken, hash []byte) error {
	const op = "sqlite.CreateToken"
	if err := needID(op, t.ID); err != nil {
		return err
	}
	at := db.orNow(t.CreatedAt)
	err := db.write(ctx, op, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO api_tokens (id, user_id, name, token_hash, created_at, last_used_at)
			VALUES (?, ?, ?, ?, ?, ?)`,
			t.ID, t.UserID, t.Name, hash, millis(at), nullMillis(t.LastUsed)); err != nil {
			return err
		}
		return recordAccount(ctx, tx, at, corral.AccountEvent{Type: corral.TokenCreated, Actor: t.UserID, Object: t.ID})
	})
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return corral.NotFound("user")
	case isUnique(err):
		return conflict("token already exists")
	default:
		return corral.Internal(op, err)
	}
}

// tokenUseGranularity is how stale last_used_at may get: recording every
// use would turn each authenticated request into a write.
const tokenUseGranularity = time.Minute

// TokenUser returns the account a token belongs to and records the use.
func (db *DB) TokenUser(ctx context.Context, hash []byte, now time.Time) (corral.User, error) {
	const op = "sqlite.TokenUser"
	var tokenID string
	var lastUsed sql.NullInt64
	var u corral.User
	var created int64
	err := db.queryRow(ctx, `
		SELECT `+userColumns+`, t.id, t.last_used_at
		FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = ? AND u.disabled = 0`, hash,
	).Scan(&u.ID, &u.Email, &u.Name, &u.Admin, &u.Disabled, &created, &tokenID, &lastUsed)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return corral.User{}, corral.NotFound("token")
	case err != nil:
		return corral.User{}, corral.Internal(op, err)
	}
	u.CreatedAt = fromMillis(created)
	u.Via = tokenID

	cutoff := millis(now.Add(-tokenUseGranularity))
	if !lastUsed.Valid || lastUsed.Int64 < cutoff {
		// The condition is repeated so that concurrent requests with the
		// same token do not all move it, and it never moves backwards.
		_, err := db.exec(ctx, `
			UPDATE api_tokens SET last_used_at = ?
			WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`,
			millis(now), tokenID, cutoff)
		if err != nil {
			return corral.User{}, corral.Internal(op, err)
		}
	}
	return u, nil
}

// Tokens lists the API tokens of a user, oldest first.
func (db *DB) Tokens(ctx context.Context, userID string) ([]corral.APIToken, error) {
	const op = "sqlite.Tokens"
	rows, err := db.query(ctx, `
		SELECT id, user_id, name, created_at, last_used_at
		FROM api_tokens WHERE user_id = ? ORDER BY created_at, id`, userID)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	defer rows.Close()
	var tokens []corral.APIToken
	for rows.Next() {
		var t corral.APIToken
		var created int64
		var lastUsed sql.NullInt64
		if err := rows.Scan(&t.ID, &t.UserID, &t.Name, &created, &lastUsed); err != nil {
			return nil, corral.Internal(op, err)
		}
		t.CreatedAt = fromMillis(created)
		t.LastUsed = fromNullMillis(lastUsed)
		tokens = append(tokens, t)
	}
	if err := rows.Err(); err != nil {
		return nil, corral.Internal(op, err)
	}
	return tokens, nil
}

// DeleteToken deletes a token of userID. Another user's token is reported
// exactly like a missing one.
func (db *DB) DeleteToken(ctx context.Context, userID, id string) error {
	const op = "sqlite.DeleteToken"
	return db.write(ctx, op, func(tx *txn) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM api_tokens WHERE id = ? AND user_id = ?`, id, userID)
		if err != nil {
			return corral.Internal(op, err)
		}
		if err := rowsAffected(op, "token", res); err != nil {
			return err
		}
		if err := recordAccount(ctx, tx, db.now(), corral.AccountEvent{Type: corral.TokenDeleted, Actor: userID, Object: id}); err != nil {
			return corral.Internal(op, err)
		}
		return nil
	})
}

// CreateInvite stores an invite by the hash of its token.
func (db *DB) CreateInvite(ctx context.Context, inv corral.Invite, hash []byte) error {
	const op = "sqlite.CreateInvite"
	if err := needID(op, inv.ID); err != nil {
		return err
	}
	at := db.orNow(inv.CreatedAt)
	err := db.write(ctx, op, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO invites (id, created_by, token_hash, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?)`,
			inv.ID, inv.CreatedBy, hash, millis(at), millis(inv.ExpiresAt)); err != nil {
			return err
		}
		return recordAccount(ctx, tx, at, corral.AccountEvent{Type: corral.InviteCreated, Actor: inv.CreatedBy, Object: inv.ID})
	})
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return corral.NotFound("user")
	case isUnique(err):
		return conflict("invite already exists")
	default:
		return corral.Internal(op, err)
	}
}

// CreateUserWithInvite consumes a live invite and creates the account in
// one transaction: when the account cannot be created (its email is taken),
// the invite stays unused.
func (db *DB) CreateUserWithInvite(ctx context.Context, hash []byte, now time.Time, u corral.NewUser) (corral.User, error) {
	const op = "sqlite.CreateUserWithInvite"
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.User{}, corral.Internal(op, err)
	}
	defer rollback(tx)

	var inviteID string
	err = tx.QueryRowContext(ctx, `
		SELECT id FROM invites
		WHERE token_hash = ? AND used_by IS NULL AND used_at IS NULL AND expires_at > ?`,
		hash, millis(now)).Scan(&inviteID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return corral.User{}, corral.NotFound("invite")
	case err != nil:
		return corral.User{}, corral.Internal(op, err)
	}

	user, err := insertUser(ctx, tx, op, u, now)
	if err != nil {
		return corral.User{}, err
	}
	if _, err := tx.ExecContext(ctx,
		`UPDATE invites SET used_by = ?, used_at = ? WHERE id = ?`,
		user.ID, millis(now), inviteID); err != nil {
		return corral.User{}, corral.Internal(op, err)
	}
	if err := recordAccount(ctx, tx, now, corral.AccountEvent{Type: corral.AccountCreated, Actor: user.ID, User: user.ID,
		Object: inviteID, Detail: "invite"}); err != nil {
		return corral.User{}, corral.Internal(op, err)
	}
	if err := tx.Commit(); err != nil {
		return corral.User{}, corral.Internal(op, err)
	}
	return user, nil
}
