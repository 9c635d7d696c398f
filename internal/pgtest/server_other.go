//go:build !linux

package pgtest

import "errors"

// startServer refuses: the server's lifetime rests on Linux's parent
// death signal, and nothing but Linux runs these tests.
func startServer() (*server, error) {
	return nil, errors.New("pgtest runs PostgreSQL on Linux only")
}

// stop is never reached: no server starts.
func (s *server) stop() error { return nil }
