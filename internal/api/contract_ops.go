package api

import (
	"fmt"

	"corral"
	"corral/internal/openapi"
	"corral/internal/service"
)

// opsOperations documents the routes of operating the server: usage, the
// audit log, the runs in flight and every agent's budget.
func opsOperations() map[string]operation {
	str := func() *openapi.Schema { return &openapi.Schema{Type: openapi.Types{"string"}} }
	bound := func(side string) string {
		return "Only calls settled " + side + " this time: an RFC 3339 time (`2026-11-29T12:00:00Z`) or a date (`2026-11-29`, " +
			"its midnight UTC). Absent: unbounded."
	}
	return map[string]operation{
		"GET /api/usage": {
			id: "getUsage", tags: []string{"operations"}, summary: "Tokens and runs per agent, person or model, and per day",
			doc: "What model calls spent, summed per group over the span and per group and UTC day, from the " +
				"usage each call's settlement recorded: the provider's own figures, or the call's ceiling " +
				"when its answer came without usage (as the budget counts it). Embeddings of an agent's " +
				"documents count as the agent's; those of the shared library belong to no agent and are not " +
				"counted. An admin sees every agent's usage (`scope: all`); anyone else the usage of the " +
				"agents they own, whoever triggered the runs (`scope: own`): the owner's budget paid for " +
				"it. A person who runs someone else's shared agent sees their runs' tokens on each run " +
				"(GET /api/runs/{id}), not here. 400 for a `group_by`, `since` or `until` it cannot read, " +
				"`since` not before `until`, or a parameter it does not take.",
			query: []*openapi.Parameter{
				{Name: "group_by", In: "query", Schema: &openapi.Schema{Type: openapi.Types{"string"}, Enum: openapi.Enum("agent", "user", "model"), Default: "agent"},
					Description: "What to sum by: `agent` (the agent whose budget paid), `user` (the person the call was made for: " +
						"whoever triggered the run, or who uploaded or searched an agent's documents) or `model` (the " +
						"model the call was sent to)."},
				{Name: "since", In: "query", Schema: str(), Description: bound("at or after")},
				{Name: "until", In: "query", Schema: str(), Description: bound("before")},
			},
			replies: []reply{
				{status: 200, of: usageView{}, doc: "The sums."},
				{status: 400},
			},
		},
		"GET /api/audit": {
			id: "getAudit", tags: []string{"operations"}, summary: "Page through every trace event and account event",
			doc: "Admin only (403 otherwise). Every trace event (each run's chain and each agent's own) and every account event " +
				"(signup, login, logout, disable and enable, invites, API tokens, grants, links, credentials, agent secrets), " +
				"in one order, as JSON lines (`" + ndjson + "`), oldest first. Each line carries its own `cursor`; the " +
				"`" + NextCursorHeader + "` header is the cursor of the page's last line (the one asked with when the " +
				"page is empty). Ask again with `after` set to it: every event comes exactly once across pages, even " +
				"while events are being written; an empty page means there is nothing newer yet. No line holds a token, " +
				"a password hash or a secret's value: account events name ids and levels only.",
			query: []*openapi.Parameter{
				{Name: "after", In: "query", Schema: str(), Description: "A cursor from a line or the `" + NextCursorHeader +
					"` header: the page starts after it. Absent: from the first event."},
				{Name: "limit", In: "query", Schema: &openapi.Schema{Type: openapi.Types{"integer"}, Minimum: openapi.Int(1),
					Maximum: openapi.Int(service.MaxAuditPage), Default: 100},
					Description: fmt.Sprintf("The most lines in the page, 1 to %d (default 100).", service.MaxAuditPage)},
			},
			replies: []reply{
				{status: 200, of: auditLineView{}, media: []string{ndjson}, headers: []header{{NextCursorHeader,
					"The cursor the next page starts after."}}, doc: "One AuditLine per line."},
				{status: 400},
				{status: 403},
			},
		},
		"GET /api/runs": {
			id: "listRunsInFlight", tags: []string{"operations"}, summary: "The runs in flight",
			doc: "The runs admitted, running or paused, oldest first, with their agent's name and owner, who " +
				"triggered them and the tokens they have used so far. An admin sees every one; anyone else " +
				"the runs of the agents whose runs they may view (as on each agent's own list). A run leaves " +
				"the list when it ends.",
			query: []*openapi.Parameter{
				{Name: "status", In: "query", Required: true, Schema: &openapi.Schema{Type: openapi.Types{"string"}, Enum: openapi.Enum("active")}},
			},
			replies: []reply{
				{status: 200, of: list[runInFlightView]{}, doc: "The runs in flight."},
				{status: 400},
			},
		},
		"GET /api/admin/budgets": {
			id: "listBudgets", tags: []string{"operations"}, summary: "Every agent's budget and its open reservations",
			doc: "Admin only (403 otherwise). Each agent's budget (`tokens`, `used`, `reserved`, `left`) with its " +
				"owner and how many reservations are open: model calls in flight, or calls a stopped server " +
				"left behind, which the next start settles at their ceiling. By agent name.",
			replies: []reply{
				{status: 200, of: list[agentBudgetView]{}, doc: "Every agent's budget."},
				{status: 400},
				{status: 403},
			},
		},
	}
}

