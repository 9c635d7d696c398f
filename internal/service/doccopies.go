package service

// Documents' copies. A document's search index is a file of the control
// that indexed it (retrieval, DATA/documents). When controls share a
// store, each document's passages and vectors are kept in the store too,
// written before the index (and taken back if the index refuses them), so
// that a control that takes over makes its indexes again from the store
// (Sync), with no call to the provider, and no document is lost with the
// machine that indexed it.

import (
	"context"
	"slices"
	"time"

	"corral"
	"corral/internal/retrieval"
)

// DocumentCopies is the store's side (store.DB).
type DocumentCopies interface {
	PutDocumentCopy(ctx context.Context, owner string, d corral.Document, chunks []corral.DocumentChunk, replace []string) error
	DeleteDocumentCopy(ctx context.Context, owner, id string) error
	DropDocumentCopies(ctx context.Context, owner string) error
	DocumentCopyIDs(ctx context.Context) (map[string][]string, error)
	DocumentCopy(ctx context.Context, id string) (owner string, d corral.Document, chunks []corral.DocumentChunk, err error)
	// HasSharedKey and SharedKey mark the store as holding every
	// document: until then, Sync adds the ones this control's indexes
	// hold (an installation moved from SQLite) instead of deleting them.
	HasSharedKey(ctx context.Context, name string) (bool, error)
	SharedKey(ctx context.Context, name string, value []byte) ([]byte, error)
}

// syncProgressEvery is how often a long Sync logs how far it has got.
const syncProgressEvery = 10 * time.Second

// copiesComplete is the shared key that says the store holds a copy of
// every document.
const copiesComplete = "documents-copied"

// add indexes doc into x, its copy first when copies are kept.
func (d *Documents) add(ctx context.Context, x *retrieval.Index, doc corral.Document, chunks []retrieval.Chunk, vectors [][]float32, replace []string) error {
	if d.cfg.Copies != nil {
		if err := d.cfg.Copies.PutDocumentCopy(ctx, x.Owner(), doc, copyChunks(chunks, vectors), replace); err != nil {
			return err
		}
	}
	err := x.Add(ctx, doc, chunks, vectors, replace...)
	if err != nil && d.cfg.Copies != nil {
		// The document is not indexed: its copy goes too (the copies of
		// the ones it was to replace are gone already; the next Sync takes
		// them out of the index as well).
		if derr := d.cfg.Copies.DeleteDocumentCopy(context.WithoutCancel(ctx), x.Owner(), doc.ID); derr != nil {
			d.cfg.Log.Error("a document's copy outlived its failed indexing", "document", doc.ID, "err", derr)
		}
	}
	return err
}

// delete deletes document id from x, its copy first when copies are kept.
func (d *Documents) delete(ctx context.Context, x *retrieval.Index, id string) error {
	if d.cfg.Copies != nil {
		if err := d.cfg.Copies.DeleteDocumentCopy(ctx, x.Owner(), id); err != nil {
			return err
		}
	}
	return x.Delete(ctx, id)
}

// setOf is the set of ids.
func setOf(ids []string) map[string]bool {
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set
}

func copyChunks(chunks []retrieval.Chunk, vectors [][]float32) []corral.DocumentChunk {
	out := make([]corral.DocumentChunk, len(chunks))
	for i, c := range chunks {
		out[i] = corral.DocumentChunk{Ord: c.Ord, Heading: c.Heading, Text: c.Text}
		if vectors != nil {
			out[i].Vector = vectors[i]
		}
	}
	return out
}

// SyncReport is what Sync did.
type SyncReport struct {
	Copied  int // documents of this control's indexes copied into the store (the first Sync on it)
	Indexed int // documents indexed from the store's copies
	Removed int // documents taken out of this control's indexes, deleted elsewhere
}

