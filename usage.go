package corral

import (
	"context"
	"time"
)

// Usage is what model calls spent, as their settlements metered it: every
// call kept with its agent, run, model and the people it belonged to, so
// it can be summed by agent, by person or by model, per UTC day.

// UsageGroup is what usage is summed by.
type UsageGroup string

// Usage groups.
const (
	UsageByAgent UsageGroup = "agent" // the agent whose budget paid
	UsageByUser  UsageGroup = "user"  // the person the call was made for (see Hold.UserID)
	UsageByModel UsageGroup = "model" // the model the call was sent to
)

// UsageGroups lists every group, in the order the API names them.
var UsageGroups = []UsageGroup{UsageByAgent, UsageByUser, UsageByModel}

// UsageQuery asks for usage summed per group, and per group and UTC day.
type UsageQuery struct {
	GroupBy UsageGroup
	// Since and Until bound when the calls were settled: Since included,
	// Until excluded; zero leaves that side open.
	Since, Until time.Time
	// Owner, when set, keeps only the calls of agents this account owned
	// when the call was made; "" keeps everyone's.
	Owner string
}

// UsageCount is what some calls spent.
type UsageCount struct {
	Tokens Tokens
	Calls  int64 // settled calls that spent tokens
	Runs   int64 // distinct runs among them (a call outside any run counts none)
}

// UsageDay is a group's usage on one UTC day.
type UsageDay struct {
	Day time.Time // midnight UTC
	UsageCount
}

// UsageTotal is one group's usage over the query's span, and day by day.
type UsageTotal struct {
	// Key is the agent's or the person's id, or the model's name. "" is
	// the calls made for no one: a run whose account is gone.
	Key string
	// Name is the agent's name or the person's display name, as they are
	// now; "" for a model, and for an agent or account that is gone.
	Name string
	UsageCount
	Days []UsageDay // oldest first; only days with usage
}

// UsageStore sums the usage that settlements recorded (RunStore.Settle).
type UsageStore interface {
	// Usage sums q's calls per group, most tokens first, and per group
	// and day.
	Usage(ctx context.Context, q UsageQuery) ([]UsageTotal, error)
}

// AgentBudget is an agent's budget as its reservations leave it, for the
// administrators' overview.
type AgentBudget struct {
	AgentID   string
	AgentName string
	Owner     UserRef
	Budget    Budget
	// Open counts the reservations not yet settled: model calls in
	// flight, or left by a server that stopped mid-call until the next
	// start settles them.
	Open int64
}

// BudgetStore reads every agent's budget at once.
type BudgetStore interface {
	// AgentBudgets lists every agent's budget, by agent name and id.
	AgentBudgets(ctx context.Context) ([]AgentBudget, error)
}
