package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"corral"
)

// Documents' copies. A document's search index is a control's own file
// (internal/retrieval, under DATA/documents): derived data, made from the
// document's passages and their vectors. When controls share a store,
// those are kept here too, written before the index, so that a control
// that takes over makes its indexes again from them (service.Documents.
// Sync) and none is lost, nor paid for twice at the provider.

// PutDocumentCopy keeps the copy of d, a document of owner ("library" or
// an agent's id), with its chunks, in place of the copies replace names
// (owner's, the documents d replaces), in one transaction.
func (db *DB) PutDocumentCopy(ctx context.Context, owner string, d corral.Document, chunks []corral.DocumentChunk, replace []string) error {
	const op = "store.PutDocumentCopy"
	author := corral.UserRef{}
	if d.Author != nil {
		author = *d.Author
	}
	return db.write(ctx, op, func(tx *txn) error {
		for _, id := range replace {
			if _, err := tx.ExecContext(ctx, `DELETE FROM document_copies WHERE id = ? AND owner = ?`, id, owner); err != nil {
				return corral.Internal(op, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO document_copies (id, owner, name, bytes, author_id, author_name, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			d.ID, owner, d.Name, d.Bytes, author.ID, author.Name, millis(d.CreatedAt)); err != nil {
			return corral.Internal(op, err)
		}
		for _, c := range chunks {
			var vec any // NULL: not embedded
			if c.Vector != nil {
				b := make([]byte, 0, 4*len(c.Vector))
				for _, f := range c.Vector {
					b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
				}
				vec = b
			}
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO document_chunk_copies (document_id, ord, heading, text, vector) VALUES (?, ?, ?, ?, ?)`,
				d.ID, c.Ord, c.Heading, c.Text, vec); err != nil {
				return corral.Internal(op, err)
			}
		}
		return nil
	})
}

// DeleteDocumentCopy deletes the copy of owner's document id, if kept.
func (db *DB) DeleteDocumentCopy(ctx context.Context, owner, id string) error {
	if _, err := db.exec(ctx, `DELETE FROM document_copies WHERE id = ? AND owner = ?`, id, owner); err != nil {
		return corral.Internal("store.DeleteDocumentCopy", err)
	}
	return nil
}

// DropDocumentCopies deletes every copy of owner's documents (its agent
// is deleted).
func (db *DB) DropDocumentCopies(ctx context.Context, owner string) error {
	if _, err := db.exec(ctx, `DELETE FROM document_copies WHERE owner = ?`, owner); err != nil {
		return corral.Internal("store.DropDocumentCopies", err)
	}
	return nil
}

// DocumentCopyIDs lists the ids of the documents kept, by owner.
func (db *DB) DocumentCopyIDs(ctx context.Context) (map[string][]string, error) {
	const op = "store.DocumentCopyIDs"
	rows, err := db.query(ctx, `SELECT owner, id FROM document_copies ORDER BY owner, id`)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var owner, id string
		if err := rows.Scan(&owner, &id); err != nil {
			return nil, corral.Internal(op, err)
		}
		out[owner] = append(out[owner], id)
	}
	if err := rows.Err(); err != nil {
		return nil, corral.Internal(op, err)
	}
	return out, nil
}

// DocumentCopy reads the copy of document id: the document, its owner
// and its chunks in order; ENOTFOUND when none is kept.
func (db *DB) DocumentCopy(ctx context.Context, id string) (owner string, d corral.Document, chunks []corral.DocumentChunk, err error) {
	const op = "store.DocumentCopy"
	tx, err := db.beginRead(ctx)
	if err != nil {
		return "", d, nil, corral.Internal(op, err)
	}
	defer rollback(tx)
	var author corral.UserRef
	var created int64
	err = tx.QueryRowContext(ctx, `SELECT owner, name, bytes, author_id, author_name, created_at FROM document_copies WHERE id = ?`, id).
		Scan(&owner, &d.Name, &d.Bytes, &author.ID, &author.Name, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", d, nil, corral.NotFound("document")
	case err != nil:
		return "", d, nil, corral.Internal(op, err)
	}
	d.ID, d.CreatedAt = id, fromMillis(created)
	if author.ID != "" {
		d.Author = &author
	}
	rows, err := tx.QueryContext(ctx, `SELECT ord, heading, text, vector FROM document_chunk_copies WHERE document_id = ? ORDER BY ord`, id)
	if err != nil {
		return "", d, nil, corral.Internal(op, err)
	}
	defer rows.Close()
	embedded := true
	for rows.Next() {
		var c corral.DocumentChunk
		var vec []byte
		if err := rows.Scan(&c.Ord, &c.Heading, &c.Text, &vec); err != nil {
			return "", d, nil, corral.Internal(op, err)
		}
		if vec == nil {
			embedded = false
		} else {
			if len(vec)%4 != 0 {
				return "", d, nil, corral.Internal(op, fmt.Errorf("document %s: a vector of %d bytes", id, len(vec)))
			}
			c.Vector = make([]float32, len(vec)/4)
			for i := range c.Vector {
				c.Vector[i] = math.Float32frombits(binary.LittleEndian.Uint32(vec[4*i:]))
			}
		}
		chunks = append(chunks, c)
	}
	if err := rows.Err(); err != nil {
		return "", d, nil, corral.Internal(op, err)
	}
	d.Chunks, d.Embedded = len(chunks), embedded && len(chunks) > 0
	return owner, d, chunks, nil
}
