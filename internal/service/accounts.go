package service

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"corral"
	"corral/internal/auth"
	"corral/internal/keylock"
	"corral/internal/sanitize"
)

// Token prefixes, so a leaked secret is recognisable by scanners.
const (
	prefixSession = "cs"
	prefixToken   = "cat"
	prefixLink    = "csl"
	prefixInvite  = "cin"
)

// AccountStore is what the accounts use cases need from storage.
type AccountStore interface {
	corral.UserStore
	corral.SessionStore
	corral.TokenStore
	corral.InviteStore
	// HasUsers reports whether any account exists.
	HasUsers(ctx context.Context) (bool, error)
}

// Accounts is signup, login, sessions, API tokens and account
// administration.
type Accounts struct {
	store AccountStore
	// throttle refuses logins per account (from every address) and per
	// address and account; spray slows, and never refuses, an address's
	// failures across accounts. See Login.
	throttle *auth.Throttle
	spray    *auth.Throttle
	params   auth.Params
	signups  *auth.Throttle // per client address: every attempt counts
	slots    chan struct{}
	logins   keylock.Map // per account: one login checked at a time
	hot      gates       // per address, only while spray holds it
	// sleep waits for d or until ctx ends; tests replace it.
	sleep func(ctx context.Context, d time.Duration)
	cfg   Config
}

// The address-wide bound (see Login). sprayFree failures in a row from an
// address, with no success between, or sprayHourly in an hour, make it
// hot for a while; each failure from a hot address then holds the
// address's turn for sprayHold.
const (
	sprayFree   = 20
	sprayHourly = 300
	sprayHold   = time.Second
)

// recordTimeout bounds how long a login waits to record its outcome in
// the throttles, which it does even after its client has gone.
const recordTimeout = 30 * time.Second

// NewAccounts returns the accounts use cases. params are the password
// hashing parameters; cfg.ThrottleState keeps the throttles' records.
func NewAccounts(store AccountStore, params auth.Params, cfg Config) (*Accounts, error) {
	cfg.defaults()
	switch cfg.Signup {
	case SignupOpen, SignupInvite, SignupClosed:
	default:
		return nil, corral.Errorf(corral.EINVALID, "unknown signup mode %q: want open, invite or closed", cfg.Signup)
	}
	state := func(name string) auth.ThrottleState {
		if cfg.ThrottleState == nil {
			return nil // the throttle's own memory
		}
		return cfg.ThrottleState(name)
	}
	clock := cfg.Now
	if cfg.ThrottleState != nil && cfg.ThrottleClock != nil {
		clock = cfg.ThrottleClock
	}
	return &Accounts{
		store: store, params: params,
		throttle: auth.NewThrottle(auth.ThrottleConfig{Now: clock, State: state("login")}),
		// A hot address stays hot from a minute up to an hour, doubling
		// with each failure past the streak, or until its hourly count
		// falls back under the cap.
		spray: auth.NewThrottle(auth.ThrottleConfig{Now: clock, FreeFailures: sprayFree,
			BaseDelay: time.Minute, MaxDelay: time.Hour, HourlyCap: sprayHourly, State: state("spray")}),
		// Signups are counted like failures: a burst from one address is
		// free, a flood slows down and stops at the hourly cap.
		signups: auth.NewThrottle(auth.ThrottleConfig{Now: clock, FreeFailures: 20, HourlyCap: 100, State: state("signup")}),
		slots:   make(chan struct{}, cfg.HashSlots),
		sleep:   sleep,
		cfg:     cfg,
	}, nil
}

