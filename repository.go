package corral

import (
	"context"
	"slices"
	"time"
)

// RepoStatus is where an agent's repository is: being cloned, cloned, or
// its clone failed.
type RepoStatus string

// Repository statuses.
const (
	RepoCloning RepoStatus = "cloning"
	RepoReady   RepoStatus = "ready"
	RepoFailed  RepoStatus = "failed"
)

// AllRepoStatuses lists every repository status.
var AllRepoStatuses = []RepoStatus{RepoCloning, RepoReady, RepoFailed}

// Valid reports whether s is one of AllRepoStatuses.
func (s RepoStatus) Valid() bool { return slices.Contains(AllRepoStatuses, s) }

// Repository is the git repository an agent's persistent workspace is a
// clone of. A workspace with one turns each applied change set into a
// commit.
type Repository struct {
	AgentID      string
	URL          string // https, no userinfo
	Ref          string // the branch or tag asked for, or the branch cloned
	CredentialID string // the owner's credential asked for; "" to pick by host
	Head         string // the commit HEAD names, "" until cloned
	Status       RepoStatus
	// Error is what went wrong, for people: the clone's failure, or the
	// last commit that could not be made (the files were applied).
	Error string
	// Pending are applied paths whose commit failed: the next commit
	// includes them.
	Pending   []string
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
	LastPush  *Push
}

// Push is the last push of a repository.
type Push struct {
	Branch string
	Head   string
	At     time.Time
	By     UserRef
}

// Identity is a person as a commit names them: only their name and email.
type Identity struct {
	Name, Email string
}

// RepositoryStore keeps agents' repositories.
type RepositoryStore interface {
	// CreateRepository stores a new repository row for an agent: ECONFLICT
	// when the agent has one that is cloning or ready (a failed one is
	// replaced).
	CreateRepository(ctx context.Context, r Repository) error
	// Repository returns an agent's repository: ENOTFOUND when none.
	Repository(ctx context.Context, agentID string) (Repository, error)
	// UpdateRepository writes r's status, ref, head, error, pending paths
	// and last push.
	UpdateRepository(ctx context.Context, r Repository) error
	// FailCloning marks every repository still cloning failed with msg
	// (after a restart: no clone survives the process) and returns them.
	FailCloning(ctx context.Context, msg string, now time.Time) ([]string, error)
	// Identity answers a person's name and email, nothing else: what a
	// commit records. ENOTFOUND when the account is gone.
	Identity(ctx context.Context, userID string) (Identity, error)
}
