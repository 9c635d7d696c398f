// Package workspace turns an agent's run into a proposal: each run works on
// a staged tree of the agent's persistent workspace (copy-on-write where the
// kernel allows), Corral itself works out what changed (a SHA-256 manifest
// of the staged tree's changes, never the model's account), classifies each
// change against the agent's policy, and applies approved changes to the
// persistent workspace all-or-nothing, with a journal that a restart
// finishes or rolls back.
package workspace

import (
	"io/fs"

	"corral"
)

// Operations of a manifest entry.
const (
	OpCreate = "create"
	OpModify = "modify"
	OpDelete = "delete"
)

// Classes of a manifest entry.
const (
	ClassOrdinary  = corral.ClassOrdinary  // applied at once in auto mode
	ClassRisky     = corral.ClassRisky     // always waits for a person
	ClassProtected = corral.ClassProtected // denied: never applied
)

// Flags on a manifest entry: facts about it that make it protected.
const (
	FlagSymlink  = "symlink"  // the new file is a symbolic link
	FlagHardlink = "hardlink" // the new file has more than one link
	FlagDevice   = "device"   // a device, FIFO or socket
	FlagSetuid   = "setuid"   // setuid, setgid or sticky bits
	FlagEscape   = "escape"   // the path would leave the workspace
	FlagInternal = "internal" // Corral's own files
	// FlagName: an element of the path breaks the path rules (see
	// sanitize.Path): a name a person could not upload is never applied.
	FlagName = "name"
	// FlagStale: the run deleted a file that appeared in the workspace
	// while it ran; it never saw it as it is, so the delete is not applied.
	FlagStale = "stale"
	// FlagCollision: the path is one file with another entry's, or with a
	// file in the workspace, where names ignore case or Unicode
	// normalisation. It makes the entry risky, not protected.
	FlagCollision = "collision"
)

// Entry is one change of a run to one path.
type Entry struct {
	Path      string      // slash-separated, relative to the workspace root, clean
	Op        string      // OpCreate, OpModify or OpDelete
	OldSHA256 string      // hex SHA-256 of the persistent file before; "" for create
	NewSHA256 string      // hex SHA-256 of the staged file; "" for delete
	Size      int64       // bytes of the staged file; 0 for delete
	Mode      fs.FileMode // mode of the staged file (type and permission bits); 0 for delete
	OldMode   fs.FileMode // mode of the persistent file; 0 for create
	Flags     []string    // Flag* facts; any flag but FlagCollision makes the entry protected
	Note      string      // what the flags mean for this entry, in words for a reviewer
	Class     string      // Class*; set by Classify
}

// Manifest is every change of one run, sorted by path.
type Manifest []Entry
