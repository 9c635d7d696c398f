package corral

import (
	"context"
	"slices"
	"time"
)

// RunStatus is where a run is in its life. A run is active while
// admitted, running or paused; every other status is final.
type RunStatus string

// Run statuses.
const (
	RunAdmitted   RunStatus = "admitted"   // admission said yes; nothing has run yet
	RunRunning    RunStatus = "running"    // the agent loop is working
	RunPaused     RunStatus = "paused"     // the agent's budget ran out; resumes when it is raised
	RunCompleted  RunStatus = "completed"  // the model answered without asking for tools
	RunCancelled  RunStatus = "cancelled"  // stopped at a safe point on request
	RunKilled     RunStatus = "killed"     // every process ended at once on request
	RunErrored    RunStatus = "errored"    // a limit, the provider or the server ended it
	RunReconciled RunStatus = "reconciled" // the server restarted while it ran
)

// AllRunStatuses lists every run status, the active ones first.
var AllRunStatuses = []RunStatus{RunAdmitted, RunRunning, RunPaused, RunCompleted, RunCancelled, RunKilled, RunErrored, RunReconciled}

// Valid reports whether s is one of AllRunStatuses.
func (s RunStatus) Valid() bool { return slices.Contains(AllRunStatuses, s) }

// RunActive reports whether a run in status s may still change.
func RunActive(s RunStatus) bool {
	return s == RunAdmitted || s == RunRunning || s == RunPaused
}

// Admission refusal reasons, in the order admission checks them.
const (
	ReasonQuarantined       = "quarantined"         // the agent is quarantined until its owner releases it
	ReasonPaused            = "paused"              // the agent is paused: its budget is spent
	ReasonPromptTooLarge    = "prompt_too_large"    // the message is over limits.max_prompt_bytes
	ReasonBudgetExhausted   = "budget_exhausted"    // the agent has used its whole token budget
	ReasonDiskQuota         = "disk_quota"          // the agent's pending change sets hold limits.pending_disk_bytes on disk
	ReasonPendingDiskUser   = "pending_disk_user"   // the pending change sets of all the owner's agents hold --pending-disk-per-user
	ReasonPendingDiskServer = "pending_disk_server" // the pending change sets of every agent hold --pending-disk-total
	ReasonRunLimit          = "run_limit"           // the agent has had limits.max_runs runs
	ReasonBusy              = "busy"                // a run of the agent is still active

	// A delegated run's tree caps, checked before the agent's own rules.
	ReasonDelegationDepth       = "delegation_depth"       // the parent is as deep as the tree may go
	ReasonDelegationFanout      = "delegation_fanout"      // the parent has started as many children as it may
	ReasonDelegationConcurrency = "delegation_concurrency" // the tree has as many delegated runs active as it may
)

// What drives a run. A run whose Driver is "" is the built-in agent loop;
// DriverTerminal is a person at its terminal (no model, no message); the
// others are agent CLIs run in the run's sandbox on its message, their
// model calls going to Corral's gateway. An agent's Driver is one of
// DriverBuiltin and the CLIs.
const (
	DriverBuiltin    = "builtin"
	DriverTerminal   = "terminal"
	DriverCodex      = "codex"
	DriverClaudeCode = "claude-code"
	DriverOpenCode   = "opencode"
)

// AgentDrivers are the drivers an agent may have.
var AgentDrivers = []string{DriverBuiltin, DriverCodex, DriverClaudeCode, DriverOpenCode}

// Violation names the sandbox limit that ended a run or a command; ""
// when none did.
type Violation string

// Violations.
const (
	ViolationTimeout Violation = "timeout" // wall time: the run's, or one command's
	ViolationMemory  Violation = "memory"
	ViolationPids    Violation = "pids"
	ViolationCPU     Violation = "cpu"
	ViolationOutput  Violation = "output" // one command's output
	// ViolationDisk: the run used up its staged tree's disk
	// (limits.disk_bytes or limits.disk_inodes).
	ViolationDisk Violation = "disk"
	// ViolationEgress: the run crossed the egress proxy's per-run byte or
	// connection cap.
	ViolationEgress Violation = "egress"
)

// AllViolations lists every violation.
var AllViolations = []Violation{ViolationTimeout, ViolationMemory, ViolationPids, ViolationCPU, ViolationOutput, ViolationDisk, ViolationEgress}

// Valid reports whether v is one of AllViolations.
func (v Violation) Valid() bool { return slices.Contains(AllViolations, v) }

// Tokens counts model tokens as the provider reported them (a model
// call's usage: ModelResponse.Usage, Settle).
type Tokens struct {
	Input  int64 // prompt_tokens
	Output int64 // completion_tokens
}

