package nodetest

import (
	"io"
	"strings"
	"testing"
	"time"

	"corral"
)

// patience bounds every wait of the suite: a liveness bound, never a
// timing assertion.
const patience = 2 * time.Minute

// Screen reads a terminal until it shows what a test waits for.
type Screen struct {
	t    *testing.T
	term corral.Terminal
	seen strings.Builder
}

// NewScreen is the screen of term, empty.
func NewScreen(t *testing.T, term corral.Terminal) *Screen { return &Screen{t: t, term: term} }

// Until reads until the screen holds want, and returns the read error
// that ended it first, if one did. A terminal that shows nothing more is
// closed after patience, which ends the read.
func (s *Screen) Until(want string) error {
	stop := time.AfterFunc(patience, func() { s.term.Close() })
	defer stop.Stop()
	buf := make([]byte, 4096)
	for !strings.Contains(s.seen.String(), want) {
		n, err := s.term.Read(buf)
		s.seen.Write(buf[:n])
		if err != nil {
			return err
		}
	}
	return nil
}

// See reads until the screen holds want; the test fails when it never
// does.
func (s *Screen) See(want string) {
	s.t.Helper()
	if err := s.Until(want); err != nil {
		s.t.Fatalf("waiting for %q on the terminal: %v; screen %q", want, err, s.seen.String())
	}
}

// Type types text.
func (s *Screen) Type(text string) {
	s.t.Helper()
	if _, err := io.WriteString(s.term, text); err != nil {
		s.t.Fatalf("typing %q: %v", text, err)
	}
}

// String is what the screen has shown so far.
func (s *Screen) String() string { return s.seen.String() }
