// Package role decides what each role of the one Corral binary starts.
//
// The binary runs as all (everything on one machine), control (database,
// accounts, browsers; no worktrees) or sandbox (worktrees and sandboxes; no
// database, no keys, no browsers). Three predicates are the only place that
// knowledge lives, and an unknown role is an error, never a default: a typo
// in a deploy variable must not quietly become the everything role.
package role

import (
	"strings"

	"corral"
)

// Role is a way of running the binary.
type Role string

const (
	All     Role = "all"
	Control Role = "control"
	Sandbox Role = "sandbox"
)

// Roles lists every role, for the invariant test and for usage text.
var Roles = []Role{All, Control, Sandbox}

// Parse returns the role named s. There is no default.
func Parse(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return "", corral.Errorf(corral.EINVALID, "unknown role %q: want one of %s", s, strings.Join(names, ", "))
}

// NeedsDatabase reports whether the role opens the database (and so holds
// accounts and keys).
func NeedsDatabase(r Role) bool { return r == All || r == Control }

// ServesBrowsers reports whether the role answers browsers and API clients
// directly. A role that serves browsers must have the database: it is the one
// that decides who is asking.
func ServesBrowsers(r Role) bool { return r == All || r == Control }

// HoldsWorktree reports whether the role keeps workspaces and runs
// sandboxes. On a role without worktrees a workspace question is an error,
// never an empty answer.
func HoldsWorktree(r Role) bool { return r == All || r == Sandbox }

// Supported reports whether this build can run the role, with the reason
// when it cannot. Every role runs.
func Supported(r Role) error {
	if _, err := Parse(string(r)); err != nil {
		return err
	}
	return nil
}

// ReachesNodes reports whether the role holds no worktrees of its own but
// serves runs: it reaches the sandbox nodes that hold them (control).
func ReachesNodes(r Role) bool { return ServesBrowsers(r) && !HoldsWorktree(r) }

// DialsControl reports whether the role holds worktrees for another
// machine's database: it dials control and listens on nothing (sandbox).
func DialsControl(r Role) bool { return HoldsWorktree(r) && !NeedsDatabase(r) }
