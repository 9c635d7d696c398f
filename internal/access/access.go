// Package access is Corral's authorization policy: one pure function that
// decides what a caller holding a level on an agent may do. It does no I/O
// and reads no clock, so every entry point (HTTP handlers, websocket frames,
// delegated runs, the sandbox role) can call it with the same result, and
// its exhaustive test covers every decision the product makes.
package access

import "corral"

// Action is something a caller can do to an agent or what belongs to it.
type Action int

const (
	ViewAgent      Action = iota // read the agent's settings
	ReadMessages                 // read the thread
	ViewRuns                     // read runs and their traces and events
	ViewChanges                  // read change sets and diffs
	ReadFiles                    // read the persistent workspace
	ReadSecrets                  // read its secret files (.env*, policy.exclude), which runs never see
	SendMessage                  // post a message (and so start a run)
	StopOwnRun                   // gracefully stop a run the caller started
	StopAnyRun                   // gracefully stop anyone's run
	KillRun                      // kill a run at once
	EditAgent                    // change name, instructions, model, policy, limits
	DecideChanges                // approve or reject change sets
	WriteFiles                   // upload into the persistent workspace
	SetBudget                    // change the token budget
	Share                        // grant, revoke, create and delete share links
	Release                      // lift a quarantine
	DeleteAgent                  // delete the agent and everything it owns
	UseTerminal                  // open a shell in a run's sandbox, or a terminal run
	ReadDocuments                // list and search the agent's private documents (and, through it, the library)
	WriteDocuments               // upload and delete the agent's private documents

	numActions // keep last: the exhaustive test walks 0..numActions-1
)

var actionNames = [numActions]string{
	"view_agent", "read_messages", "view_runs", "view_changes", "read_files", "read_secrets",
	"send_message", "stop_own_run", "stop_any_run", "kill_run", "edit_agent",
	"decide_changes", "write_files", "set_budget", "share", "release",
	"delete_agent", "use_terminal", "read_documents", "write_documents",
}

func (a Action) String() string {
	if a < 0 || a >= numActions {
		return "unknown"
	}
	return actionNames[a]
}

// Actions returns every action, for tests and documentation.
func Actions() []Action {
	all := make([]Action, numActions)
	for i := range all {
		all[i] = Action(i)
	}
	return all
}

// required is the lowest level that may perform each action. An action
// missing here has the zero value LevelNone, which Check refuses: a new
// action is denied until someone decides who may do it.
var required = [numActions]corral.Level{
	ViewAgent:      corral.LevelViewer,
	ReadMessages:   corral.LevelViewer,
	ViewRuns:       corral.LevelViewer,
	ViewChanges:    corral.LevelViewer,
	ReadFiles:      corral.LevelViewer,
	ReadSecrets:    corral.LevelEditor,
	SendMessage:    corral.LevelRunner,
	StopOwnRun:     corral.LevelRunner,
	StopAnyRun:     corral.LevelEditor,
	KillRun:        corral.LevelEditor,
	EditAgent:      corral.LevelEditor,
	DecideChanges:  corral.LevelEditor,
	WriteFiles:     corral.LevelEditor,
	SetBudget:      corral.LevelOwner,
	Share:          corral.LevelOwner,
	Release:        corral.LevelOwner,
	DeleteAgent:    corral.LevelOwner,
	UseTerminal:    corral.LevelEditor,
	ReadDocuments:  corral.LevelViewer,
	WriteDocuments: corral.LevelEditor,
}

// Decision is the outcome of Check.
type Decision int

const (
	// Hide: the caller may not know the agent exists. The answer must be the
	// same as for an agent that does not exist.
	Hide Decision = iota
	// Forbid: the caller can see the agent but may not do this.
	Forbid
	// Allow: go ahead.
	Allow
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Forbid:
		return "forbid"
	default:
		return "hide"
	}
}

// Check decides whether a caller holding level may perform action. It is
// total: an unknown level or action never yields Allow.
func Check(level corral.Level, action Action) Decision {
	if level <= corral.LevelNone || level > corral.LevelOwner {
		return Hide
	}
	if action < 0 || action >= numActions {
		return Forbid
	}
	need := required[action]
	if need == corral.LevelNone || level < need {
		return Forbid
	}
	return Allow
}

