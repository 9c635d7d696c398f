// Package corral holds the domain of Corral, a self-hosted control plane for
// AI coding agents: the types every layer shares (users, agents, grants,
// links, messages), the one error type, and the small storage interfaces
// that the service layer uses and the store packages implement.
//
// Dependencies point inward: internal/api calls internal/service, which
// talks to these interfaces; internal/store implements them. This
// package imports nothing from the project.
package corral

import (
	"fmt"
	"slices"
	"time"
)

// Level is a caller's access to one agent. The order matters: a higher level
// can do everything a lower one can.
type Level int8

const (
	LevelNone   Level = iota // cannot see the agent at all
	LevelViewer              // reads the agent, its messages, runs, traces, change sets
	LevelRunner              // also sends messages and stops its own runs
	LevelEditor              // also edits instructions, policy, limits; decides change sets
	LevelOwner               // also shares, sets the budget, deletes
)

var levelNames = [...]string{"none", "viewer", "runner", "editor", "owner"}

func (l Level) String() string {
	if l < 0 || int(l) >= len(levelNames) {
		return fmt.Sprintf("Level(%d)", int8(l))
	}
	return levelNames[l]
}

// ParseLevel parses a level name. "none" is not a level anyone can hold, so
// it is rejected like any unknown word.
func ParseLevel(s string) (Level, error) {
	for i, n := range levelNames {
		if i > 0 && n == s {
			return Level(i), nil
		}
	}
	return LevelNone, Errorf(EINVALID, "level must be one of viewer, runner, editor, owner")
}

// User is an account as the rest of the system sees it. It has no field for
// a password hash: credentials travel only as Credential, inside the
// accounts service.
type User struct {
	ID        string
	Email     string
	Name      string
	Admin     bool
	Disabled  bool
	CreatedAt time.Time
	// Via is the id of the account session or API token this user was
	// authenticated by for one request; "" when none (a record read from
	// the store). An id, never the secret.
	Via string
}

// UserRef names a user where an email would say too much (an agent's owner,
// a message's author).
type UserRef struct {
	ID   string
	Name string
}

// Credential is what login needs to check a password. It never leaves the
// accounts service.
type Credential struct {
	UserID       string
	PasswordHash string
	Disabled     bool
}

// NewUser is what creating an account stores.
type NewUser struct {
	Email        string
	Name         string
	PasswordHash string
	// Admin forces the admin flag; the first account is admin regardless.
	Admin bool
	// Origin is how the account is made, for the audit log: "signup" (the
	// default) or "cli". An invite's signup is "invite" whatever it says.
	Origin string
}

// Session is a signed-in browser. The token itself is never stored: only
// its SHA-256.
type Session struct {
	ID        string
	UserID    string
	TokenHash []byte
	CreatedAt time.Time
	ExpiresAt time.Time
}

// APIToken is a personal bearer token for scripts. Like a session, only the
// hash of the secret is stored.
type APIToken struct {
	ID        string
	UserID    string
	Name      string
	CreatedAt time.Time
	LastUsed  time.Time // zero when never used
}

