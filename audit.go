package corral

import (
	"context"
	"time"
)

// The audit log: every trace event (runs' chains and agents' own) and
// every account event, in one order that a reader can page through
// without missing or repeating one while events keep being written.

// Account event types: what happened to accounts and to access.
const (
	AccountCreated         = "account_created"  // Detail: how: "signup", "invite" or "cli"
	AccountLogin           = "login"            // Object: the session's id
	AccountLogout          = "logout"           // Object: the session's id
	AccountDisabled        = "account_disabled" // User: the account
	AccountEnabled         = "account_enabled"  // User: the account
	InviteCreated          = "invite_created"   // Object: the invite's id
	TokenCreated           = "token_created"    // Object: the API token's id
	TokenDeleted           = "token_deleted"
	GrantPut               = "grant_put" // User: the grantee; Detail: the level
	GrantDeleted           = "grant_deleted"
	GrantAccepted          = "grant_accepted" // as a delegation target
	LinkCreated            = "link_created"   // Object: the link's id; Detail: its level
	LinkDeleted            = "link_deleted"
	LinkJoined             = "link_joined"
	CredentialCreated      = "credential_created" // Object: the credential's id
	CredentialDeleted      = "credential_deleted"
	CredentialRepositories = "credential_repositories" // what it may be used for changed
	SecretCreated          = "secret_created"          // Agent; Object: the secret's id
	SecretDeleted          = "secret_deleted"
)

// AccountEventTypes lists every account event type.
var AccountEventTypes = []string{AccountCreated, AccountLogin, AccountLogout, AccountDisabled, AccountEnabled,
	InviteCreated, TokenCreated, TokenDeleted, GrantPut, GrantDeleted, GrantAccepted,
	LinkCreated, LinkDeleted, LinkJoined, CredentialCreated, CredentialDeleted, CredentialRepositories,
	SecretCreated, SecretDeleted}

// AccountEvent is one thing that happened to accounts or access, recorded
// by the store in the transaction that made it happen. It holds ids and
// levels only: never a token, a hash or a secret's value.
type AccountEvent struct {
	At    time.Time
	Type  string // one of AccountEventTypes
	Actor string // the account that did it; "" for the command line
	User  string // the account it was done to or for, when not the actor alone
	Agent string // the agent concerned (grants, links, secrets)
	// Object is the id of what was made or removed: a session's, token's,
	// invite's, link's, credential's or secret's.
	Object string
	Detail string // a level, or how an account was created
}

// AuditEvent is one entry of the audit log: a trace event or an account
// event, exactly one of the two.
type AuditEvent struct {
	// Seq is the entry's place in the log: larger than that of every
	// entry committed before it, never reused.
	Seq     int64
	Trace   *TraceEvent
	Account *AccountEvent
}

// AuditStore reads the audit log.
type AuditStore interface {
	// Audit returns at most limit entries whose Seq is larger than after,
	// in order. Paging with the last Seq seen returns every entry exactly
	// once, even while entries are being written.
	Audit(ctx context.Context, after int64, limit int) ([]AuditEvent, error)
}
