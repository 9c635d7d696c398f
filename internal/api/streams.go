package api

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"corral"
)

// Limits on live event streams (see Config). A browser tab watches one run
// at a time; eight per session covers several tabs and a script, and one
// session cannot hold more. The total default suits a server built without
// a connection cap; serve derives it from its connection cap instead.
const (
	DefaultMaxStreams           = 1024
	DefaultMaxStreamsPerSession = 8
	DefaultStreamWriteTimeout   = 30 * time.Second
)

// streamRetryAfter is what a refused stream is told: streams end when their
// runs do, which no one can predict, so this only paces the retries.
const streamRetryAfter = 5 * time.Second

// streamSlots counts live event streams, in total and per credential.
type streamSlots struct {
	maxTotal, maxPer int

	mu     sync.Mutex
	total  int
	perKey map[[sha256.Size]byte]int
}

func newStreamSlots(maxTotal, maxPer int) *streamSlots {
	return &streamSlots{maxTotal: maxTotal, maxPer: maxPer, perKey: map[[sha256.Size]byte]int{}}
}

// acquire takes a slot for the credential key, or says why not. The caller
// must call release exactly once when its stream ends.
func (s *streamSlots) acquire(key [sha256.Size]byte) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perKey[key] >= s.maxPer {
		return nil, &corral.Error{Code: corral.ETHROTTLED, RetryAfter: streamRetryAfter,
			Message: "this session already has the most live event streams it may hold open; close one (another tab?) and try again"}
	}
	if s.total >= s.maxTotal {
		return nil, &corral.Error{Code: corral.ETHROTTLED, RetryAfter: streamRetryAfter,
			Message: "the server has as many live event streams open as it allows; try again shortly"}
	}
	s.total++
	s.perKey[key]++
	var once sync.Once
	return func() { once.Do(func() { s.release(key) }) }, nil
}

func (s *streamSlots) release(key [sha256.Size]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if n := s.perKey[key] - 1; n > 0 {
		s.perKey[key] = n
	} else {
		delete(s.perKey, key)
	}
}

// credentialKey names the credential a request was authenticated with, the
// same way authenticate chose it: its bearer token if it has an
// Authorization header, else its session cookie. Hashed, so the table of
// live streams holds no secret.
func credentialKey(r *http.Request) [sha256.Size]byte {
	if h := r.Header.Get("Authorization"); h != "" {
		token, _ := strings.CutPrefix(h, "Bearer ")
		return sha256.Sum256([]byte("token\x00" + strings.TrimSpace(token)))
	}
	var session string
	if c, err := r.Cookie(CookieName); err == nil {
		session = c.Value
	}
	return sha256.Sum256([]byte("session\x00" + session))
}
