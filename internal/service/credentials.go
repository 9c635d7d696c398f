package service

import (
	"bytes"
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"corral"
	"corral/internal/sanitize"
	"corral/internal/secrets"
)

// Limits of a code-host credential's fields.
const (
	maxCredentialUsername = 256
	maxCredentialSecret   = 4096
)

// Credentials keeps people's code-host credentials, sealed at rest with
// the server's secret key. The secret is answered to nobody: it is opened
// only inside WithSecret, for the one call that talks to the code host.
//
// Credentials holds no secret of its own beyond the key's AEAD: no cache,
// no field that ever holds an opened secret.
type Credentials struct {
	store corral.CredentialStore
	key   *secrets.Key
	cfg   Config
}

// NewCredentials returns the credentials use cases sealing with key.
func NewCredentials(store corral.CredentialStore, key *secrets.Key, cfg Config) *Credentials {
	cfg.defaults()
	return &Credentials{store: store, key: key, cfg: cfg}
}

// credentialAD binds a sealed secret to its row: its id, its owner and the
// host it may be sent to. A sealed value copied to another row, another
// user, or rewritten to point at another host (by someone who can write
// the database but has not the key) no longer opens.
func credentialAD(c corral.CodeCredential) []byte {
	return secrets.AD("corral code credential v1", c.ID, c.UserID, c.Host)
}

// Create stores a credential of the actor, to be used for the
// repositories named (RepositoryPatterns) and no other. Any signed-in user
// may keep credentials; only their own agents' clones and pushes use them.
func (s *Credentials) Create(ctx context.Context, actor corral.User, name, host, username, secret string, repositories []string) (corral.CodeCredential, error) {
	if actor.ID == "" {
		return corral.CodeCredential{}, corral.Errorf(corral.EUNAUTH, "sign in first")
	}
	name, err := sanitize.Name(name)
	if err != nil {
		return corral.CodeCredential{}, err
	}
	if host, err = sanitize.Host(host); err != nil {
		return corral.CodeCredential{}, err
	}
	if err := checkCredentialUsername(username); err != nil {
		return corral.CodeCredential{}, err
	}
	if err := checkCredentialSecret(secret); err != nil {
		return corral.CodeCredential{}, err
	}
	repos, err := RepositoryPatterns(repositories, host)
	if err != nil {
		return corral.CodeCredential{}, err
	}
	c := corral.CodeCredential{ID: corral.NewID("crd"), UserID: actor.ID, Name: name, Host: host,
		Username: username, Repositories: repos, CreatedAt: s.cfg.Now().UTC()}
	plain := []byte(secret)
	sealed := s.key.Seal(plain, credentialAD(c))
	clear(plain)
	if err := s.store.CreateCodeCredential(ctx, c, sealed); err != nil {
		return corral.CodeCredential{}, err
	}
	return c, nil
}

// List returns the actor's own credentials, without secrets.
func (s *Credentials) List(ctx context.Context, actor corral.User) ([]corral.CodeCredential, error) {
	if actor.ID == "" {
		return nil, corral.Errorf(corral.EUNAUTH, "sign in first")
	}
	return s.store.CodeCredentials(ctx, actor.ID)
}

// SetRepositories replaces the repositories one of the actor's
// credentials may be used for: another user's answers like a missing one.
func (s *Credentials) SetRepositories(ctx context.Context, actor corral.User, id string, repositories []string) (corral.CodeCredential, error) {
	if actor.ID == "" {
		return corral.CodeCredential{}, corral.Errorf(corral.EUNAUTH, "sign in first")
	}
	mine, err := s.store.CodeCredentials(ctx, actor.ID)
	if err != nil {
		return corral.CodeCredential{}, err
	}
	for _, c := range mine {
		if c.ID == id {
			repos, err := RepositoryPatterns(repositories, c.Host)
			if err != nil {
				return corral.CodeCredential{}, err
			}
			return s.store.SetCredentialRepositories(ctx, actor.ID, id, repos)
		}
	}
	return corral.CodeCredential{}, corral.NotFound("credential")
}

// Delete deletes one of the actor's credentials: another user's answers
// like a missing one.
func (s *Credentials) Delete(ctx context.Context, actor corral.User, id string) error {
	if actor.ID == "" {
		return corral.Errorf(corral.EUNAUTH, "sign in first")
	}
	return s.store.DeleteCodeCredential(ctx, actor.ID, id)
}

