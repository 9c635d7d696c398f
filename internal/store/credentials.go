package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"corral"
)

var _ corral.CredentialStore = (*DB)(nil)

// CreateCodeCredential stores a code-host credential with its sealed secret.
func (db *DB) CreateCodeCredential(ctx context.Context, c corral.CodeCredential, sealed []byte) error {
	const op = "sqlite.CreateCodeCredential"
	if err := needID(op, c.ID); err != nil {
		return err
	}
	if len(sealed) == 0 {
		return corral.Internal(op, errors.New("empty sealed secret"))
	}
	repos, err := encodeRepositories(c.Repositories)
	if err != nil {
		return corral.Internal(op, err)
	}
	at := db.orNow(c.CreatedAt)
	err = db.write(ctx, op, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO credentials (id, user_id, name, host, username, sealed, created_at, repositories)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.UserID, c.Name, c.Host, c.Username, sealed, millis(at), repos); err != nil {
			return err
		}
		return recordAccount(ctx, tx, at, corral.AccountEvent{Type: corral.CredentialCreated, Actor: c.UserID, Object: c.ID})
	})
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return corral.NotFound("user")
	case isUnique(err):
		return conflict("you already have a credential with that name")
	default:
		return corral.Internal(op, err)
	}
}

// CodeCredentials lists a user's credentials, newest first. The sealed
// column is not read: a list has no use for it.
func (db *DB) CodeCredentials(ctx context.Context, userID string) ([]corral.CodeCredential, error) {
	const op = "sqlite.CodeCredentials"
	rows, err := db.query(ctx, `
		SELECT id, user_id, name, host, username, created_at, repositories
		FROM credentials WHERE user_id = ? ORDER BY created_at DESC, id DESC`, userID)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	out, err := collect(rows, func(s scanner) (corral.CodeCredential, error) {
		var c corral.CodeCredential
		var created int64
		var repos string
		if err := s.Scan(&c.ID, &c.UserID, &c.Name, &c.Host, &c.Username, &created, &repos); err != nil {
			return c, err
		}
		c.CreatedAt = fromMillis(created)
		return c, decodeRepositories(repos, &c)
	})
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return out, nil
}

// DeleteCodeCredential deletes a credential of userID.
func (db *DB) DeleteCodeCredential(ctx context.Context, userID, id string) error {
	const op = "sqlite.DeleteCodeCredential"
	return db.write(ctx, op, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM credentials WHERE id = ? AND user_id = ?`, id, userID)
		if err != nil {
			return corral.Internal(op, err)
		}
		if err := rowsAffected(op, "credential", res); err != nil {
			return err
		}
		return db.recorded(ctx, tx, op, corral.AccountEvent{Type: corral.CredentialDeleted, Actor: userID, Object: id})
	})
}

// CredentialForAgent finds the credential of the agent's owner for host.
// The owner comes from the agents row in the same query: no caller can
// name whose credential is used, so an editor of someone else's agent can
// neither push with their own credential nor pick another user's.
func (db *DB) CredentialForAgent(ctx context.Context, agentID, credentialID, host string) (corral.SealedCredential, error) {
	const op = "sqlite.CredentialForAgent"
	var c corral.SealedCredential
	var created int64
	var repos string
	err := db.queryRow(ctx, `
		SELECT c.id, c.user_id, c.name, c.host, c.username, c.sealed, c.created_at, c.repositories
		FROM agents a JOIN credentials c ON c.user_id = a.owner_id
		WHERE a.id = ? AND c.host = ? AND c.id = ?`,
		agentID, host, credentialID).
		Scan(&c.ID, &c.UserID, &c.Name, &c.Host, &c.Username, &c.Sealed, &created, &repos)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return corral.SealedCredential{}, corral.NotFound("credential")
	case err != nil:
		return corral.SealedCredential{}, corral.Internal(op, err)
	}
	c.CreatedAt = fromMillis(created)
	if err := decodeRepositories(repos, &c.CodeCredential); err != nil {
		return corral.SealedCredential{}, corral.Internal(op, err)
	}
	return c, nil
}

// SetCredentialRepositories replaces what a credential of userID may be
// used for.
func (db *DB) SetCredentialRepositories(ctx context.Context, userID, id string, repositories []string) (corral.CodeCredential, error) {
	const op = "sqlite.SetCredentialRepositories"
	repos, err := encodeRepositories(repositories)
	if err != nil {
		return corral.CodeCredential{}, corral.Internal(op, err)
	}
	var c corral.CodeCredential
	var created int64
	err = db.write(ctx, op, func(tx *txn) error {
		err := tx.QueryRowContext(ctx, `
			UPDATE credentials SET repositories = ? WHERE id = ? AND user_id = ?
			RETURNING id, user_id, name, host, username, created_at, repositories`, repos, id, userID).
			Scan(&c.ID, &c.UserID, &c.Name, &c.Host, &c.Username, &created, &repos)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return corral.NotFound("credential")
		case err != nil:
			return corral.Internal(op, err)
		}
		return db.recorded(ctx, tx, op, corral.AccountEvent{Type: corral.CredentialRepositories, Actor: userID, Object: id})
	})
	if err != nil {
		return corral.CodeCredential{}, err
	}
	c.CreatedAt = fromMillis(created)
	return c, decodeRepositories(repos, &c)
}

func encodeRepositories(r []string) (string, error) {
	if r == nil {
		r = []string{}
	}
	b, err := json.Marshal(r)
	return string(b), err
}

func decodeRepositories(s string, c *corral.CodeCredential) error {
	if err := json.Unmarshal([]byte(s), &c.Repositories); err != nil {
		return fmt.Errorf("credential %s: repositories: %w", c.ID, err)
	}
	return nil
}
