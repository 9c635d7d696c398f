package corral

import "time"

// Where a document lives. Private documents belong to one agent and sit in
// that agent's own store; the library is one store every signed-in user's
// agents draw from. The two are separate files: no query over one can
// return a row of the other.
const (
	SourcePrivate = "private"
	SourceLibrary = "library"
)

// Document is an indexed document, without its text.
type Document struct {
	ID        string
	Name      string // a slash-separated relative path, as uploaded
	Source    string // SourcePrivate or SourceLibrary
	AgentID   string // the agent of a private document; "" in the library
	Bytes     int64
	Chunks    int
	Author    *UserRef // nil when the account is gone
	CreatedAt time.Time
	// Embedded: its passages have vectors (an embedding model was
	// configured and answered when it was indexed).
	Embedded bool
}

// DocumentChunk is one passage of a document as it was indexed: its place,
// its headings, its text and its vector (nil when the document was not
// embedded). The store keeps a document's chunks when controls share it,
// so that each control's index can be made again from them.
type DocumentChunk struct {
	Ord     int
	Heading string
	Text    string
	Vector  []float32
}

// Passage is one retrieved chunk of a document.
type Passage struct {
	DocumentID string
	ChunkID    string // "<document id>:<its place in the document>"
	Name       string
	Source     string
	Heading    string
	Text       string
	// Score is the calibrated chance that the passage answers the query,
	// 0 to 1: comparable across documents, stores and queries.
	Score float64
}

// Retrieval is what a search found. When Answerable is false, Items is
// empty for an agent: weak passages are not handed on as if they were an
// answer. A person's search gets them, to review, with Answerable false.
type Retrieval struct {
	Items []Passage
	// Confidence is the highest Score among the passages found (returned
	// or not), the calibrated chance that the search found an answer.
	Confidence float64
	Answerable bool
	Ranker     string // "bm25", or "fused" (BM25 and embeddings, by reciprocal rank)
	// Note says why embeddings were configured but not used.
	Note string
}

// Source is a document an answer drew on, as the thread shows it.
type Source struct {
	DocumentID string
	Name       string
	Source     string
	Score      float64
	Confidence float64 // of the retrieval that found it
}
