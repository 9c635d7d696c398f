package service

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"time"
	"unicode/utf8"

	"corral"
	"corral/internal/access"
	"corral/internal/retrieval"
	"corral/internal/sanitize"
)

// DocumentStore is what the document use cases need of the main store:
// agents with the caller's level, and the budget embeddings are metered on.
type DocumentStore interface {
	agentReader
	// Reserve and Settle meter tokens spent for an agent outside any run
	// (runID "") on its budget.
	Reserve(ctx context.Context, h corral.Hold) (corral.Reservation, error)
	Settle(ctx context.Context, id string, t corral.Tokens, at time.Time) (corral.Budget, error)
}

// Embeddings is the gateway's embeddings endpoint.
type Embeddings interface {
	Embed(ctx context.Context, model string, texts []string, m corral.Meter) ([][]float32, corral.Tokens, error)
}

// DocumentsConfig holds the settings of retrieval.
type DocumentsConfig struct {
	// MaxBytes bounds one document. Default 4 MiB.
	MaxBytes int64
	// EmbeddingModel names the provider's embedding model; "" ranks by
	// BM25 alone.
	EmbeddingModel string
	// Threshold is the confidence below which a search is not answerable;
	// 0 means retrieval.Threshold, the calibrated default.
	Threshold float64
	// Copies, when controls share the store, keeps a copy of every
	// document's passages and vectors there (doccopies.go); nil on a
	// store one server holds, whose indexes are then the documents.
	Copies DocumentCopies
	Log    *slog.Logger
	Now    func() time.Time
}

// Documents are the use cases of retrieval: an agent's private documents,
// the shared library, and searches over both. Access is decided on every
// call, fresh: a private document follows its agent's grants (viewers
// read, editors upload and delete), the library is read and published to
// by every signed-in user and deleted from by its author or an admin.
type Documents struct {
	store  DocumentStore
	stores *retrieval.Stores
	embed  Embeddings
	cfg    DocumentsConfig
}

// NewDocuments returns the document use cases over stores. embed may be
// nil (and is unused without cfg.EmbeddingModel).
func NewDocuments(store DocumentStore, stores *retrieval.Stores, embed Embeddings, cfg DocumentsConfig) *Documents {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 4 << 20
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if embed == nil {
		cfg.EmbeddingModel = ""
	}
	return &Documents{store: store, stores: stores, embed: embed, cfg: cfg}
}

// ListedDocument is a document as a list shows it: with whether the
// caller may delete it.
type ListedDocument struct {
	corral.Document
	CanDelete bool
}

// Upload indexes a document into the agent's private store.
func (d *Documents) Upload(ctx context.Context, actor corral.User, agentID, name string, body io.Reader) (corral.Document, error) {
	a, err := loadAgent(ctx, d.store, actor, agentID, access.WriteDocuments)
	if err != nil {
		return corral.Document{}, err
	}
	x, err := d.stores.Private(ctx, a.ID)
	if err != nil {
		return corral.Document{}, err
	}
	// An editor may delete any of the agent's documents, so a new one
	// replaces every older one of its name.
	doc, err := d.index(ctx, x, actor, name, body, a.Policy.Secrets, d.agentMeter(a.ID, actor),
		func(corral.Document) bool { return true })
	doc.Source, doc.AgentID = corral.SourcePrivate, a.ID
	return doc, err
}

