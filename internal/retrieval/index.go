package retrieval

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the driver, as in internal/store

	"corral"
)

// Index is one store of documents: an SQLite file of its own with the
// documents, their chunks, an FTS5 index over the chunks' terms and, when
// an embedding model was configured, a vector per chunk. Every row carries
// the store's owner (the agent's id, or "library") and every query is
// bound to it, on top of the file being the owner's alone.
type Index struct {
	db    *sql.DB
	owner string

	mu     sync.Mutex
	chunks int64        // how many chunks the store holds: N of the idf
	terms  int64        // and how many terms they hold, for BM25's average length
	vecs   *vectorCache // loaded on the first vector search; nil until then
	// load is held by every write and by the first load of vecs, so that
	// no write commits between the load's read and its caching (the load
	// would miss it, or the write add its vectors twice).
	load sync.Mutex
}

// schemaVersion is the layout below and the terms it holds, kept in
// PRAGMA user_version. The layout is created whole by one statement list;
// a file of version 1 (the same layout, its terms from before compounds
// were joined) has its index terms made again from the chunks' stored
// text (retermed); a file of another version is refused rather than
// guessed at.
const schemaVersion = 2

var schema = []string{
	`CREATE TABLE documents (
		id TEXT PRIMARY KEY,
		owner TEXT NOT NULL,
		name TEXT NOT NULL,
		bytes INTEGER NOT NULL,
		chunks INTEGER NOT NULL,
		author_id TEXT NOT NULL,
		author_name TEXT NOT NULL,
		embedded INTEGER NOT NULL,
		created_at TEXT NOT NULL
	)`,
	`CREATE TABLE chunks (
		id INTEGER PRIMARY KEY,
		document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
		owner TEXT NOT NULL,
		ord INTEGER NOT NULL,
		heading TEXT NOT NULL,
		text TEXT NOT NULL,
		terms INTEGER NOT NULL, -- how many index terms it has, name and heading included
		vector BLOB
	)`,
	`CREATE INDEX chunks_document ON chunks(document_id)`,
	// Contentless: the text is in chunks already; the index keeps only
	// the terms (see terms), and contentless_delete lets a document go.
	`CREATE VIRTUAL TABLE chunks_fts USING fts5(heading, body, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 0')`,
	// How many chunks hold each term: the idf of the confidence signal.
	`CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row')`,
}

