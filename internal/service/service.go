// Package service holds Corral's use cases. Every method that touches an
// agent takes the acting user, loads that user's level on the agent fresh
// from the store (no caching, so a revoked grant fails on the very next
// call) and asks access.Check before it does anything else. Input is cleaned
// by package sanitize here, so every entry point (HTTP, CLI, later the agent
// loop) gets the same validation.
package service

import (
	"log/slog"
	"time"

	"corral/internal/auth"
)

// Signup modes.
const (
	SignupOpen   = "open"
	SignupInvite = "invite"
	SignupClosed = "closed"
)

// Config holds the settings of the use cases.
type Config struct {
	Signup     string        // open | invite | closed
	SessionTTL time.Duration // how long a login lasts; default 7 days
	InviteTTL  time.Duration // how long an invite stays valid; default 7 days
	// HashSlots bounds concurrent password hashes: each holds ~19 MiB for
	// tens of milliseconds, so a login flood must queue, not exhaust memory.
	HashSlots int
	// PendingDisk bounds what pending change sets hold on the host's disk
	// beyond each agent's own limit (zero fields: the defaults).
	PendingDisk PendingDiskBounds
	// ThrottleState returns where the login throttle named name ("login",
	// "spray" or "signup") keeps its records: the store, when servers
	// share one, so that each sees the failures counted by every other
	// and a takeover forgets none. Nil keeps them in this process's
	// memory, which is what one server alone needs.
	ThrottleState func(name string) auth.ThrottleState
	// ThrottleClock is the clock the login throttles reckon their locks
	// by when they share ThrottleState: the database's (store.DB.Now), so
	// that a lock one server set ends when every other one thinks it
	// does. Nil: Now.
	ThrottleClock func() time.Time
	Now           func() time.Time
	Log           *slog.Logger
}

func (c *Config) defaults() {
	if c.Signup == "" {
		c.Signup = SignupOpen
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = 7 * 24 * time.Hour
	}
	if c.InviteTTL == 0 {
		c.InviteTTL = 7 * 24 * time.Hour
	}
	if c.HashSlots == 0 {
		c.HashSlots = 4
	}
	c.PendingDisk.defaults()
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}