// Documents lists the agent's private documents, newest first.
func (d *Documents) Documents(ctx context.Context, actor corral.User, agentID string) ([]ListedDocument, error) {
	a, err := loadAgent(ctx, d.store, actor, agentID, access.ReadDocuments)
	if err != nil {
		return nil, err
	}
	x, err := d.stores.Private(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	docs, err := x.Documents(ctx)
	if err != nil {
		return nil, err
	}
	canDelete := access.Check(a.Access, access.WriteDocuments) == access.Allow
	out := make([]ListedDocument, len(docs))
	for i, doc := range docs {
		doc.Source, doc.AgentID = corral.SourcePrivate, a.ID
		out[i] = ListedDocument{Document: doc, CanDelete: canDelete}
	}
	return out, nil
}

// DeleteDocument deletes one of the agent's private documents.
func (d *Documents) DeleteDocument(ctx context.Context, actor corral.User, agentID, docID string) error {
	a, err := loadAgent(ctx, d.store, actor, agentID, access.WriteDocuments)
	if err != nil {
		return err
	}
	x, err := d.stores.Private(ctx, a.ID)
	if err != nil {
		return err
	}
	return d.delete(ctx, x, docID)
}

// Publish indexes a document into the shared library.
func (d *Documents) Publish(ctx context.Context, actor corral.User, name string, body io.Reader) (corral.Document, error) {
	if err := libraryCheck(actor, false, access.PublishLibrary); err != nil {
		return corral.Document{}, err
	}
	// The library's documents are their authors': a new one replaces
	// only the caller's own of its name, never someone else's.
	doc, err := d.index(ctx, d.stores.Library(), actor, name, body, nil, libraryMeter{log: d.cfg.Log},
		func(old corral.Document) bool { return authored(old, actor) })
	doc.Source = corral.SourceLibrary
	return doc, err
}

// Library lists the library's documents, newest first.
func (d *Documents) Library(ctx context.Context, actor corral.User) ([]ListedDocument, error) {
	if err := libraryCheck(actor, false, access.ReadLibrary); err != nil {
		return nil, err
	}
	docs, err := d.stores.Library().Documents(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ListedDocument, len(docs))
	for i, doc := range docs {
		doc.Source = corral.SourceLibrary
		out[i] = ListedDocument{Document: doc,
			CanDelete: access.Library(true, actor.Admin, authored(doc, actor), access.DeleteLibrary) == access.Allow}
	}
	return out, nil
}

// Unpublish deletes a document of the library: its author or an admin.
func (d *Documents) Unpublish(ctx context.Context, actor corral.User, docID string) error {
	if err := libraryCheck(actor, false, access.ReadLibrary); err != nil {
		return err
	}
	lib := d.stores.Library()
	doc, err := lib.Document(ctx, docID)
	if err != nil {
		return err
	}
	if err := libraryCheck(actor, authored(doc, actor), access.DeleteLibrary); err != nil {
		return err
	}
	return d.delete(ctx, lib, docID)
}

// Search searches what the agent draws from, its private documents and
// the library when its policy.library is on, for a person who may view
// the agent. Unlike an agent's, a person's search returns the passages
// found below the threshold too, with Answerable false, so documents can
// be reviewed.
func (d *Documents) Search(ctx context.Context, actor corral.User, agentID, query string, k int) (corral.Retrieval, error) {
	a, err := loadAgent(ctx, d.store, actor, agentID, access.ReadDocuments)
	if err != nil {
		return corral.Retrieval{}, err
	}
	return d.search(ctx, a, query, k, d.agentMeter(a.ID, actor), true)
}

// Retrieve is a run's search (the search_documents tool, and what is
// retrieved for the message that started it): as the person who
// triggered the run, with that person's level on the agent read fresh,
// so a revoked grant stops the very next retrieval. Query embeddings are
// metered on the run, by m.
func (d *Documents) Retrieve(ctx context.Context, run corral.Run, query string, k int, m corral.Meter) (corral.Retrieval, error) {
	if run.TriggeredBy == nil {
		return corral.Retrieval{}, corral.NotFound("agent")
	}
	a, err := loadAgent(ctx, d.store, corral.User{ID: run.TriggeredBy.ID}, run.AgentID, access.ReadDocuments)
	if err != nil {
		return corral.Retrieval{}, err
	}
	// A message may be far longer than a query: its beginning is what is
	// searched for (a query's terms are capped anyway).
	if len(query) > retrieval.MaxQueryBytes {
		cut := retrieval.MaxQueryBytes
		for cut > 0 && !utf8.RuneStart(query[cut]) {
			cut--
		}
		query = query[:cut]
	}
	return d.search(ctx, a, query, k, m, false)
}

// search searches for a: its private documents, and the library only when
// a's policy.library is on; weak is a person's search, who sees what was
// found even below the threshold (an agent never does).
func (d *Documents) search(ctx context.Context, a corral.Agent, query string, k int, m corral.Meter, weak bool) (corral.Retrieval, error) {
	x, err := d.stores.Private(ctx, a.ID)
	if err != nil {
		return corral.Retrieval{}, err
	}
	q := retrieval.Query{Text: query, K: k, Exclude: a.Policy.Secrets, Threshold: d.cfg.Threshold, Weak: weak}
	if d.cfg.EmbeddingModel != "" {
		q.Embed = d.embedder(m)
	}
	scopes := []retrieval.Scope{{Index: x, Source: corral.SourcePrivate}}
	if a.Policy.Library {
		scopes = append(scopes, retrieval.Scope{Index: d.stores.Library(), Source: corral.SourceLibrary})
	}
	return retrieval.Search(ctx, scopes, q)
}

// DropAgent deletes a deleted agent's private store.
func (d *Documents) DropAgent(agentID string) error {
	if d.cfg.Copies != nil {
		if err := d.cfg.Copies.DropDocumentCopies(context.Background(), agentID); err != nil {
			return err
		}
	}
	return d.stores.Drop(agentID)
}

// index reads, checks, chunks, embeds and stores one document, in place
// of the documents of its name that replaceable allows.
func (d *Documents) index(ctx context.Context, x *retrieval.Index, actor corral.User, name string, body io.Reader, exclude []string,
	m corral.Meter, replaceable func(corral.Document) bool) (corral.Document, error) {
	name, text, err := d.read(name, body, exclude)
	if err != nil {
		return corral.Document{}, err
	}
	chunks := retrieval.Split(name, text)
	if len(chunks) == 0 {
		return corral.Document{}, corral.Errorf(corral.ECONTENT, "the document has nothing to index")
	}
	doc := corral.Document{ID: corral.NewID("doc"), Name: name, Bytes: int64(len(text)), Chunks: len(chunks),
		Author: &corral.UserRef{ID: actor.ID, Name: actor.Name}, CreatedAt: d.cfg.Now()}
	var vectors [][]float32
	if d.cfg.EmbeddingModel != "" {
		texts := make([]string, len(chunks))
		for i, c := range chunks {
			texts[i] = c.Heading + "\n" + c.Text
		}
		vectors, err = d.embedAll(ctx, texts, m)
		if err != nil {
			// The document is still found by its terms; searches say when
			// embeddings were not used.
			d.cfg.Log.Warn("document indexed without embeddings", "document", doc.ID, "err", corral.ErrorMessage(err))
			vectors = nil
		}
	}
	doc.Embedded = vectors != nil
	same, err := x.Named(ctx, name)
	if err != nil {
		return corral.Document{}, err
	}
	var replace []string
	for _, old := range same {
		if replaceable(old) {
			replace = append(replace, old.ID)
		}
	}
	if err := d.add(ctx, x, doc, chunks, vectors, replace); err != nil {
		return corral.Document{}, err
	}
	return doc, nil
}

// read checks a document's name and content: a valid relative path that
// is not scaffolding, at most MaxBytes of UTF-8 text without NUL.
func (d *Documents) read(name string, body io.Reader, exclude []string) (string, string, error) {
	name, err := sanitize.Path(name)
	if err != nil {
		return "", "", err
	}
	if rule, ex := retrieval.Excluded(name, exclude); ex {
		return "", "", corral.Errorf(corral.EINVALID,
			"Corral never indexes %s: it matches %q, which is Corral's own, an agent tool's instructions, a secret, or excluded by the agent's policy",
			sanitize.Escape(name), rule)
	}
	b, err := io.ReadAll(io.LimitReader(body, d.cfg.MaxBytes+1))
	if err != nil {
		return "", "", corral.Errorf(corral.EINVALID, "the document could not be read")
	}
	switch {
	case int64(len(b)) > d.cfg.MaxBytes:
		return "", "", corral.Errorf(corral.ETOOLARGE, "a document is at most %d bytes", d.cfg.MaxBytes)
	case len(bytes.TrimSpace(b)) == 0:
		return "", "", corral.Errorf(corral.ECONTENT, "the document is empty")
	case bytes.HasPrefix(b, []byte("%PDF-")):
		return "", "", corral.Errorf(corral.ECONTENT, "PDF is not supported: upload the text (Markdown, plain text or source)")
	case !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0:
		return "", "", corral.Errorf(corral.ECONTENT, "only text can be indexed (Markdown, plain text, source): this is not UTF-8 text")
	}
	return name, string(b), nil
}

// embedBatch is how many texts go in one embeddings call.
const embedBatch = 128

func (d *Documents) embedAll(ctx context.Context, texts []string, m corral.Meter) ([][]float32, error) {
	var out [][]float32
	for i := 0; i < len(texts); i += embedBatch {
		v, _, err := d.embed.Embed(ctx, d.cfg.EmbeddingModel, texts[i:min(i+embedBatch, len(texts))], m)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return out, nil
}

func (d *Documents) embedder(m corral.Meter) retrieval.Embedder {
	return func(ctx context.Context, texts []string) ([][]float32, error) {
		return d.embedAll(ctx, texts, m)
	}
}

// agentMeter meters embeddings made for an agent outside a run, for
// actor, on the agent's budget: each reserves its ceiling first, refused
// when the budget cannot hold it.
func (d *Documents) agentMeter(agentID string, actor corral.User) corral.Meter {
	return agentMeter{store: d.store, agentID: agentID, userID: actor.ID}
}

type agentMeter struct {
	store           DocumentStore
	agentID, userID string
}

func (m agentMeter) Reserve(ctx context.Context, model string, ceiling int64) (corral.Settle, error) {
	res, err := m.store.Reserve(ctx, corral.Hold{AgentID: m.agentID, UserID: m.userID, Model: model, Tokens: ceiling})
	if corral.ErrorCode(err) == corral.EADMISSION {
		return nil, corral.Errorf(corral.EADMISSION, "the agent's token budget cannot hold this: %s", corral.ErrorMessage(err))
	}
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, u corral.Tokens, reported bool) error {
		t, _ := corral.Charge(u, reported, ceiling)
		_, err := m.store.Settle(context.WithoutCancel(ctx), res.ID, t, time.Time{})
		return err
	}, nil
}

// libraryMeter meters the embeddings of a library document, which
// belongs to no agent and so to no budget: the tokens are logged.
type libraryMeter struct{ log *slog.Logger }

func (m libraryMeter) Reserve(context.Context, string, int64) (corral.Settle, error) {
	return func(_ context.Context, u corral.Tokens, _ bool) error {
		m.log.Info("library document embedded", "tokens", u.Input+u.Output)
		return nil
	}, nil
}

func libraryCheck(actor corral.User, author bool, action access.LibraryAction) error {
	switch access.Library(actor.ID != "", actor.Admin, author, action) {
	case access.Allow:
		return nil
	case access.Forbid:
		return corral.Errorf(corral.EFORBIDDEN, "only its author or an admin may delete a document of the library")
	default:
		return corral.Errorf(corral.EUNAUTH, "sign in to use the library")
	}
}

func authored(doc corral.Document, actor corral.User) bool {
	return doc.Author != nil && doc.Author.ID == actor.ID
}