// Open opens the store at path for owner, creating it (and its directory,
// private to the server) when it does not exist.
func Open(ctx context.Context, path, owner string) (*Index, error) {
	const op = "retrieval.Open"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, corral.Internal(op, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	f.Close()
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	db, err := sql.Open("sqlite", "file:"+esc+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)"+
		"&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	db.SetMaxOpenConns(4)
	x := &Index{db: db, owner: owner}
	if err := x.init(ctx); err != nil {
		db.Close()
		return nil, corral.Internal(op, fmt.Errorf("%s: %w", path, err))
	}
	return x, nil
}

func (x *Index) init(ctx context.Context) error {
	var v int
	if err := x.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	switch v {
	case schemaVersion:
	case 1:
		if err := x.reterm(ctx); err != nil {
			return fmt.Errorf("making the index's terms again: %w", err)
		}
	case 0:
		tx, err := x.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, s := range schema {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("schema version %d, this build knows %d", v, schemaVersion)
	}
	return x.db.QueryRowContext(ctx, "SELECT count(*), coalesce(sum(terms), 0) FROM chunks WHERE owner = ?", x.owner).Scan(&x.chunks, &x.terms)
}

// reterm makes every chunk's index terms again from its stored text,
// document name and heading, in one transaction with the version: a crash
// leaves the file as it was, to be done at the next open.
func (x *Index) reterm(ctx context.Context) error {
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')`); err != nil {
		return err
	}
	type row struct {
		id                  int64
		name, heading, text string
	}
	// A page of chunks at a time, so a large store is not held in memory.
	for after := int64(0); ; {
		rows, err := tx.QueryContext(ctx, `SELECT c.id, d.name, c.heading, c.text FROM chunks c JOIN documents d ON d.id = c.document_id
			WHERE c.id > ? ORDER BY c.id LIMIT 256`, after)
		if err != nil {
			return err
		}
		var page []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.name, &r.heading, &r.text); err != nil {
				rows.Close()
				return err
			}
			page = append(page, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			heading, body := indexText(r.name)+" "+indexText(r.heading), indexText(r.text)
			if _, err := tx.ExecContext(ctx, `INSERT INTO chunks_fts (rowid, heading, body) VALUES (?, ?, ?)`, r.id, heading, body); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE chunks SET terms = ? WHERE id = ?`, countTerms(heading)+countTerms(body), r.id); err != nil {
				return err
			}
		}
		after = page[len(page)-1].id
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// Owner is the store's owner: an agent's id, or LibraryOwner.
func (x *Index) Owner() string { return x.owner }

// Close closes the store's file.
func (x *Index) Close() error { return x.db.Close() }

// Add stores a document and its chunks in one transaction, and removes
// the documents replace names (a new version of the same document: who
// may replace what is the caller's decision) in the same one, so a search
// finds the old version or the new, never both or neither. vectors is
// nil, or one vector per chunk.
func (x *Index) Add(ctx context.Context, d corral.Document, chunks []Chunk, vectors [][]float32, replace ...string) error {
	const op = "retrieval.Add"
	if vectors != nil && len(vectors) != len(chunks) {
		return corral.Internal(op, fmt.Errorf("%d vectors for %d chunks", len(vectors), len(chunks)))
	}
	x.load.Lock()
	defer x.load.Unlock()
	author := corral.UserRef{}
	if d.Author != nil {
		author = *d.Author
	}
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer tx.Rollback()
	var gone []int64
	var goneTerms int64
	for _, old := range replace {
		ids, n, _, err := x.remove(ctx, tx, old)
		if err != nil {
			return corral.Internal(op, err)
		}
		gone, goneTerms = append(gone, ids...), goneTerms+n
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO documents (id, owner, name, bytes, chunks, author_id, author_name, embedded, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, d.ID, x.owner, d.Name, d.Bytes, len(chunks), author.ID, author.Name,
		vectors != nil, d.CreatedAt.UTC().Format(time.RFC3339Nano)); err != nil {
		return corral.Internal(op, err)
	}
	insChunk, err := tx.PrepareContext(ctx, `INSERT INTO chunks (document_id, owner, ord, heading, text, terms, vector) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return corral.Internal(op, err)
	}
	insFTS, err := tx.PrepareContext(ctx, `INSERT INTO chunks_fts (rowid, heading, body) VALUES (?, ?, ?)`)
	if err != nil {
		return corral.Internal(op, err)
	}
	// The document's name counts as a heading of every chunk: "expenses.md"
	// is what a person asks about.
	nameTerms := indexText(d.Name)
	added := make([]vectorRow, 0, len(vectors))
	var total int64
	for i, c := range chunks {
		var blob []byte
		if vectors != nil {
			blob = encodeVector(normalize(vectors[i]))
		}
		heading, body := nameTerms+" "+indexText(c.Heading), indexText(c.Text)
		n := countTerms(heading) + countTerms(body)
		total += n
		res, err := insChunk.ExecContext(ctx, d.ID, x.owner, c.Ord, c.Heading, c.Text, n, blob)
		if err != nil {
			return corral.Internal(op, err)
		}
		id, _ := res.LastInsertId()
		if _, err := insFTS.ExecContext(ctx, id, heading, body); err != nil {
			return corral.Internal(op, err)
		}
		if vectors != nil {
			added = append(added, vectorRow{id: id, vec: decodeVector(blob)})
		}
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	x.mu.Lock()
	x.chunks += int64(len(chunks)) - int64(len(gone))
	x.terms += total - goneTerms
	if x.vecs != nil {
		x.vecs.remove(gone)
		x.vecs.add(added)
	}
	x.mu.Unlock()
	return nil
}

// Delete removes a document and its chunks: ENOTFOUND when the store has
// no document id.
func (x *Index) Delete(ctx context.Context, id string) error {
	const op = "retrieval.Delete"
	x.load.Lock()
	defer x.load.Unlock()
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer tx.Rollback()
	ids, terms, found, err := x.remove(ctx, tx, id)
	if err != nil {
		return corral.Internal(op, err)
	}
	if !found {
		return corral.NotFound("document")
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	x.mu.Lock()
	x.chunks -= int64(len(ids))
	x.terms -= terms
	if x.vecs != nil {
		x.vecs.remove(ids)
	}
	x.mu.Unlock()
	return nil
}

// remove deletes document id, its chunks and their index entries in tx,
// and says which chunks went, how many terms they held, and whether the
// document was there.
func (x *Index) remove(ctx context.Context, tx *sql.Tx, id string) (ids []int64, terms int64, found bool, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, terms FROM chunks WHERE document_id = ? AND owner = ?`, id, x.owner)
	if err != nil {
		return nil, 0, false, err
	}
	for rows.Next() {
		var c, n int64
		if err := rows.Scan(&c, &n); err != nil {
			rows.Close()
			return nil, 0, false, err
		}
		ids = append(ids, c)
		terms += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, false, err
	}
	for _, c := range ids {
		if _, err := tx.ExecContext(ctx, `DELETE FROM chunks_fts WHERE rowid = ?`, c); err != nil {
			return nil, 0, false, err
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM documents WHERE id = ? AND owner = ?`, id, x.owner)
	if err != nil {
		return nil, 0, false, err
	}
	n, _ := res.RowsAffected()
	return ids, terms, n > 0, nil
}

// Named lists the store's documents called name, newest first.
func (x *Index) Named(ctx context.Context, name string) ([]corral.Document, error) {
	return x.documents(ctx, `WHERE owner = ? AND name = ? ORDER BY created_at DESC, id DESC`, x.owner, name)
}

// Documents lists the store's documents, newest first.
func (x *Index) Documents(ctx context.Context) ([]corral.Document, error) {
	return x.documents(ctx, `WHERE owner = ? ORDER BY created_at DESC, id DESC`, x.owner)
}

// Document returns one document: ENOTFOUND when the store has none id.
func (x *Index) Document(ctx context.Context, id string) (corral.Document, error) {
	ds, err := x.documents(ctx, `WHERE owner = ? AND id = ?`, x.owner, id)
	if err != nil {
		return corral.Document{}, err
	}
	if len(ds) == 0 {
		return corral.Document{}, corral.NotFound("document")
	}
	return ds[0], nil
}

// Chunks reads back document id's chunks, in order, and their vectors
// (nil when it was not embedded): what Add was given, for a copy of the
// document kept elsewhere (service.Documents.Sync).
func (x *Index) Chunks(ctx context.Context, id string) ([]Chunk, [][]float32, error) {
	const op = "retrieval.Chunks"
	rows, err := x.db.QueryContext(ctx, `SELECT ord, heading, text, vector FROM chunks WHERE owner = ? AND document_id = ? ORDER BY ord`, x.owner, id)
	if err != nil {
		return nil, nil, corral.Internal(op, err)
	}
	defer rows.Close()
	var chunks []Chunk
	var vectors [][]float32
	embedded := true
	for rows.Next() {
		var c Chunk
		var blob []byte
		if err := rows.Scan(&c.Ord, &c.Heading, &c.Text, &blob); err != nil {
			return nil, nil, corral.Internal(op, err)
		}
		chunks = append(chunks, c)
		embedded = embedded && blob != nil
		vectors = append(vectors, decodeVector(blob))
	}
	if err := rows.Err(); err != nil {
		return nil, nil, corral.Internal(op, err)
	}
	if !embedded {
		vectors = nil
	}
	return chunks, vectors, nil
}

func (x *Index) documents(ctx context.Context, where string, args ...any) ([]corral.Document, error) {
	rows, err := x.db.QueryContext(ctx, `SELECT id, name, bytes, chunks, author_id, author_name, embedded, created_at FROM documents `+where, args...)
	if err != nil {
		return nil, corral.Internal("retrieval.Documents", err)
	}
	defer rows.Close()
	var out []corral.Document
	for rows.Next() {
		var d corral.Document
		var authorID, authorName, at string
		if err := rows.Scan(&d.ID, &d.Name, &d.Bytes, &d.Chunks, &authorID, &authorName, &d.Embedded, &at); err != nil {
			return nil, corral.Internal("retrieval.Documents", err)
		}
		if authorID != "" {
			d.Author = &corral.UserRef{ID: authorID, Name: authorName}
		}
		d.CreatedAt, _ = time.Parse(time.RFC3339Nano, at)
		out = append(out, d)
	}
	return out, rows.Err()
}

// candidate is a chunk a search found, with what ranking it needs.
type candidate struct {
	id       int64
	document string
	name     string
	ord      int
	heading  string
	text     string
	bm25     float64 // -bm25(): higher is better; 0 when not found by terms
	cosine   float64 // with the query's vector; 0 when not found by it
}

// stats are what the confidence signal needs of the store for a query.
type stats struct {
	n     int64            // chunks in the store
	avgdl float64          // their average number of terms
	df    map[string]int64 // per query term: chunks holding it
}

// lexical returns the store's best n chunks for the query's terms by
// BM25 (the heading and name column weighing twice the text), and the
// terms' counts.
func (x *Index) lexical(ctx context.Context, qterms []string, n int) ([]candidate, stats, error) {
	const op = "retrieval.Search"
	x.mu.Lock()
	st := stats{n: x.chunks, df: map[string]int64{}}
	if x.chunks > 0 {
		st.avgdl = float64(x.terms) / float64(x.chunks)
	}
	x.mu.Unlock()
	if len(qterms) == 0 || st.n == 0 {
		return nil, st, nil
	}
	for _, t := range qterms {
		var df int64
		err := x.db.QueryRowContext(ctx, `SELECT doc FROM chunks_vocab WHERE term = ?`, t).Scan(&df)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, st, corral.Internal(op, err)
		}
		st.df[t] = df
	}
	quoted := make([]string, len(qterms))
	for i, t := range qterms {
		quoted[i] = `"` + t + `"` // terms are letters and digits only: nothing to escape
	}
	rows, err := x.db.QueryContext(ctx, `SELECT c.id, c.document_id, d.name, c.ord, c.heading, c.text, -m.rank
		FROM (SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? AND rank MATCH 'bm25(2.0, 1.0)' ORDER BY rank LIMIT ?) m
		JOIN chunks c ON c.id = m.rowid
		JOIN documents d ON d.id = c.document_id
		WHERE c.owner = ? AND d.owner = ?
		ORDER BY m.rank`, strings.Join(quoted, " OR "), n, x.owner, x.owner)
	if err != nil {
		return nil, st, corral.Internal(op, err)
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.document, &c.name, &c.ord, &c.heading, &c.text, &c.bm25); err != nil {
			return nil, st, corral.Internal(op, err)
		}
		out = append(out, c)
	}
	return out, st, rows.Err()
}

// byIDs loads chunks found by their vectors.
func (x *Index) byIDs(ctx context.Context, ids []int64) (map[int64]candidate, error) {
	out := map[int64]candidate{}
	for _, id := range ids {
		var c candidate
		err := x.db.QueryRowContext(ctx, `SELECT c.id, c.document_id, d.name, c.ord, c.heading, c.text
			FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id = ? AND c.owner = ? AND d.owner = ?`,
			id, x.owner, x.owner).Scan(&c.id, &c.document, &c.name, &c.ord, &c.heading, &c.text)
		if errors.Is(err, sql.ErrNoRows) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, corral.Internal("retrieval.Search", err)
		}
		out[id] = c
	}
	return out, nil
}

func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// normalize scales v to length 1, so a dot product is the cosine.
func normalize(v []float32) []float32 {
	var s float64
	for _, f := range v {
		s += float64(f) * float64(f)
	}
	out := make([]float32, len(v))
	if s == 0 {
		return out
	}
	k := 1 / math.Sqrt(s)
	for i, f := range v {
		out[i] = float32(float64(f) * k)
	}
	return out
}

func countTerms(s string) int64 {
	if s == "" {
		return 0
	}
	return int64(strings.Count(s, " ") + 1)
}