// Sync makes this control's indexes hold exactly the documents the store
// keeps copies of: a control calls it when it begins to serve from a
// shared store, before it takes requests. The first Sync on a store
// copies what the control's indexes hold into it (an installation moved
// from SQLite keeps its documents); after that the store is the record.
func (d *Documents) Sync(ctx context.Context) (SyncReport, error) {
	var r SyncReport
	c := d.cfg.Copies
	if c == nil {
		return r, nil
	}
	// A large library takes a while: say how far it has got now and then.
	done, said := 0, time.Now()
	step := func() {
		done++
		if time.Since(said) >= syncProgressEvery {
			d.cfg.Log.Info("making the document indexes match the store", "documents_done", done)
			said = time.Now()
		}
	}
	complete, err := c.HasSharedKey(ctx, copiesComplete)
	if err != nil {
		return r, err
	}
	indexes, err := d.indexes(ctx)
	if err != nil {
		return r, err
	}
	kept, err := c.DocumentCopyIDs(ctx)
	if err != nil {
		return r, err
	}
	if !complete {
		for _, x := range indexes {
			n, err := d.copyIndex(ctx, x, kept[x.Owner()], step)
			r.Copied += n
			if err != nil {
				return r, err
			}
		}
		if _, err := c.SharedKey(ctx, copiesComplete, []byte("1")); err != nil {
			return r, err
		}
		if kept, err = c.DocumentCopyIDs(ctx); err != nil {
			return r, err
		}
	}
	for owner := range kept {
		if owner == retrieval.LibraryOwner || slices.ContainsFunc(indexes, func(x *retrieval.Index) bool { return x.Owner() == owner }) {
			continue
		}
		x, err := d.stores.Private(ctx, owner)
		if err != nil {
			return r, err
		}
		indexes = append(indexes, x)
	}
	for _, x := range indexes {
		indexed, removed, err := d.syncIndex(ctx, x, kept[x.Owner()], step)
		r.Indexed, r.Removed = r.Indexed+indexed, r.Removed+removed
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// indexes are this control's indexes: the library's, and every private
// one on its disk whose agent still exists (one whose agent is gone is
// dropped).
func (d *Documents) indexes(ctx context.Context) ([]*retrieval.Index, error) {
	out := []*retrieval.Index{d.stores.Library()}
	agents, err := d.stores.Agents()
	if err != nil {
		return nil, corral.Internal("service.Documents.Sync", err)
	}
	for _, id := range agents {
		if _, err := d.store.Agent(ctx, id, ""); corral.ErrorCode(err) == corral.ENOTFOUND {
			if err := d.stores.Drop(id); err != nil {
				return nil, corral.Internal("service.Documents.Sync", err)
			}
			continue
		} else if err != nil {
			return nil, err
		}
		x, err := d.stores.Private(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// copyIndex copies into the store the documents of x it keeps no copy of.
func (d *Documents) copyIndex(ctx context.Context, x *retrieval.Index, kept []string, step func()) (int, error) {
	docs, err := x.Documents(ctx)
	if err != nil {
		return 0, err
	}
	isKept := setOf(kept)
	n := 0
	for _, doc := range docs {
		if isKept[doc.ID] {
			continue
		}
		chunks, vectors, err := x.Chunks(ctx, doc.ID)
		if err != nil {
			return n, err
		}
		if err := d.cfg.Copies.PutDocumentCopy(ctx, x.Owner(), doc, copyChunks(chunks, vectors), nil); err != nil {
			return n, err
		}
		n++
		step()
	}
	return n, nil
}

// syncIndex indexes into x the documents kept that it lacks, and removes
// from it the ones not kept.
func (d *Documents) syncIndex(ctx context.Context, x *retrieval.Index, kept []string, step func()) (indexed, removed int, err error) {
	docs, err := x.Documents(ctx)
	if err != nil {
		return 0, 0, err
	}
	have, isKept := map[string]bool{}, setOf(kept)
	for _, doc := range docs {
		have[doc.ID] = true
		if !isKept[doc.ID] {
			if err := x.Delete(ctx, doc.ID); err != nil && corral.ErrorCode(err) != corral.ENOTFOUND {
				return indexed, removed, err
			}
			removed++
			step()
		}
	}
	for _, id := range kept {
		if have[id] {
			continue
		}
		_, doc, chunks, err := d.cfg.Copies.DocumentCopy(ctx, id)
		if corral.ErrorCode(err) == corral.ENOTFOUND {
			continue // deleted meanwhile
		}
		if err != nil {
			return indexed, removed, err
		}
		plain := make([]retrieval.Chunk, len(chunks))
		var vectors [][]float32
		if doc.Embedded {
			vectors = make([][]float32, len(chunks))
		}
		for i, c := range chunks {
			plain[i] = retrieval.Chunk{Ord: c.Ord, Heading: c.Heading, Text: c.Text}
			if vectors != nil {
				vectors[i] = c.Vector
			}
		}
		if err := x.Add(ctx, doc, plain, vectors); err != nil {
			return indexed, removed, err
		}
		indexed++
		step()
	}
	return indexed, removed, nil
}
