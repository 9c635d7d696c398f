package retrieval

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"corral/internal/sanitize"
)

// Stores are the document stores of one server, under one directory:
//
//	DIR/agents/<agent id>/documents.db   an agent's private documents
//	DIR/library/documents.db             the shared library
//
// Each agent's private store is a file of its own: a private query opens
// only that agent's file, so no query can return another agent's rows,
// and BM25's statistics (and so scores) are the agent's own too, leaking
// nothing of what other agents hold.
type Stores struct {
	dir     string
	library *Index

	mu      sync.Mutex
	private map[string]*Index
}

// LibraryOwner is the owner of every row of the library's store.
const LibraryOwner = "library"

// OpenStores opens (creating) the stores under dir.
func OpenStores(ctx context.Context, dir string) (*Stores, error) {
	lib, err := Open(ctx, filepath.Join(dir, "library", "documents.db"), LibraryOwner)
	if err != nil {
		return nil, err
	}
	return &Stores{dir: dir, library: lib, private: map[string]*Index{}}, nil
}

// Library is the shared library's store.
func (s *Stores) Library() *Index { return s.library }

// Private is agent's own store, opened on first use. Idle connections
// close after a minute, so an idle agent holds no file open.
func (s *Stores) Private(ctx context.Context, agentID string) (*Index, error) {
	if err := sanitize.ID("agent", agentID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if x := s.private[agentID]; x != nil {
		return x, nil
	}
	x, err := Open(ctx, s.privatePath(agentID), agentID)
	if err != nil {
		return nil, err
	}
	x.db.SetMaxIdleConns(1)
	x.db.SetConnMaxIdleTime(time.Minute)
	s.private[agentID] = x
	return x, nil
}

// Drop deletes an agent's private store (the agent is deleted).
func (s *Stores) Drop(agentID string) error {
	if err := sanitize.ID("agent", agentID); err != nil {
		return err
	}
	s.mu.Lock()
	x := s.private[agentID]
	delete(s.private, agentID)
	s.mu.Unlock()
	var err error
	if x != nil {
		err = x.Close()
	}
	return errors.Join(err, os.RemoveAll(filepath.Dir(s.privatePath(agentID))))
}

// Close closes every store.
func (s *Stores) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := []error{s.library.Close()}
	for id, x := range s.private {
		errs = append(errs, x.Close())
		delete(s.private, id)
	}
	return errors.Join(errs...)
}

// Agents lists the agents that have a private store on this server's
// disk, opened or not.
func (s *Stores) Agents() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, "agents"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && sanitize.ID("agent", e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

func (s *Stores) privatePath(agentID string) string {
	return filepath.Join(s.dir, "agents", agentID, "documents.db")
}
