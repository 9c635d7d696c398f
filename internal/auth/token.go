package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// tokenBytes is the entropy of a token: 256 bits, beyond any guessing.
const tokenBytes = 32

// tokenEncLen is the length of tokenBytes in unpadded base64url:
// ceil(32*8/6).
const tokenEncLen = 43

// NewToken returns a fresh secret token prefix_<43 base64url characters>
// and its hash, which is all the server stores.
//
// The prefix says what kind of secret the token is (the server uses "cs"
// for sessions, "cat" for API tokens, "csl" for share links and "cin" for
// invites); its purpose is that secret scanners and people can recognise a
// leaked token. It is not a security boundary.
func NewToken(prefix string) (token string, hash []byte) {
	b := make([]byte, tokenBytes)
	rand.Read(b) // never fails: crypto/rand crashes the program rather than return short
	token = prefix + "_" + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// HashToken returns the SHA-256 of the whole token, prefix included. A
// token has 256 bits of entropy, so a fast unsalted hash is enough: the
// stored hashes are useless to someone who reads the database.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// WellFormed reports whether token has the shape NewToken(prefix) gives, so
// that garbage is turned away before a database lookup. It checks syntax
// only; it is not a constant-time operation and need not be.
func WellFormed(prefix, token string) bool {
	enc, ok := strings.CutPrefix(token, prefix+"_")
	if !ok || len(enc) != tokenEncLen {
		return false
	}
	for i := 0; i < len(enc); i++ {
		if base64URLValue(enc[i]) < 0 {
			return false
		}
	}
	// 43 characters carry 258 bits; the last 2 are zero in every token
	// NewToken makes.
	return base64URLValue(enc[len(enc)-1])&3 == 0
}

// base64URLValue returns the 6-bit value of a base64url character, or -1.
func base64URLValue(c byte) int {
	switch {
	case 'A' <= c && c <= 'Z':
		return int(c - 'A')
	case 'a' <= c && c <= 'z':
		return int(c-'a') + 26
	case '0' <= c && c <= '9':
		return int(c-'0') + 52
	case c == '-':
		return 62
	case c == '_':
		return 63
	}
	return -1
}