// Hold is what a model call asks to reserve of its agent's budget (see
// RunStore.Reserve), and what its usage is kept under once settled.
type Hold struct {
	AgentID string
	RunID   string // "" for a call outside any run
	// UserID is the person a call outside any run is made for (who
	// uploaded a document, who searched); a run's calls are made for the
	// person who triggered it, whatever UserID says.
	UserID string
	Model  string // the model the call is sent to, by the name the gateway sends
	Tokens int64  // the call's ceiling
}

// Reservation is a model call's hold on its agent's budget (see
// RunStore.Reserve).
type Reservation struct {
	ID     string
	Tokens int64
	Budget Budget // the agent's budget with this reservation in it
}

// Run is one piece of work an agent does for one message.
type Run struct {
	ID          string
	AgentID     string
	Status      RunStatus
	TriggeredBy *UserRef // who sent the message; nil when the account is gone
	ParentRunID string   // "" for a run a person started
	// RootRunID is the run a person started that this one descends from
	// through delegation: "" for such a run itself (Root answers either
	// way). Depth counts the hops
	// from it (0 for the root); ParentCall is the parent's tool call that
	// started this run, so that asking again finds it instead of starting
	// another.
	RootRunID  string
	Depth      int
	ParentCall string
	Node       string // the sandbox node its session ran on (role control); "" on this machine
	MessageID  string // the message that started it; "" for a terminal run
	Driver     string // "" for the built-in agent loop, DriverTerminal, or an agent CLI
	// StageID names the run's staged tree; it is also the id of the change
	// set the run's changes become.
	StageID     string
	ChangeSetID string // "" until the run's changes are recorded, and when it changed nothing
	Tokens      Tokens
	Violation   Violation // the sandbox limit that ended it, if one did
	Reason      string    // why it ended as it did, in words safe to show to any viewer
	CreatedAt   time.Time
	StartedAt   time.Time // zero until it starts
	EndedAt     time.Time // zero while active
}

// Root is the id of the root of r's tree: RootRunID, or r's own id.
func (r Run) Root() string {
	if r.RootRunID == "" {
		return r.ID
	}
	return r.RootRunID
}

// AdmissionFacts are what an admission decision is made from. The store
// reads them in the same transaction that records the decision, so two
// messages sent at once cannot both take the last slot.
type AdmissionFacts struct {
	Agent        Agent // settings, state and budget, read in the transaction
	RunsAdmitted int64 // every run the agent was ever admitted
	ActiveRuns   int64 // runs admitted, running or paused
	// PendingDiskBytes is what the agent's pending change sets hold on the
	// host's disk (their ChangeSet.DiskBytes); OwnerPendingDiskBytes what
	// those of every agent of its owner hold, and ServerPendingDiskBytes
	// those of every agent on the server.
	PendingDiskBytes, OwnerPendingDiskBytes, ServerPendingDiskBytes int64
	// For a delegated run: the runs its parent has started so far, and the
	// delegated runs of its tree active now.
	Children, TreeActive int64
}

// Admission is the evidence of one admission decision: sizes and counts,
// never the text of the prompt.
type Admission struct {
	ID           string
	AgentID      string
	UserID       string
	RunID        string // "" when refused
	Reason       string // "" when admitted, else a Reason*
	PromptBytes  int64
	RunsAdmitted int64 // before this decision
	ActiveRuns   int64
	TokensUsed   int64
	TokensBudget int64
	AgentState   AgentState
	At           time.Time
	// PendingDiskBytes is what the agent's pending change sets held;
	// OwnerPendingDiskBytes those of its owner's agents, and
	// ServerPendingDiskBytes those of every agent on the server.
	PendingDiskBytes, OwnerPendingDiskBytes, ServerPendingDiskBytes int64
}

