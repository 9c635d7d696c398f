package corral

import (
	"context"
	"time"
)

// CodeCredential is a person's login on a code host (a token for
// https://github.com, say), as everyone but the push itself sees it: the
// secret is not a field. Not to be confused with Credential, the password
// hash login checks.
type CodeCredential struct {
	ID       string
	UserID   string // the owner: only their agents' pushes use it
	Name     string
	Host     string // a DNS name or IP address, with ":port" unless 443
	Username string
	// Repositories are the repositories it may be used for, set by its
	// owner: patterns of host/path (see service.RepositoryPattern). It is
	// sent for no other URL, by anyone. None: it is used for nothing.
	Repositories []string
	CreatedAt    time.Time
}

// SealedCredential is a CodeCredential with its secret, encrypted to its
// row (internal/secrets): only the one method a push uses returns it.
type SealedCredential struct {
	CodeCredential
	Sealed []byte
}

// CredentialStore keeps code-host credentials. The secret is stored sealed;
// the store never sees it in the clear.
type CredentialStore interface {
	// CreateCodeCredential stores c with its sealed secret: ECONFLICT when
	// the user already has a credential of that name, ENOTFOUND when the
	// user does not exist.
	CreateCodeCredential(ctx context.Context, c CodeCredential, sealed []byte) error
	// CodeCredentials lists userID's credentials, newest first, without
	// their secrets.
	CodeCredentials(ctx context.Context, userID string) ([]CodeCredential, error)
	// DeleteCodeCredential deletes a credential of userID: ENOTFOUND when
	// userID has none with that id (another user's included).
	DeleteCodeCredential(ctx context.Context, userID, id string) error
	// SetCredentialRepositories replaces the repositories a credential of
	// userID may be used for: ENOTFOUND when userID has none with that id.
	SetCredentialRepositories(ctx context.Context, userID, id string, repositories []string) (CodeCredential, error)
	// CredentialForAgent returns the credential a clone or push of the
	// agent uses for host: credentialID, which must be one of the agent's
	// owner's (found from the agent row, never from whoever asks) and for
	// host. ENOTFOUND when there is none.
	CredentialForAgent(ctx context.Context, agentID, credentialID, host string) (SealedCredential, error)
}

// SealedSecret is an agent's Secret with its value, encrypted to its row.
type SealedSecret struct {
	Secret
	Sealed []byte
}

// SecretStore keeps agents' secrets (see Secret). The value is stored
// sealed; the store never sees it in the clear.
type SecretStore interface {
	// CreateSecret stores s with its sealed value: ECONFLICT when the
	// agent already has a secret of that name, ENOTFOUND when the agent
	// does not exist.
	// by is the account that adds it.
	CreateSecret(ctx context.Context, s Secret, sealed []byte, by string) error
	// Secrets lists an agent's secrets, oldest first, without values.
	Secrets(ctx context.Context, agentID string) ([]Secret, error)
	// SealedSecrets lists an agent's secrets with their sealed values:
	// for the egress proxy alone.
	SealedSecrets(ctx context.Context, agentID string) ([]SealedSecret, error)
	// DeleteSecret deletes a secret of the agent, as by: ENOTFOUND when
	// the agent has none with that id.
	DeleteSecret(ctx context.Context, agentID, id, by string) error
}

// EgressGrant is what one run may reach at one moment: its agent's
// allow-list with the presets expanded, and the headers the egress proxy
// adds for its secrets. Headers hold secret values: built for one
// connection, never logged, never kept.
type EgressGrant struct {
	Rules   []EgressRule
	Headers []EgressHeader
}

// EgressHeader is a secret as the proxy sends it: Name: Value on requests
// to Host.
type EgressHeader struct {
	Host, Name, Value string
}