// Invite lets one person sign up when the server's signup mode is invite.
type Invite struct {
	ID        string
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// AgentState is whether an agent may run.
type AgentState string

// Agent states.
const (
	StateActive      AgentState = "active"
	StatePaused      AgentState = "paused" // budget reached
	StateQuarantined AgentState = "quarantined"
)

// AllAgentStates lists every agent state.
var AllAgentStates = []AgentState{StateActive, StatePaused, StateQuarantined}

// Valid reports whether s is one of AllAgentStates.
func (s AgentState) Valid() bool { return slices.Contains(AllAgentStates, s) }

// Policy values.
const (
	FSReadOnly    = "read-only"
	FSReadWrite   = "read-write"
	ChangesReview = "review"
	ChangesAuto   = "auto"
	NetworkNone   = "none"
	// NetworkAllowlist: the run reaches the hosts of Policy.Egress through
	// the egress proxy at EgressAddr, and nothing else.
	NetworkAllowlist = "allowlist"
	DefaultFS        = FSReadWrite   // writes land in a staged copy: review guards them
	DefaultChanges   = ChangesReview // nothing persists without a person's approval
)

// Agent is a configured coding agent owned by one user.
type Agent struct {
	ID           string
	Name         string
	Instructions string
	Model        string // "" means the server's default model
	// Driver is what runs the agent: "" for Corral's own loop (the API's
	// DriverBuiltin) or an agent CLI in the run's sandbox (DriverCodex,
	// DriverClaudeCode, DriverOpenCode).
	Driver    string
	Owner     UserRef
	Policy    Policy
	Limits    Limits
	Budget    Budget
	State     AgentState
	CreatedAt time.Time
	UpdatedAt time.Time
	// CreatedByRun is the run whose create_agent tool made the agent; ""
	// for an agent a person made.
	CreatedByRun string

	// Access is the level of the user the agent was loaded for. Stores fill
	// it in the same read as the agent, so it is never stale.
	Access Level
	// Accepted: the user the agent was loaded for has consented to it as
	// a delegation target for their runs (owning it, accepting their
	// grant on it, or joining a link of it counts), read with Access. A
	// grant alone gives access, never this.
	Accepted bool
	// PendingChanges is how many of the agent's change sets wait for a
	// person (status pending), counted in the same read.
	PendingChanges int
}

// Policy says what an agent's runs may do.
type Policy struct {
	FS      string // read-only | read-write
	Changes string // review | auto
	Network string // none | allowlist
	// Egress is what a run reaches when Network is allowlist.
	Egress Egress
	// Globs over workspace paths, on top of the built-in rules: secret
	// files are left out of staged trees; protected changes are denied;
	// risky changes always wait for a person.
	Secrets, Protected, Risky []string
	// Library: the shared library (documents any user publishes) is
	// searched for the agent, besides its private documents. Off unless
	// an editor turns it on: anyone can write into the library.
	Library bool
}

// Egress is an agent's allow-list: the hosts its runs may reach through
// the egress proxy. Presets name well-known registries (see
// egress.Presets); Allow adds hosts of the agent's own.
type Egress struct {
	Allow   []EgressRule
	Presets []string
}

// EgressRule allows one host, or every host under a suffix ("*.example.com"
// matches a.example.com, not example.com). Empty Ports means 80 and 443;
// empty Methods and Paths mean any. A rule that names methods or paths is
// checked per request, so an HTTPS host under it is terminated by the
// proxy (with the deployment's CA, which the sandbox trusts).
type EgressRule struct {
	Host    string
	Ports   []int
	Methods []string
	Paths   []string // path prefixes, each starting with /
}

// Secret is a value the egress proxy adds, as the header Header, to the
// requests a run of the agent makes to Host. What is stored of it here is
// all anyone reads back: the value is sealed in the store and opened only
// by the proxy.
type Secret struct {
	ID        string
	AgentID   string
	Name      string
	Host      string
	Header    string
	CreatedAt time.Time
}

// Limits bound each run of an agent. Zero means the server's default.
// Where the service and the runner take a default from this package
// (the Default* constants below), /api/limits shows the same number.
type Limits struct {
	MaxPromptBytes int64
	MaxRuns        int64
	RunTimeoutS    int64
	CPUMillis      int64
	MemoryBytes    int64
	Pids           int64
	OutputBytes    int64
	// DiskBytes and DiskInodes bound what one run may write into its
	// staged tree; PendingDiskBytes bounds what the agent's pending change
	// sets may hold on the host's disk before admission refuses new runs.
	DiskBytes        int64
	DiskInodes       int64
	PendingDiskBytes int64
}

// The limits of an agent that sets none: what a zero field of Limits
// means. MaxRuns has none (0 is no limit); a run's CPU time follows its
// time limit (one core for the whole run); the largest prompt is the
// service's (service.Runs.DefaultMaxPrompt). The runner hands the memory
// and process limits to the sandbox explicitly, and the node stages a
// run's tree with the disk limits, so what is shown is what applies.
const (
	DefaultRunTimeoutS      = 30 * 60
	DefaultMemoryBytes      = 512 << 20
	DefaultPids             = 128
	DefaultOutputBytes      = 1 << 20 // what one tool command may write
	DefaultDiskBytes        = 1 << 30
	DefaultDiskInodes       = 100_000
	DefaultPendingDiskBytes = 4 * DefaultDiskBytes // four runs' worth of disk
)

// The server's bounds on what pending change sets hold on the host's disk,
// beyond each agent's own (Limits.PendingDiskBytes): a person can own many
// agents, and the disk is one. Serve's --pending-disk-per-user and
// --pending-disk-total set them.
const (
	DefaultPendingDiskPerUser = 4 * DefaultPendingDiskBytes   // four agents' worth, of all a person owns
	DefaultPendingDiskTotal   = 4 * DefaultPendingDiskPerUser // of every agent on the server
)

// Budget is an agent's token allowance. Tokens 0 means unlimited. Used
// counts what calls spent (and what was carved out for agents its runs
// created); Reserved holds the ceilings of the calls in flight, each
// taken before its call was sent (RunStore.Reserve), so that Used can
// never pass Tokens whatever the number of calls at once.
type Budget struct {
	Tokens   int64
	Used     int64
	Reserved int64
}

// Spent reports whether the budget allows no more model calls.
func (b Budget) Spent() bool { return b.Tokens > 0 && b.Used >= b.Tokens }

// Left is what a new call may still reserve: -1 for an unlimited budget.
func (b Budget) Left() int64 {
	if b.Tokens == 0 {
		return -1
	}
	return max(0, b.Tokens-b.Used-b.Reserved)
}

// Charge is what a call with reservation ceiling is metered at, from the
// usage its provider reported (valid: it reported any): that usage when
// it is a possible one, the ceiling when it is missing, negative or
// larger than the call could have been (a provider's wrong figure never
// lets a call go unmetered, nor meters it beyond what it reserved). The
// bool says the usage was taken as reported.
func Charge(u Tokens, reported bool, ceiling int64) (Tokens, bool) {
	if reported && u.Input >= 0 && u.Output >= 0 && u.Input <= ceiling && u.Output <= ceiling-u.Input {
		return u, true
	}
	return Tokens{Input: ceiling}, false
}

// Grant gives one user a level on one agent.
type Grant struct {
	AgentID   string
	User      User // ID, Email and Name are filled; nothing secret exists on User
	Level     Level
	CreatedAt time.Time
	// Accepted: the user consented to the agent as a delegation target
	// (accepted the grant, or joined a link of the agent). Until then the
	// grant gives access, but the user's runs cannot hand work to it.
	Accepted bool
}

// Link is a share link. Whoever holds its token and accepts it while signed in
// gains its level for as long as the link exists.
type Link struct {
	ID        string
	AgentID   string
	Level     Level
	CreatedBy string
	CreatedAt time.Time
}

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one entry in an agent's thread.
type Message struct {
	ID        string
	AgentID   string
	Role      string
	Content   string
	Author    *UserRef // nil for messages not written by a person
	RunID     string   // "" when no run belongs to it
	CreatedAt time.Time
	// Sources are the documents an answer drew on (retrieval).
	Sources []Source
}

// ChangeStatus is where a change set is: waiting for a person, or decided
// one way or another.
type ChangeStatus string

// Change set statuses.
const (
	ChangePending    ChangeStatus = "pending"    // some entry still waits for a person (review mode, risky entries in auto mode, a partial decision)
	ChangeApplied    ChangeStatus = "applied"    // decided, and at least one entry was applied
	ChangeRejected   ChangeStatus = "rejected"   // decided, nothing applied, and a person rejected something
	ChangeDenied     ChangeStatus = "denied"     // nothing in it may ever be applied (only protected entries)
	ChangeConflicted ChangeStatus = "conflicted" // decided, nothing applied: the files it changes changed in the workspace since the run
	ChangeExpired    ChangeStatus = "expired"    // nobody decided in time: never applied
	ChangeFailed     ChangeStatus = "failed"     // only in change sets of earlier versions: a failed apply now rolls back and leaves the entries pending
)

// AllChangeStatuses lists every change set status.
var AllChangeStatuses = []ChangeStatus{ChangePending, ChangeApplied, ChangeRejected, ChangeDenied, ChangeConflicted, ChangeExpired, ChangeFailed}

// Valid reports whether s is one of AllChangeStatuses.
func (s ChangeStatus) Valid() bool { return slices.Contains(AllChangeStatuses, s) }

// EntryState is where one entry of a change set is. An entry leaves
// pending once, for one of the others, and never comes back.
type EntryState string

// Entry states.
const (
	EntryPending    EntryState = "pending"
	EntryApplied    EntryState = "applied"
	EntryRejected   EntryState = "rejected"   // a person said no to this entry
	EntryDenied     EntryState = "denied"     // protected: never applied
	EntryConflicted EntryState = "conflicted" // its file changed in the workspace since the run saw it: never applied
	EntryDropped    EntryState = "dropped"    // the change set expired (or, in earlier versions, failed) before anyone decided it
)

// AllEntryStates lists every entry state.
var AllEntryStates = []EntryState{EntryPending, EntryApplied, EntryRejected, EntryDenied, EntryConflicted, EntryDropped}

// Valid reports whether s is one of AllEntryStates.
func (s EntryState) Valid() bool { return slices.Contains(AllEntryStates, s) }

// ChangeSet is what one run proposes to change in an agent's workspace,
// as Corral itself measured it.
type ChangeSet struct {
	ID        string
	AgentID   string
	RunID     string // "" when not made by a run
	Status    ChangeStatus
	Mode      string // the agent's policy.changes when it was made
	Entries   []ChangeEntry
	DiskBytes int64 // what the staged tree takes on the host's disk while the change set waits
	CreatedAt time.Time
	ExpiresAt time.Time
	DecidedBy *UserRef // nil until a person decides
	DecidedAt time.Time
}

// Expired is cs as it is once nobody may decide it any more: expired,
// every entry still pending dropped. An expired change set is never
// applied. The entries are a copy: cs is left as it was.
func (cs ChangeSet) Expired() ChangeSet {
	cs.Entries = slices.Clone(cs.Entries)
	for i := range cs.Entries {
		if cs.Entries[i].State == EntryPending {
			cs.Entries[i].State = EntryDropped
		}
	}
	cs.Status = ChangeExpired
	return cs
}

// WaitingChangeSet is a change set that waits for a person, as an inbox
// lists it: whose it is and how many of its entries wait, without the
// entries themselves.
type WaitingChangeSet struct {
	ID        string
	AgentID   string
	AgentName string
	RunID     string // "" when not made by a run
	CreatedAt time.Time
	ExpiresAt time.Time
	Pending   int   // entries still pending
	Entries   int   // entries in all
	DiskBytes int64 // what its staged tree holds on the host's disk while it waits
}

// Classes of a change entry: the node classifies each against the agent's
// policy (see internal/workspace).
const (
	ClassOrdinary  = "ordinary"  // applied at once in auto mode
	ClassRisky     = "risky"     // always waits for a person
	ClassProtected = "protected" // denied: never applied
)

// ChangeEntry is one path of a change set.
type ChangeEntry struct {
	Path      string
	Op        string // create | modify | delete
	OldSHA256 string
	NewSHA256 string
	Size      int64
	Mode      uint32 // the staged file's mode (os.FileMode bits)
	OldMode   uint32
	Class     string   // ordinary | risky | protected
	Flags     []string // facts that make it protected (symlink, hardlink, device, setuid, escape, internal, name, stale) or risky (collision)
	Note      string   // why, in words, when a flag says something a person should read ("" otherwise)
	State     EntryState
	// Diff is a unified diff of a text entry, made when the change set was
	// and kept after it is decided; "" for binary, protected or large
	// entries. Lists leave it out.
	Diff string
}
