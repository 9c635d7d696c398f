package store

import (
	"context"
	"errors"

	"corral"
)

var _ corral.SecretStore = (*DB)(nil)

// CreateSecret stores an agent's secret with its sealed value, as by.
func (db *DB) CreateSecret(ctx context.Context, s corral.Secret, sealed []byte, by string) error {
	const op = "sqlite.CreateSecret"
	if err := needID(op, s.ID); err != nil {
		return err
	}
	if len(sealed) == 0 {
		return corral.Internal(op, errors.New("empty sealed value"))
	}
	at := db.orNow(s.CreatedAt)
	err := db.write(ctx, op, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO agent_secrets (id, agent_id, name, host, header, sealed, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			s.ID, s.AgentID, s.Name, s.Host, s.Header, sealed, millis(at)); err != nil {
			return err
		}
		return recordAccount(ctx, tx, at, corral.AccountEvent{Type: corral.SecretCreated, Actor: by, Agent: s.AgentID, Object: s.ID})
	})
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return corral.NotFound("agent")
	case isUnique(err):
		return conflict("the agent already has a secret with that name")
	default:
		return corral.Internal(op, err)
	}
}

// Secrets lists an agent's secrets, oldest first. The sealed column is not
// read: a list has no use for it.
func (db *DB) Secrets(ctx context.Context, agentID string) ([]corral.Secret, error) {
	const op = "sqlite.Secrets"
	rows, err := db.query(ctx, `
		SELECT id, agent_id, name, host, header, created_at
		FROM agent_secrets WHERE agent_id = ? ORDER BY created_at, id`, agentID)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	out, err := collect(rows, func(s scanner) (corral.Secret, error) {
		var x corral.Secret
		var created int64
		err := s.Scan(&x.ID, &x.AgentID, &x.Name, &x.Host, &x.Header, &created)
		x.CreatedAt = fromMillis(created)
		return x, err
	})
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return out, nil
}

// SealedSecrets lists an agent's secrets with their sealed values.
func (db *DB) SealedSecrets(ctx context.Context, agentID string) ([]corral.SealedSecret, error) {
	const op = "sqlite.SealedSecrets"
	rows, err := db.query(ctx, `
		SELECT id, agent_id, name, host, header, created_at, sealed
		FROM agent_secrets WHERE agent_id = ? ORDER BY created_at, id`, agentID)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	out, err := collect(rows, func(s scanner) (corral.SealedSecret, error) {
		var x corral.SealedSecret
		var created int64
		err := s.Scan(&x.ID, &x.AgentID, &x.Name, &x.Host, &x.Header, &created, &x.Sealed)
		x.CreatedAt = fromMillis(created)
		return x, err
	})
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return out, nil
}

// DeleteSecret deletes a secret of the agent, as by.
func (db *DB) DeleteSecret(ctx context.Context, agentID, id, by string) error {
	const op = "sqlite.DeleteSecret"
	return db.write(ctx, op, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM agent_secrets WHERE id = ? AND agent_id = ?`, id, agentID)
		if err != nil {
			return corral.Internal(op, err)
		}
		if err := rowsAffected(op, "secret", res); err != nil {
			return err
		}
		return db.recorded(ctx, tx, op, corral.AccountEvent{Type: corral.SecretDeleted, Actor: by, Agent: agentID, Object: id})
	})
}
