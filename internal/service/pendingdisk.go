package service

import (
	"context"
	"fmt"
	"strings"

	"corral"
)

// The server's bounds on pending change sets when Config leaves them 0:
// what all the agents of one person may hold on the host's disk (four
// agents' worth of the per-agent default, 16 GiB), and what every agent
// may (64 GiB).
const (
	DefaultPendingDiskPerUser = corral.DefaultPendingDiskPerUser
	DefaultPendingDiskTotal   = corral.DefaultPendingDiskTotal
)

// largestShown is how many of the owner's largest pending change sets a
// refusal names.
const largestShown = 5

// PendingDiskBounds bound what pending change sets hold on the host's
// disk beyond each agent's own limits.pending_disk_bytes: a person may own
// many agents, and the server's disk is one. Admission refuses a message
// once the sum has reached a bound.
type PendingDiskBounds struct {
	PerUser int64 // the pending sets of all the agents one person owns
	Total   int64 // the pending sets of every agent on the server
}

func (b *PendingDiskBounds) defaults() {
	if b.PerUser <= 0 {
		b.PerUser = DefaultPendingDiskPerUser
	}
	if b.Total <= 0 {
		b.Total = DefaultPendingDiskTotal
	}
}

// PendingDiskStore lists what holds a person's pending disk.
type PendingDiskStore interface {
	// LargestPendingChangeSets lists the pending change sets of the
	// agents ownerID owns that hold the most disk, largest first.
	LargestPendingChangeSets(ctx context.Context, ownerID string, limit int) ([]corral.WaitingChangeSet, error)
}

// refused is the EADMISSION error of a refused admission of agent a for
// actor; words says why. A refusal for the owner's or the server's
// pending disk also gives the figures and what holds them.
func (s *Admissions) refused(ctx context.Context, actor corral.User, a corral.Agent, ev corral.Admission, words func(corral.Admission) string) error {
	msg := words(ev)
	switch ev.Reason {
	case corral.ReasonPendingDiskUser:
		msg += fmt.Sprintf(": %s held, the bound is %s (--pending-disk-per-user)",
			sizeText(ev.OwnerPendingDiskBytes), sizeText(s.cfg.PendingDisk.PerUser))
		msg += s.pendingHolders(ctx, actor, a)
	case corral.ReasonPendingDiskServer:
		msg += fmt.Sprintf(": %s held, the bound is %s (--pending-disk-total)",
			sizeText(ev.ServerPendingDiskBytes), sizeText(s.cfg.PendingDisk.Total))
		msg += s.pendingHolders(ctx, actor, a)
	}
	return &corral.Error{Code: corral.EADMISSION, Reason: ev.Reason, Message: msg}
}

// pendingHolders says what frees pending disk: to its owner, their largest
// pending change sets (id, agent, size) to approve or reject; to anyone
// else, whom to ask, for the owner's other agents are not theirs to see.
// The list is read after the refusal, outside its transaction: it guides
// a person, it decides nothing.
func (s *Admissions) pendingHolders(ctx context.Context, actor corral.User, a corral.Agent) string {
	if actor.ID != a.Owner.ID {
		return fmt.Sprintf("; ask %s, the agent's owner, to approve or reject some of their change sets waiting for review", a.Owner.Name)
	}
	sets, err := s.store.LargestPendingChangeSets(ctx, a.Owner.ID, largestShown)
	if err != nil {
		s.cfg.Log.Warn("listing the largest pending change sets", "owner", a.Owner.ID, "err", err)
		return "; approve or reject some of your change sets waiting for review"
	}
	if len(sets) == 0 {
		return "; none of them is of your agents: other people's change sets must be decided"
	}
	named := make([]string, len(sets))
	for i, cs := range sets {
		named[i] = fmt.Sprintf("%s (agent %s, %s)", cs.ID, cs.AgentName, sizeText(cs.DiskBytes))
	}
	return "; approve or reject some of yours, the largest first: " + strings.Join(named, ", ")
}

// sizeText writes a number of bytes for a person: 512 B, 1.5 KiB, 3.2 GiB.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