// WithSecret opens credential credentialID of the agent's owner for a
// clone of or a push to the repository at repoURL, and calls fn with it.
// The credential is the owner's, found from the agent (see
// corral.CredentialStore.CredentialForAgent), and must be for the URL's
// host and allow the repository (its Repositories): EFORBIDDEN otherwise,
// whoever asks, the owner included.
//
// The caller must have checked the actor's access to the agent first:
// WithSecret decides whose credential, and for what, not who may push.
//
// secret is valid only during fn, which must not keep it (nor anything
// that aliases it): it is zeroed when fn returns. An error of fn that
// repeats the secret is replaced, so no log line or answer can carry it.
func (s *Credentials) WithSecret(ctx context.Context, agentID, credentialID, repoURL string, fn func(username string, secret []byte) error) error {
	u, err := sanitize.RepositoryURL(repoURL)
	if err != nil {
		return err
	}
	h, err := sanitize.Host(u.Host)
	if err != nil {
		return err
	}
	c, err := s.store.CredentialForAgent(ctx, agentID, credentialID, h)
	if corral.ErrorCode(err) == corral.ENOTFOUND {
		return corral.Errorf(corral.ENOTFOUND, "the agent's owner has no such credential for %s", h)
	}
	if err != nil {
		return err
	}
	if !allows(c.CodeCredential, repoURL) {
		s.cfg.Log.WarnContext(ctx, "a credential refused for a repository it does not name",
			"credential", c.ID, "agent", agentID, "host", h)
		return corral.Errorf(corral.EFORBIDDEN, "credential %s may not be used for %s: it is for %s; its owner can add the repository (PATCH /api/credentials/%s)",
			c.Name, u.Redacted(), repositoriesOf(c.CodeCredential), c.ID)
	}
	secret, err := s.key.Open(c.Sealed, credentialAD(c.CodeCredential))
	if err != nil {
		// Never a crash and never a guess: a key that changed (a new
		// secret.key, another CORRAL_SECRET_KEY) or a row altered in the
		// database. The log names the row, never a byte of it.
		s.cfg.Log.WarnContext(ctx, "a stored credential does not open with the server's secret key",
			"credential", c.ID, "agent", agentID)
		return &corral.Error{Code: corral.EUNAVAIL, Op: "service.WithSecret", Err: err,
			Message: "credential " + c.Name + " cannot be opened with this server's secret key (was the key changed?): restore the key, or have the owner delete the credential and add it again"}
	}
	defer clear(secret)
	err = fn(c.Username, secret)
	if err != nil && len(secret) > 0 && bytes.Contains([]byte(err.Error()), secret) {
		// A tool that echoed its input (a URL with the password, a
		// verbose HTTP trace): the whole chain is dropped, not scrubbed,
		// since a scrubbed copy could still hold an encoding of it.
		return &corral.Error{Code: corral.EUNAVAIL, Op: "service.WithSecret",
			Message: "the code host operation failed (its error repeated the credential, so it is not shown)"}
	}
	return err
}

// repositoriesOf says what a credential may be used for, for an error.
func repositoriesOf(c corral.CodeCredential) string {
	if len(c.Repositories) == 0 {
		return "no repository yet"
	}
	return strings.Join(c.Repositories, ", ")
}

func checkCredentialUsername(u string) error {
	switch {
	case u == "":
		return corral.Errorf(corral.EINVALID, "username must not be empty")
	case len(u) > maxCredentialUsername:
		return corral.Errorf(corral.EINVALID, "username is longer than %d bytes", maxCredentialUsername)
	case !utf8.ValidString(u):
		return corral.Errorf(corral.EINVALID, "username is not valid UTF-8")
	case strings.Contains(u, ":"):
		// HTTP basic authentication ends the user name at the first colon.
		return corral.Errorf(corral.EINVALID, "username must not contain a colon")
	}
	for _, r := range u {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return corral.Errorf(corral.EINVALID, "username must be printable characters only (no spaces, control or invisible characters)")
		}
	}
	return nil
}

// checkCredentialSecret checks a secret without ever repeating it. NUL, CR
// and LF are refused: git's credential protocol is line based, so a line
// break inside a secret could smuggle in another field (a host, say).
func checkCredentialSecret(s string) error {
	switch {
	case s == "":
		return corral.Errorf(corral.EINVALID, "secret must not be empty")
	case len(s) > maxCredentialSecret:
		return corral.Errorf(corral.ETOOLARGE, "secret is longer than %d bytes", maxCredentialSecret)
	case strings.ContainsAny(s, "\x00\r\n"):
		return corral.Errorf(corral.EINVALID, "secret must not contain a NUL or a line break")
	}
	return nil
}
