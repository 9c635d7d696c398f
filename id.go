package corral

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewID returns an opaque, unguessable identifier: the prefix names the kind
// ("usr", "agt", ...), the rest is 80 random bits. Ids are not secrets, but
// being unguessable means existence cannot be probed by counting.
func NewID(prefix string) string {
	var b [10]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}
