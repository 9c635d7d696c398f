//go:build !unix

package secrets

// oNoFollow is a no-op where the flag does not exist; the mode check
// still applies.
const oNoFollow = 0