// Err turns a decision into the error the caller sees: nil for Allow, a
// not-found error (identical to a missing resource of that kind) for Hide,
// and forbidden for Forbid.
func (d Decision) Err(kind string, action Action) error {
	switch d {
	case Allow:
		return nil
	case Forbid:
		return corral.Errorf(corral.EFORBIDDEN, "your access to this %s does not allow %s", kind, action)
	default:
		return corral.NotFound(kind)
	}
}

// Target decides whether a person's runs may hand work to an agent
// (list_agents and delegate, in the built-in loop and an agent CLI's
// tools), for a person holding level on it who has accepted it as a
// delegation target (accepted) or not. Access is not consent: anyone may
// grant anyone access to their own agent, and a hop writes the task into
// that agent's thread as the person. So an agent the person has not
// accepted is hidden from their runs, exactly as one that does not exist;
// owning an agent is accepting it. Past consent, the decision is
// SendMessage's. Total and closed like Check.
func Target(level corral.Level, accepted bool) Decision {
	if level == corral.LevelOwner {
		accepted = true
	}
	if !accepted {
		return Hide
	}
	return Check(level, SendMessage)
}

// LibraryAction is something done to the shared library, which belongs to
// no agent: it is decided by who the caller is, not by a level.
type LibraryAction int

const (
	ReadLibrary    LibraryAction = iota // list it; an agent's search draws from it
	PublishLibrary                      // add a document to it
	DeleteLibrary                       // delete one of its documents

	numLibraryActions
)

// Library decides a library action for a signed-in caller (signedIn false
// is never allowed), who is an admin or not and the author of the
// document concerned or not (DeleteLibrary only). It is total and fails
// closed like Check.
func Library(signedIn, admin, author bool, action LibraryAction) Decision {
	if !signedIn {
		return Hide
	}
	switch action {
	case ReadLibrary, PublishLibrary:
		return Allow
	case DeleteLibrary:
		if admin || author {
			return Allow
		}
	}
	return Forbid
}

// ServerAction is something that reads across every agent and account,
// for operating the server: decided by who the caller is, not by a level.
type ServerAction int

const (
	ReadUsage   ServerAction = iota // tokens and runs summed per agent, person or model
	ListRuns                        // the runs in flight
	ReadAudit                       // every trace event and account event
	ReadBudgets                     // every agent's budget and its open reservations

	numServerActions
)

var serverActionNames = [numServerActions]string{"read_usage", "list_runs", "read_audit", "read_budgets"}

func (a ServerAction) String() string {
	if a < 0 || a >= numServerActions {
		return "unknown"
	}
	return serverActionNames[a]
}

// Reach is how much of the server a ServerAction covers for a caller.
type Reach int

const (
	// ReachNone: refused.
	ReachNone Reach = iota
	// ReachOwn: only what is the caller's own. Usage: the agents the
	// caller owns (their owner's budget paid for it, whoever triggered
	// the runs). Runs: the runs of agents whose runs the caller may view
	// (ViewRuns, the same as each agent's own list).
	ReachOwn
	// ReachAll: everyone's.
	ReachAll
)

func (r Reach) String() string {
	switch r {
	case ReachOwn:
		return "own"
	case ReachAll:
		return "all"
	default:
		return "none"
	}
}

// ownReach is what a signed-in caller who is not an admin may see of each
// server action. One missing here is ReachNone: refused until someone
// decides.
var ownReach = [numServerActions]Reach{
	ReadUsage: ReachOwn,
	ListRuns:  ReachOwn,
}

// Oversee decides how far a server action reaches for a caller who is
// signed in or not, and an admin or not: an admin's reaches everyone, a
// signed-in caller's at most their own, an anonymous caller's nothing. It
// is total and fails closed like Check.
func Oversee(signedIn, admin bool, action ServerAction) Reach {
	if !signedIn || action < 0 || action >= numServerActions {
		return ReachNone
	}
	if admin {
		return ReachAll
	}
	return ownReach[action]
}