// opsComponents are the schemas of opsOperations' answers.
func opsComponents() []openapi.Component {
	return []openapi.Component{
		{Name: "UsageCount", Of: usageCountView{}, Doc: "What some model calls spent.",
			Fields: map[string]openapi.Schema{
				"tokens":        {Description: "`input` (prompt), `output` (completion) and `total` tokens, as the settlements metered them."},
				"tokens.input":  {Minimum: openapi.Int(0)},
				"tokens.output": {Minimum: openapi.Int(0)},
				"tokens.total":  {Minimum: openapi.Int(0)},
				"calls":         {Minimum: openapi.Int(0), Description: "The model calls that spent tokens."},
				"runs":          {Minimum: openapi.Int(0), Description: "The distinct runs those calls belong to; calls outside any run (document embeddings) count none."},
			},
		},
		{Name: "UsageDay", Of: usageDayView{}, Doc: "A group's usage on one UTC day.",
			Fields: map[string]openapi.Schema{
				"day": {Format: "date", Description: "The UTC day, `YYYY-MM-DD`."},
			},
		},
		{Name: "UsageGroup", Of: usageGroupView{}, Doc: "One group's usage over the span (runs counted once however many days they span), and day by day.",
			Fields: map[string]openapi.Schema{
				"key": {Description: "The agent's or the person's id, or the model's name. An empty `key` under `user` is the calls " +
					"of runs whose account is gone."},
				"name": {Description: "The agent's name or the person's display name as they are now; empty for a model and for an " +
					"agent or account that no longer exists (its usage stays)."},
				"days": {Description: "The days with usage, oldest first."},
			},
		},
		{Name: "Usage", Of: usageView{}, Doc: "Usage summed per group, most tokens first.",
			Fields: map[string]openapi.Schema{
				"group_by": {Enum: openapi.Enum(corral.UsageGroups...)},
				"scope":    {Enum: openapi.Enum("all", "own"), Description: "`all`: every agent's (an admin); `own`: the agents the caller owns."},
				"since":    {Format: "date-time", Description: "The span's start as understood; null when unbounded."},
				"until":    {Format: "date-time", Description: "The span's end (excluded); null when unbounded."},
			},
		},
		{Name: "AuditTraceEvent", Of: auditTraceView{}, Doc: "A trace event in the audit log.",
			Fields: map[string]openapi.Schema{
				"chain": {Description: "The chain it belongs to: a run's id, or an agent's id for the agent's own chain (its repository's events)."},
			},
		},
		{Name: "AccountEvent", Of: accountEventView{}, Doc: "Something that happened to accounts or access, recorded in the " +
			"same transaction as the change. Ids and levels only.",
			Fields: map[string]openapi.Schema{
				"at":       {Format: "date-time"},
				"type":     {Enum: openapi.Enum(corral.AccountEventTypes...)},
				"actor_id": {Description: "The account that did it; null for the command line (`corral user`)."},
				"user_id":  {Description: "The account it was done to or for: the new, disabled or enabled account, the grantee."},
				"agent_id": {Description: "The agent concerned: grants, links, agent secrets."},
				"object": {Description: "The id of what was made or removed: a session's (login, logout), an API token's, an " +
					"invite's (also on an invite's signup), a link's, a credential's or an agent secret's."},
				"detail": {Description: "The level of a grant or link; how an account was made (`signup`, `invite`, `cli`)."},
			},
		},
		{Name: "AuditLine", Of: auditLineView{}, Doc: "One line of the audit log: exactly one of `trace` and `account`, as `kind` says.",
			Fields: map[string]openapi.Schema{
				"cursor": {Description: "This line's cursor: `after` set to it starts the next page after this line."},
				"kind":   {Enum: openapi.Enum("trace", "account")},
			},
		},
		{Name: "RunInFlight", Of: runInFlightView{}, Doc: "A run in flight with its agent's name and owner.",
			Fields: map[string]openapi.Schema{
				"agent_name": {Description: "The agent's name."},
				"owner":      {Description: "The agent's owner."},
			},
		},
		{Name: "AgentBudget", Of: agentBudgetView{}, Doc: "An agent's budget as the administrators' overview shows it.",
			Fields: map[string]openapi.Schema{
				"agent_id":          {Description: "The agent's id."},
				"agent_name":        {Description: "The agent's name."},
				"owner":             {Description: "The agent's owner."},
				"open_reservations": {Minimum: openapi.Int(0), Description: "Reservations not yet settled: calls in flight, or left by a stopped server until the next start settles them."},
			},
		},
	}
}
