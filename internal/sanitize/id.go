package sanitize

import (
	"corral"
)

// maxID bounds an id. corral.NewID makes 20 bytes ("agt_" and 16 of
// base32); the rest is room for longer prefixes, never for paths.
const maxID = 64

// ID checks an id Corral made (corral.NewID: a lower-case prefix, "_" and
// lower-case base32) wherever one arrives from outside the process that
// made it and is about to name a file or directory, or to be looked up: 1
// to 64 bytes of a-z, 0-9 and "_". Nothing else passes, so an id can never
// be a path, an option or another spelling of the same id. kind says what
// it names ("agent", "stage", "credential") in the error. Code EINVALID.
func ID(kind, id string) error {
	ok := id != "" && len(id) <= maxID
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	if !ok {
		return corral.Errorf(corral.EINVALID, "%s id %q is not an id", kind, Escape(bounded(id, maxID+1)))
	}
	return nil
}

// CommandID checks the id of a command in a sandbox session: the caller
// names each command it execs (the runner's "m3-0", "cli-1") and the name
// becomes the command's files in the session's directory. 1 to 64 ASCII
// letters, digits, ".", "_" or "-", starting with a letter or a digit, so
// it is never "." or "..". Code EINVALID.
func CommandID(id string) error {
	ok := id != "" && len(id) <= maxID && alnum(id[0])
	for i := 1; ok && i < len(id); i++ {
		c := id[i]
		ok = alnum(c) || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return corral.Errorf(corral.EINVALID, "command id %q must be 1 to 64 letters, digits, dots, dashes or underscores", Escape(bounded(id, maxID+1)))
	}
	return nil
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// bounded cuts s to at most n bytes, for an error message.
func bounded(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
