package corral

import (
	"context"
	"time"
)

// The storage interfaces. Each is small and named for the use case it
// serves; internal/store implements all of them, and a PostgreSQL
// store will implement the same set. Unless a method says otherwise, a
// missing row is reported as an *Error with code ENOTFOUND and a uniqueness
// violation as ECONFLICT. A change to accounts or access is recorded as an
// AccountEvent in the same transaction (see AuditStore): the methods that
// cannot tell who made it from their other arguments take it as by.

// UserStore keeps accounts.
type UserStore interface {
	// CreateUser stores a new account. The first account ever created is an
	// admin; the decision is made atomically with the insert. ECONFLICT when
	// the email is taken.
	CreateUser(ctx context.Context, u NewUser) (User, error)
	UserByID(ctx context.Context, id string) (User, error)
	UserByEmail(ctx context.Context, email string) (User, error)
	Users(ctx context.Context) ([]User, error)
	// Credential returns what login needs for an email.
	Credential(ctx context.Context, email string) (Credential, error)
	// SetDisabled disables or enables an account, as by (an account's id;
	// "" for the command line). Disabling also deletes every session of
	// the account in the same transaction.
	SetDisabled(ctx context.Context, id string, disabled bool, by string) error
}

// SessionStore keeps browser sessions by the hash of their token.
type SessionStore interface {
	CreateSession(ctx context.Context, s Session) error
	// SessionUser returns the account of a live session: ENOTFOUND when the
	// session is unknown, expired at now, or its account is disabled.
	SessionUser(ctx context.Context, tokenHash []byte, now time.Time) (User, error)
	// DeleteSession deletes a session: ENOTFOUND when there is none.
	DeleteSession(ctx context.Context, tokenHash []byte) error
	// DeleteExpiredSessions removes sessions that expired at or before now.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error)
}

// TokenStore keeps personal API tokens by the hash of their secret.
type TokenStore interface {
	CreateToken(ctx context.Context, t APIToken, hash []byte) error
	// TokenUser returns the account a token belongs to and records its use:
	// ENOTFOUND when the token is unknown or the account disabled.
	TokenUser(ctx context.Context, hash []byte, now time.Time) (User, error)
	Tokens(ctx context.Context, userID string) ([]APIToken, error)
	// DeleteToken deletes a token of userID; ENOTFOUND when userID has none
	// with that id.
	DeleteToken(ctx context.Context, userID, id string) error
}

// InviteStore keeps single-use signup invitations by the hash of their token.
type InviteStore interface {
	CreateInvite(ctx context.Context, inv Invite, hash []byte) error
	// CreateUserWithInvite consumes a live invite and creates the account in
	// one transaction: ENOTFOUND when the invite is unknown, used or expired.
	CreateUserWithInvite(ctx context.Context, hash []byte, now time.Time, u NewUser) (User, error)
}

// AgentStore keeps agents. Reads take the id of the user asking and fill
// Agent.Access from grants and links in the same query, so access is never
// cached between requests.
type AgentStore interface {
	CreateAgent(ctx context.Context, a Agent) error
	// CreateAgentFrom stores a new agent whose budget (a.Budget.Tokens,
	// more than 0) is carved out of parentID's: in one transaction, the
	// parent's budget.used grows by it, only when what the parent has
	// left holds it (EADMISSION otherwise). A parent with an unlimited
	// budget gives without carving.
	CreateAgentFrom(ctx context.Context, a Agent, parentID string) error
	// Agent returns an agent with userID's access. An agent userID has no
	// access to is returned with Access LevelNone: the caller decides.
	Agent(ctx context.Context, id, userID string) (Agent, error)
	// AgentsFor lists the agents userID has any access to, newest first.
	AgentsFor(ctx context.Context, userID string) ([]Agent, error)
	// UpdateAgent writes every setting of a. Budget.Used and State are
	// not settings: only metering changes the first, and only
	// RunStore.SetAgentState the second, so an edit made from an old read
	// never undoes a pause or quarantine.
	UpdateAgent(ctx context.Context, a Agent) error
	// DeleteAgent deletes an agent and everything it owns but its traces:
	// ECONFLICT while one of its runs is active.
	DeleteAgent(ctx context.Context, id string) error
}

// ShareStore keeps grants and share links.
type ShareStore interface {
	// PutGrant creates or changes userID's level on an agent, as by.
	PutGrant(ctx context.Context, agentID, userID string, level Level, now time.Time, by string) error
	// DeleteGrant removes userID's grant on an agent, as by.
	DeleteGrant(ctx context.Context, agentID, userID, by string) error
	// AcceptGrant records that userID accepted their grant on the agent
	// as a delegation target; accepting twice is fine. ENOTFOUND when
	// userID has no grant on it.
	AcceptGrant(ctx context.Context, agentID, userID string) error
	Grants(ctx context.Context, agentID string) ([]Grant, error)

	CreateLink(ctx context.Context, l Link, hash []byte) error
	// DeleteLink deletes a link of the agent, as by, and, with it, the
	// access of everyone who joined through it.
	DeleteLink(ctx context.Context, agentID, linkID, by string) error
	LinkByHash(ctx context.Context, hash []byte) (Link, error)
	// Links lists an agent's share links, oldest first.
	Links(ctx context.Context, agentID string) ([]Link, error)
	// JoinLink records that userID accepted the link; joining twice is fine.
	JoinLink(ctx context.Context, linkID, userID string, now time.Time) error
}

// MessageStore keeps agents' threads.
type MessageStore interface {
	AddMessage(ctx context.Context, m Message) error
	// Messages returns up to limit messages of an agent, oldest first,
	// written before the message with id before ("" for the newest).
	Messages(ctx context.Context, agentID, before string, limit int) ([]Message, error)
}

// ChangeStore keeps change sets and their entries.
type ChangeStore interface {
	CreateChangeSet(ctx context.Context, cs ChangeSet) error
	// ChangeSet returns a change set with its entries.
	ChangeSet(ctx context.Context, id string) (ChangeSet, error)
	// ChangeSets lists an agent's change sets, newest first, with entries.
	ChangeSets(ctx context.Context, agentID string) ([]ChangeSet, error)
	// UpdateChangeSet writes the status, the decision and every entry's
	// state of cs, but only if the stored status is still from and each
	// entry is pending or already in the state cs gives it: a decision made
	// concurrently by someone else makes this an ECONFLICT, never a lost
	// update. ChangeSet returns entries with their Diff; lists without.
	UpdateChangeSet(ctx context.Context, cs ChangeSet, from ChangeStatus) error
	// PendingChangeSets lists the change sets still waiting, oldest first.
	PendingChangeSets(ctx context.Context) ([]ChangeSet, error)
}
