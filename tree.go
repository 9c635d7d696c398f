package corral

import (
	"context"
	"io"
	"strings"
	"time"
)

// Trees is the half of the machine that holds agents' workspaces and
// runs' sandboxes that keeps the workspaces (the other is Sessions): each
// agent's persistent workspace, the staged trees runs work on, the journal
// that makes every write to a workspace all or nothing, and the git
// repository a workspace may be. The change-set, file and repository
// services reach them only through this interface (see Sessions for who
// implements it). Everything is named by ids (an agent's, a stage's,
// which is its change set's) and crosses as plain data: the services
// decide who may do what and keep the records; the node does it on disk.
//
// Every write to one agent's workspace (an apply, an upload, an import, a
// delete, a clone, a commit) happens one at a time, and each open staged
// tree of the agent hears of it first, so a run's change set can never
// overwrite an edit made while the run worked.
//
// Finishing or rolling back the writes a crash interrupted is not here:
// it happens once, at start-up, on the machine itself (node.Local.Recover),
// before anything reaches it through this interface.
type Trees interface {
	// Stage stages the agent's workspace (made, empty, on first use) as
	// the tree spec.ID. From now on every write to the workspace is told
	// to the tree, until its Manifest is taken.
	Stage(ctx context.Context, spec StageSpec) error
	// ReopenStage opens a staged tree that a paused run or an earlier
	// process left; ENOTFOUND when there is none.
	ReopenStage(ctx context.Context, agentID, stageID string) error
	// Manifest measures what was changed in a staged tree (SHA-256 of
	// every changed path, as Corral reads it, never the model's account),
	// classified by policy, each text entry with its diff. The tree stops
	// hearing of writes (its run is over) and stays for Apply until
	// DiscardStage. Entries carry no State.
	Manifest(ctx context.Context, agentID, stageID string, policy ClassPolicy) (StageManifest, error)
	// Diffs makes the diffs of entries from a staged tree that is still on
	// disk (a change set made before diffs were kept).
	Diffs(ctx context.Context, agentID, stageID string, entries []ChangeEntry) ([]ChangeEntry, error)
	// Apply writes entries of a staged tree into the workspace, all or
	// nothing. When the workspace changed under any of them since the run
	// saw it, nothing is written: ECONFLICT, and Conflicts names them.
	Apply(ctx context.Context, req ApplyRequest) (ApplyResult, error)
	// DiscardStage removes a staged tree, mounted or not. A tree that is
	// gone already is not an error.
	DiscardStage(ctx context.Context, stageID string) error

	// ReadFile lists a directory or returns a file of the workspace, as
	// scope may see it. Links are never followed out of it.
	ReadFile(ctx context.Context, scope FileScope, path string) ([]FileInfo, []byte, error)
	// WriteFile writes one file, atomically, never through a link.
	WriteFile(ctx context.Context, w FileWrite) (CommitResult, error)
	// DeleteFile deletes a file, or with recursive a directory and what it
	// holds; links are never followed nor deleted.
	DeleteFile(ctx context.Context, agentID, path string, recursive bool, commit *CommitSpec) (DeleteResult, error)
	// Import extracts a tar, tar.gz or zip archive (told by contentType or
	// by its first bytes) into the workspace, all or nothing. It creates
	// and replaces files, never deletes one.
	Import(ctx context.Context, agentID, contentType string, body io.Reader, commit *CommitSpec) (ImportResult, error)
	// Archive writes the workspace as scope may see it, as a tar.gz.
	Archive(ctx context.Context, scope FileScope, w io.Writer) error
	// DropAgent removes everything the node holds of an agent that is
	// gone: its staged trees (mounted or not), its workspace, its journal
	// and a clone of it in progress. What is gone already is not an
	// error; a staged tree that cannot be removed leaves the workspace.
	DropAgent(ctx context.Context, agentID string) error
	// ExportWorkspace writes the agent's whole workspace (.git and secret
	// files included) as a tar, for ImportWorkspace on another node: a
	// move.
	ExportWorkspace(ctx context.Context, agentID string, w io.Writer) error
	// ImportWorkspace makes the agent's workspace from ExportWorkspace's
	// tar, all of it or nothing; the workspace must be empty, and no run
	// working on it.
	ImportWorkspace(ctx context.Context, agentID string, r io.Reader) error

	// Clone clones a repository into the agent's empty workspace, which
	// no run may be working on: all of it or nothing lands there.
	Clone(ctx context.Context, agentID string, spec CloneSpec, progress func(percent int)) (CloneResult, error)
	// CanClone says whether a clone may land in the workspace now (it is
	// empty and no run works on it); ECONFLICT saying why not.
	CanClone(ctx context.Context, agentID string) error
	// Commit commits paths of the workspace (an earlier failed commit's).
	Commit(ctx context.Context, agentID string, spec CommitSpec) (CommitResult, error)
	// Log lists the newest n commits of the workspace's repository.
	Log(ctx context.Context, agentID string, n int) ([]GitCommit, error)
	// Push pushes the repository's HEAD to branch of url, as a
	// fast-forward only: ECONFLICT naming the remote's head otherwise.
	Push(ctx context.Context, agentID, url, branch string, auth *GitAuth) (PushResult, error)
	// Sync fetches spec.Ref (a branch) of spec.URL and brings the
	// workspace to it: a fast-forward, or a rebase of the workspace's own
	// commits onto it. No run may be working on the workspace (ECONFLICT).
	// A rebase that does not apply cleanly changes nothing: ECONFLICT,
	// reason sync_conflict, naming the paths in conflict.
	Sync(ctx context.Context, agentID string, spec CloneSpec) (SyncResult, error)
}