// RunStore keeps runs, their checkpoints and the evidence of admission.
type RunStore interface {
	// Admit decides and records in one transaction. It reads the facts of
	// ev.AgentID and calls decide, which returns "" to admit or a Reason*.
	// Admitted: m, r and the evidence are stored, and r's status is
	// RunAdmitted. Refused: only the evidence is stored. The returned
	// Admission is the evidence as stored, facts filled in. ENOTFOUND when
	// the agent does not exist.
	Admit(ctx context.Context, m Message, r Run, ev Admission, decide func(AdmissionFacts) string) (Admission, error)
	// Admissions lists an agent's admission evidence, newest first.
	Admissions(ctx context.Context, agentID string, limit int) ([]Admission, error)

	Run(ctx context.Context, id string) (Run, error)
	// Runs lists an agent's runs, newest first, at most limit (<= 0: 100).
	Runs(ctx context.Context, agentID string, limit int) ([]Run, error)
	// RunsIn lists every run whose status is one of statuses, oldest first.
	RunsIn(ctx context.Context, statuses ...RunStatus) ([]Run, error)
	// UpdateRun writes r's status, violation, reason, change set id and
	// start and end times, but only while the stored status is one of
	// from: ECONFLICT otherwise. Tokens are not written: only Settle
	// changes them. A run that leaves running loses its gateway token.
	UpdateRun(ctx context.Context, r Run, from ...RunStatus) error
	// SetRunToken keeps the SHA-256 of a running run's gateway token (an
	// agent CLI's only credential), replacing any: ECONFLICT when the run
	// is not running. The token itself is never stored.
	SetRunToken(ctx context.Context, runID string, hash []byte) error
	// RunByToken returns the running run whose token has hash; ENOTFOUND
	// when none has (never was, or its run left running).
	RunByToken(ctx context.Context, hash []byte) (Run, error)
	// Reserve holds h.Tokens of h.AgentID's budget for one model call
	// before it is sent: in one statement, only when the budget is
	// unlimited or what is left (Budget.Left) holds them. EADMISSION when
	// it does not; ENOTFOUND for no agent.
	Reserve(ctx context.Context, h Hold) (Reservation, error)
	// Settle ends a reservation at time at (zero: the store's clock): t
	// (at most what was reserved, see Charge) is added to the run's tokens
	// and the agent's budget.used, the reservation's tokens leave
	// budget.reserved, and t is kept as the call's usage (UsageStore), in
	// one transaction. A call that failed before its provider answered
	// settles with no tokens, and leaves no usage. ENOTFOUND when it was
	// settled before.
	Settle(ctx context.Context, id string, t Tokens, at time.Time) (Budget, error)
	// SettleLeftover settles, at their whole ceiling, the reservations a
	// server that stopped left behind (their calls' usage never came), and
	// returns how many.
	SettleLeftover(ctx context.Context) (int, error)

	// SaveCheckpoint replaces a run's checkpoint (the conversation so far,
	// opaque to the store).
	SaveCheckpoint(ctx context.Context, runID string, data []byte) error
	// Checkpoint returns a run's checkpoint; nil when it has none.
	Checkpoint(ctx context.Context, runID string) ([]byte, error)
	// ChildRun returns the run that parentID's tool call call started;
	// ENOTFOUND when none did.
	ChildRun(ctx context.Context, parentID, call string) (Run, error)
	// TreeRuns lists the runs of the tree whose root is rootID, the root
	// included, oldest first.
	TreeRuns(ctx context.Context, rootID string) ([]Run, error)
	// TreeTokens sums the tokens of every run of a tree.
	TreeTokens(ctx context.Context, rootID string) (int64, error)
	// AgentsCreatedInTree counts the agents that runs of a tree created.
	AgentsCreatedInTree(ctx context.Context, rootID string) (int64, error)

	// LastCheckpoint returns the checkpoint of the agent's newest run that
	// has one, and that run's id: "" and nil when none has.
	LastCheckpoint(ctx context.Context, agentID string) (string, []byte, error)

	// SetAgentState moves an agent to state to if its state is one of from,
	// and reports whether it did. It never touches any other field.
	SetAgentState(ctx context.Context, agentID string, to AgentState, from ...AgentState) (bool, error)
	// CountViolations counts the agent's runs that ended with a violation
	// at or after since.
	CountViolations(ctx context.Context, agentID string, since time.Time) (int64, error)
}

// TreeCaps bound a tree of delegated runs: the runs a person's run starts
// through its delegate tool, theirs, and so on. They are server settings.
type TreeCaps struct {
	Depth       int   // how deep a tree may go below its root; default 3
	Fanout      int   // how many runs one run may start; default 4
	Concurrency int   // how many delegated runs of a tree may be active at once; default 4
	Create      int   // how many agents a tree's runs may create; default 3
	Tokens      int64 // the tokens a whole tree may use; 0: only the agents' own budgets
}

// WithDefaults fills the caps left zero; a negative cap is zero (none
// allowed), and a negative Tokens means no tree cap.
func (c TreeCaps) WithDefaults() TreeCaps {
	def := func(v *int, d int) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	def(&c.Depth, 3)
	def(&c.Fanout, 4)
	def(&c.Concurrency, 4)
	def(&c.Create, 3)
	if c.Tokens < 0 {
		c.Tokens = 0
	}
	return c
}

// AgentSpec is what a run's create_agent tool asks for. Zero fields are
// the parent agent's; nothing may be wider than the parent agent's.
type AgentSpec struct {
	Name, Instructions string
	FS                 string // "" or FSReadOnly or FSReadWrite
	// Limits: only MaxRuns, RunTimeoutS, CPUMillis, MemoryBytes, Pids and
	// OutputBytes may be asked for.
	Limits       Limits
	BudgetTokens int64
}

// Admitted is a run that admission let through: the run, the message that
// starts it (empty for a terminal's) and the admission's evidence as
// stored. Whoever asked for it starts it (the runner's Start).
type Admitted struct {
	Run       Run
	Message   Message
	Admission Admission
}
