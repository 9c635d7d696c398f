// Package retrieval is Corral's document search: chunking by structure,
// a full-text index (SQLite FTS5, ranked by BM25) per store, optional
// embeddings fused by reciprocal rank, and a calibrated confidence on
// every answer, below whose threshold nothing is handed on.
//
// Stores are kept apart physically (stores.go): each agent's private
// documents are a file of their own, the shared library another, and a
// search names the stores it may draw from. Who may name which is the
// service's decision, taken fresh on every query; this package only
// guarantees that a store answers for its own rows and nothing else.
//
// Corral's scaffolding (its own files, the repository's database, secret
// files, the instruction files of agent tools, and an agent's own
// exclusion globs) is never indexed and is filtered again from every
// answer (exclude.go).
package retrieval