// MaxFile bounds a file read or written through ReadFile and WriteFile.
const MaxFile = 8 << 20

// StageSpec is a staged tree to make.
type StageSpec struct {
	ID      string // the tree's id, which its change set carries
	AgentID string
	// Secrets are the agent's globs of secret files, left out of the tree
	// besides Corral's own (.env and the like).
	Secrets []string
	// The tree's own disk, when the node gives each tree one.
	DiskBytes, DiskInodes int64
}

// ClassPolicy is what classifying a manifest needs of an agent's policy.
type ClassPolicy struct {
	Protected []string // extra globs never applied
	Risky     []string // extra globs that always wait for a person
}

// StageManifest is what a run changed in its staged tree.
type StageManifest struct {
	Entries   []ChangeEntry // by path
	DiskBytes int64         // what the tree's changes use of its disk
}

// ApplyRequest is an apply of a staged tree's entries.
type ApplyRequest struct {
	AgentID, StageID string
	ID               string // the change set's: names the journal
	Entries          []ChangeEntry
	// Commit, when set, is the commit to make of what was applied, in the
	// same turn: the agent's workspace is a repository.
	Commit *CommitSpec
}

// ApplyResult is what an apply did.
type ApplyResult struct {
	// Conflicts are the paths whose workspace file changed since the run
	// saw it, each with why; with any, nothing was applied.
	Conflicts map[string]string
	Commit    CommitResult
}

// FileScope is the part of a workspace a person may see.
type FileScope struct {
	AgentID string
	Name    string // the agent's name, for an archive's top
	// Secrets are the agent's globs of secret files (beside Corral's);
	// ShowSecrets says whether the person may read them.
	Secrets     []string
	ShowSecrets bool
}

// FileInfo is one entry of a workspace directory listing.
type FileInfo struct {
	Name string
	Dir  bool
	Size int64
}

// FileWrite is one file written into a workspace by a person.
type FileWrite struct {
	AgentID string
	Path    string
	Content []byte
	Commit  *CommitSpec
}

// DeleteResult is what a delete removed.
type DeleteResult struct {
	Files, Dirs int
	Commit      CommitResult
}

// ImportResult is what an archive import wrote.
type ImportResult struct {
	Files   int   // regular files created or replaced (unchanged ones included)
	Bytes   int64 // their bytes
	Changed int   // files that differed from the workspace's
	Commit  CommitResult
}

// CommitSpec is a commit to make of what a write changed.
type CommitSpec struct {
	Author  Identity // "" name: Corral
	Message string
	// Paths are what else to include: paths an earlier commit could not.
	Paths []string
	// Secrets are the agent's globs of secret files: never committed, a
	// push would carry them off the machine.
	Secrets []string
}

// CommitResult is how a commit went. A failed commit leaves the files
// written; Paths are what the next commit must include.
type CommitResult struct {
	Made   bool   // a commit was tried
	SHA    string // the new HEAD; "" when there was nothing to commit
	Failed bool
	Paths  []string // what the commit covered (or, failed, should have)
}

// GitAuth is a credential for one git operation, valid only during it.
type GitAuth struct {
	Username string
	Secret   []byte
}

// CloneSpec is a repository to clone.
type CloneSpec struct {
	URL  string // https, checked
	Ref  string // a branch or tag, checked; "" for the default
	Auth *GitAuth
}

// CloneResult is what a clone made.
type CloneResult struct {
	Head   string
	Branch string
}

// PushResult is what a push did.
type PushResult struct {
	Branch  string
	Head    string // the commit the remote branch now names
	Commits int    // commits the remote did not have
}

// SyncResult is what a sync did.
type SyncResult struct {
	Head        string // the commit the workspace's HEAD names now
	Upstream    string // the commit the remote's ref named
	FastForward bool   // the workspace moved to Upstream (or already held it)
	Rebased     int    // the workspace's own commits replayed onto Upstream
	Status      string // up_to_date, fast_forward or rebased
	// Pending are the agent's change sets that wait for review: staged
	// against the workspace before the sync, each entry is checked against
	// the new base when it is decided, and one whose file the sync changed
	// is conflicted then, as for a lost update.
	Pending []string
}

// GitCommit is one commit of a workspace's history.
type GitCommit struct {
	SHA         string
	Author      Identity
	CommittedAt time.Time
	Message     string
}

// Trailer returns the value of the trailer line "key: value" of the
// commit's message, "" when it has none. The last such line counts:
// trailers end the message, and the text above them (a person's request,
// an agent's answer) may hold a line that looks like one.
func (c GitCommit) Trailer(key string) string {
	lines := strings.Split(c.Message, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(lines[i], key+": "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
