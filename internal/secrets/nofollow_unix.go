//go:build unix

package secrets

import "syscall"

const oNoFollow = syscall.O_NOFOLLOW
