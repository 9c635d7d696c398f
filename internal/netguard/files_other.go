//go:build !unix

package netguard

import "errors"

// RaiseFileLimit fails where there is no RLIMIT_NOFILE: the caller must then
// choose a connection cap without it.
func RaiseFileLimit() (uint64, error) {
	return 0, errors.New("no RLIMIT_NOFILE on this system")
}
