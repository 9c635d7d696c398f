// Package auth holds the security primitives of accounts: password hashing
// (argon2id in the PHC string format), secret tokens of which only a hash is
// ever stored, and login throttling.
//
// It does no I/O beyond reading crypto/rand and keeps no state of its own
// apart from one dummy password hash, computed once, that makes a login for
// an unknown email cost as much as one for a known email, and the login
// throttles' records when they are kept in memory (a ThrottleState may
// keep them elsewhere: the store, when servers share one). Time comes
// from an injected clock so that throttling is tested without sleeping.
package auth