// errThrottleState is the answer to a login or signup whose throttle's
// records cannot be read or written (the store away): it is refused,
// whatever its password, since it could not be counted.
func errThrottleState(err error) error {
	return &corral.Error{Code: corral.EUNAVAIL, Message: "the server cannot check sign-ins right now: try again later", Err: err}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// addrKey is the unit of client the throttles count: an IPv4 address, or
// an IPv6 /64, the block one subscriber usually holds (counting single
// IPv6 addresses would give each attacker 2^64 fresh keys).
func addrKey(client netip.Addr) string {
	client = client.Unmap()
	if client.Is6() {
		p, _ := client.Prefix(64) // cannot fail for a valid IPv6 address
		return "addr:" + p.String()
	}
	return "addr:" + client.String()
}

// Setup is what a browser needs to know before anyone signs in.
type Setup struct {
	// FirstRun: no account exists yet, so the next one made (by signup
	// or on the command line) administers the server.
	FirstRun bool
	Signup   string // the signup mode: open, invite or closed
}

// Setup answers whether the server is brand new and how people sign up.
// It needs no sign-in and says nothing else: no count, no address.
func (s *Accounts) Setup(ctx context.Context) (Setup, error) {
	exists, err := s.store.HasUsers(ctx)
	if err != nil {
		return Setup{}, err
	}
	return Setup{FirstRun: !exists, Signup: s.cfg.Signup}, nil
}

// SignupInput is what a person gives to create an account.
type SignupInput struct {
	Email, Name, Password string
	Invite                string // required when the signup mode is invite
}

// Signup creates an account and signs it in. It returns the account and a
// session token. client is the caller's address: signups are throttled per
// address, since each one costs a password hash and a row.
func (s *Accounts) Signup(ctx context.Context, in SignupInput, client netip.Addr) (corral.User, string, error) {
	if s.cfg.Signup == SignupClosed {
		return corral.User{}, "", corral.Errorf(corral.EFORBIDDEN, "signup is closed on this server: ask an administrator for an account")
	}
	if s.cfg.Signup == SignupInvite && !auth.WellFormed(prefixInvite, in.Invite) {
		return corral.User{}, "", corral.Errorf(corral.EFORBIDDEN, "signup needs a valid invite on this server")
	}
	key := addrKey(client)
	wait, ok, err := s.signups.Allow(ctx, key)
	if err != nil {
		return corral.User{}, "", errThrottleState(err)
	}
	if !ok {
		return corral.User{}, "", &corral.Error{Code: corral.ETHROTTLED, Message: "too many signups from your address: try again later", RetryAfter: wait}
	}
	if err := s.signups.Fail(ctx, key); err != nil {
		return corral.User{}, "", errThrottleState(err)
	}
	nu, err := s.newUser(ctx, in.Email, in.Name, in.Password, false)
	if err != nil {
		return corral.User{}, "", err
	}
	var u corral.User
	if s.cfg.Signup == SignupInvite {
		u, err = s.store.CreateUserWithInvite(ctx, auth.HashToken(in.Invite), s.cfg.Now(), nu)
		if corral.ErrorCode(err) == corral.ENOTFOUND {
			return corral.User{}, "", corral.Errorf(corral.EFORBIDDEN, "signup needs a valid invite on this server")
		}
	} else {
		u, err = s.store.CreateUser(ctx, nu)
	}
	if err != nil {
		return corral.User{}, "", err
	}
	s.cfg.Log.Info("account created", "user", u.ID, "admin", u.Admin, "via", "signup")
	token, err := s.startSession(ctx, u.ID)
	return u, token, err
}

// CreateUser creates an account without signing it in, for the command
// line: it ignores the signup mode, because whoever runs it already holds
// the server's data directory.
func (s *Accounts) CreateUser(ctx context.Context, email, name, password string, admin bool) (corral.User, error) {
	nu, err := s.newUser(ctx, email, name, password, admin)
	if err != nil {
		return corral.User{}, err
	}
	nu.Origin = "cli"
	u, err := s.store.CreateUser(ctx, nu)
	if err == nil {
		s.cfg.Log.Info("account created", "user", u.ID, "admin", u.Admin, "via", "cli")
	}
	return u, err
}

func (s *Accounts) newUser(ctx context.Context, email, name, password string, admin bool) (corral.NewUser, error) {
	email, err := sanitize.Email(email)
	if err != nil {
		return corral.NewUser{}, err
	}
	name, err = sanitize.DisplayName(name)
	if err != nil {
		return corral.NewUser{}, err
	}
	if err := sanitize.Password(password); err != nil {
		return corral.NewUser{}, err
	}
	hash, err := s.hash(ctx, password)
	if err != nil {
		return corral.NewUser{}, err
	}
	return corral.NewUser{Email: email, Name: name, PasswordHash: hash, Admin: admin}, nil
}

// errBadLogin is the one answer for an unknown email, a wrong password and a
// disabled account, so a login reveals nothing about which accounts exist.
func errBadLogin() error {
	return corral.Errorf(corral.EUNAUTH, "wrong email or password")
}

// Login checks a password and starts a session. client is the caller's
// address.
//
// Three records decide, all of failures only:
//
//   - per account, from every address: its failures lock the account for
//     everyone, the right password included, with a backoff and an
//     hourly cap (see auth.Throttle). This is the bound on guessing one
//     account's password, however many addresses the guesser has; its
//     cost is that an attacker can keep the owner out for as long as the
//     attack lasts.
//   - per address and account: an address's failures on an account lock
//     that address out of that account, with the same rules, and the
//     owner's successful login elsewhere does not lift it. Failures on
//     other accounts never count here, so many people behind one address
//     (a proxy, a NAT) do not lock each other out.
//   - per address, across accounts (spray): an address that fails
//     sprayFree times in a row, or sprayHourly times in an hour, is hot.
//     A hot address is never refused; its logins are checked one at a
//     time, and each of its failures holds its turn for sprayHold, so it
//     tries at most about one password a second and cannot fill every
//     hashing slot. A correct password from a hot address still gets in,
//     after the logins queued ahead of it; a client that leaves the queue
//     gives up unchecked.
//
// An address is an IPv4 address or an IPv6 /64 (see addrKey). Logins on
// one account are checked one at a time, so attempts sent at
// once are counted in order and the hourly caps hold. Unknown and
// malformed emails are counted exactly like known ones.
//
// A login whose records cannot be read or written (the throttles' state
// in a store that is away) is refused with EUNAVAIL, the right password
// too: nothing is checked that is not counted.
func (s *Accounts) Login(ctx context.Context, email, password string, client netip.Addr) (corral.User, string, error) {
	norm, err := sanitize.Email(email)
	if err != nil {
		// A malformed email is no account: same answer, same throttling,
		// under one shared key so junk cannot grow the throttle's memory.
		norm = "(malformed)"
	}
	addr := addrKey(client)
	_, calm, err := s.spray.Allow(ctx, addr)
	if err != nil {
		return corral.User{}, "", errThrottleState(err)
	}
	if calm {
		return s.login(ctx, norm, password, addr)
	}
	leave, err := s.hot.enter(ctx, addr)
	if err != nil {
		return corral.User{}, "", &corral.Error{Code: corral.EUNAVAIL, Message: "the server is busy: try again", Err: err}
	}
	defer leave() // after the hold below
	u, token, err := s.login(ctx, norm, password, addr)
	if corral.ErrorCode(err) == corral.EUNAUTH {
		// The hold outlasts the request: a client that hangs up once it
		// has waited long enough to know the answer (a success comes at
		// once) must not cut the address's turn short.
		s.sleep(context.WithoutCancel(ctx), sprayHold)
	}
	return u, token, err
}

// login is Login under the account's lock.
func (s *Accounts) login(ctx context.Context, norm, password, addr string) (corral.User, string, error) {
	keys := []string{"acct:" + norm, addr + " acct:" + norm}
	defer s.logins.Lock(keys[0])()
	wait, allowed, err := s.throttle.Allow(ctx, keys...)
	if err != nil {
		return corral.User{}, "", errThrottleState(err)
	}
	if !allowed {
		return corral.User{}, "", &corral.Error{Code: corral.ETHROTTLED, Message: "too many failed logins: try again later", RetryAfter: wait}
	}
	// No stored password is longer than sanitize.Password allows; a longer
	// one is wrong, and is never hashed whole.
	tooLong := len(password) > 1024
	if tooLong {
		password = password[:1024]
	}
	cred, err := s.store.Credential(ctx, norm)
	if err != nil && corral.ErrorCode(err) != corral.ENOTFOUND {
		return corral.User{}, "", err
	}
	ok := false
	if err == nil {
		ok, err = s.verify(ctx, password, cred.PasswordHash)
		if err != nil {
			return corral.User{}, "", err
		}
	} else if err := s.dummyVerify(ctx, password); err != nil {
		return corral.User{}, "", err
	}
	// The records outlast the request: a client that hangs up once its
	// password is checked must not leave its failure uncounted.
	record, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if !ok || tooLong || cred.Disabled {
		if err := errors.Join(s.throttle.Fail(record, keys...), s.spray.Fail(record, addr)); err != nil {
			return corral.User{}, "", errThrottleState(err)
		}
		return corral.User{}, "", errBadLogin()
	}
	if err := errors.Join(s.throttle.Succeed(record, keys...), s.spray.Succeed(record, addr)); err != nil {
		return corral.User{}, "", errThrottleState(err)
	}
	u, err := s.store.UserByID(ctx, cred.UserID)
	if err != nil {
		return corral.User{}, "", err
	}
	token, err := s.startSession(ctx, u.ID)
	return u, token, err
}

func (s *Accounts) startSession(ctx context.Context, userID string) (string, error) {
	token, hash := auth.NewToken(prefixSession)
	now := s.cfg.Now().UTC()
	err := s.store.CreateSession(ctx, corral.Session{
		ID: corral.NewID("ses"), UserID: userID, TokenHash: hash,
		CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL),
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// SessionTTL reports how long a new session lives, for the cookie.
func (s *Accounts) SessionTTL() int { return int(s.cfg.SessionTTL.Seconds()) }

// Logout revokes a session server-side. An unknown token is not an error:
// the caller is signed out either way.
func (s *Accounts) Logout(ctx context.Context, token string) error {
	if !auth.WellFormed(prefixSession, token) {
		return nil
	}
	err := s.store.DeleteSession(ctx, auth.HashToken(token))
	if corral.ErrorCode(err) == corral.ENOTFOUND {
		return nil
	}
	return err
}

func errUnauthenticated() error {
	return corral.Errorf(corral.EUNAUTH, "sign in first")
}

// SessionUser returns the account of a live session token.
func (s *Accounts) SessionUser(ctx context.Context, token string) (corral.User, error) {
	if !auth.WellFormed(prefixSession, token) {
		return corral.User{}, errUnauthenticated()
	}
	u, err := s.store.SessionUser(ctx, auth.HashToken(token), s.cfg.Now())
	if corral.ErrorCode(err) == corral.ENOTFOUND {
		return corral.User{}, errUnauthenticated()
	}
	return u, err
}

// TokenUser returns the account of a personal API token.
func (s *Accounts) TokenUser(ctx context.Context, token string) (corral.User, error) {
	if !auth.WellFormed(prefixToken, token) {
		return corral.User{}, errUnauthenticated()
	}
	u, err := s.store.TokenUser(ctx, auth.HashToken(token), s.cfg.Now())
	if corral.ErrorCode(err) == corral.ENOTFOUND {
		return corral.User{}, errUnauthenticated()
	}
	return u, err
}

// CreateToken makes a personal API token for the actor. The secret is
// returned once and only its hash is kept.
func (s *Accounts) CreateToken(ctx context.Context, actor corral.User, name string) (corral.APIToken, string, error) {
	name, err := sanitize.Name(name)
	if err != nil {
		return corral.APIToken{}, "", err
	}
	secret, hash := auth.NewToken(prefixToken)
	t := corral.APIToken{ID: corral.NewID("tok"), UserID: actor.ID, Name: name, CreatedAt: s.cfg.Now().UTC()}
	if err := s.store.CreateToken(ctx, t, hash); err != nil {
		return corral.APIToken{}, "", err
	}
	return t, secret, nil
}

// Tokens lists the actor's API tokens (never their secrets).
func (s *Accounts) Tokens(ctx context.Context, actor corral.User) ([]corral.APIToken, error) {
	return s.store.Tokens(ctx, actor.ID)
}

// DeleteToken revokes one of the actor's API tokens.
func (s *Accounts) DeleteToken(ctx context.Context, actor corral.User, id string) error {
	return s.store.DeleteToken(ctx, actor.ID, id)
}

func requireAdmin(actor corral.User) error {
	if !actor.Admin {
		return corral.Errorf(corral.EFORBIDDEN, "only an administrator can do this")
	}
	return nil
}

// CreateInvite makes a single-use signup invite (admins only).
func (s *Accounts) CreateInvite(ctx context.Context, actor corral.User) (corral.Invite, string, error) {
	if err := requireAdmin(actor); err != nil {
		return corral.Invite{}, "", err
	}
	token, hash := auth.NewToken(prefixInvite)
	now := s.cfg.Now().UTC()
	inv := corral.Invite{ID: corral.NewID("inv"), CreatedBy: actor.ID, CreatedAt: now, ExpiresAt: now.Add(s.cfg.InviteTTL)}
	if err := s.store.CreateInvite(ctx, inv, hash); err != nil {
		return corral.Invite{}, "", err
	}
	return inv, token, nil
}

// ListedUser is an account as the administrators' list shows it.
type ListedUser struct {
	corral.User
	// EmailASCII is the email with its domain in ASCII (punycode) when the
	// domain is not ASCII, else "": a domain that only looks like a
	// familiar one ("exаmple.com" with a Cyrillic а) stands out in it.
	EmailASCII string
	// EmailMixedScript: the local part or a label of the domain mixes
	// scripts ("victim" with a Cyrillic "і"), a look-alike of another
	// address.
	EmailMixedScript bool
}

// Users lists every account (admins only).
func (s *Accounts) Users(ctx context.Context, actor corral.User) ([]ListedUser, error) {
	if err := requireAdmin(actor); err != nil {
		return nil, err
	}
	us, err := s.store.Users(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ListedUser, len(us))
	for i, u := range us {
		out[i] = ListedUser{User: u, EmailASCII: sanitize.EmailASCII(u.Email), EmailMixedScript: sanitize.EmailMixedScript(u.Email)}
	}
	return out, nil
}

// SetDisabled disables or re-enables an account (admins only). Disabling
// ends every session of the account at once; its API tokens stop working
// while it stays disabled.
func (s *Accounts) SetDisabled(ctx context.Context, actor corral.User, id string, disabled bool) (corral.User, error) {
	if err := requireAdmin(actor); err != nil {
		return corral.User{}, err
	}
	if disabled && id == actor.ID {
		return corral.User{}, corral.Errorf(corral.ECONFLICT, "you cannot disable your own account")
	}
	if err := s.store.SetDisabled(ctx, id, disabled, actor.ID); err != nil {
		return corral.User{}, err
	}
	s.cfg.Log.Info("account disabled changed", "user", id, "disabled", disabled, "by", actor.ID)
	return s.store.UserByID(ctx, id)
}

// SetDisabledByEmail is SetDisabled for the command line, which is trusted.
func (s *Accounts) SetDisabledByEmail(ctx context.Context, email string, disabled bool) (corral.User, error) {
	email, err := sanitize.Email(email)
	if err != nil {
		return corral.User{}, err
	}
	u, err := s.store.UserByEmail(ctx, email)
	if err != nil {
		return corral.User{}, err
	}
	if err := s.store.SetDisabled(ctx, u.ID, disabled, ""); err != nil {
		return corral.User{}, err
	}
	return s.store.UserByID(ctx, u.ID)
}

// hash and verify run the password function under the hashing semaphore.
func (s *Accounts) hash(ctx context.Context, password string) (string, error) {
	if err := s.acquire(ctx); err != nil {
		return "", err
	}
	defer s.release()
	h, err := auth.HashPassword(password, s.params)
	if err != nil {
		return "", corral.Internal("hash password", err)
	}
	return h, nil
}

func (s *Accounts) verify(ctx context.Context, password, encoded string) (bool, error) {
	if err := s.acquire(ctx); err != nil {
		return false, err
	}
	defer s.release()
	ok, _, err := auth.VerifyPassword(password, encoded)
	if err != nil {
		return false, corral.Internal("verify password", err)
	}
	return ok, nil
}

func (s *Accounts) dummyVerify(ctx context.Context, password string) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	auth.DummyVerify(password)
	return nil
}

func (s *Accounts) acquire(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &corral.Error{Code: corral.EUNAVAIL, Message: "the server is busy: try again", Err: ctx.Err()}
	}
}

func (s *Accounts) release() { <-s.slots }
