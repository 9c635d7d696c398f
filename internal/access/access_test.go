package access

import (
	"testing"

	"corral"
)

// want is written out by hand, independently of the required table, so a
// change to the policy has to be made twice, on purpose.
var (
	N = Hide
	F = Forbid
	A = Allow
)

var levels = []corral.Level{corral.LevelNone, corral.LevelViewer, corral.LevelRunner, corral.LevelEditor, corral.LevelOwner}

var want = map[Action][5]Decision{
	//               none viewer runner editor owner
	ViewAgent:      {N, A, A, A, A},
	ReadMessages:   {N, A, A, A, A},
	ViewRuns:       {N, A, A, A, A},
	ViewChanges:    {N, A, A, A, A},
	ReadFiles:      {N, A, A, A, A},
	ReadSecrets:    {N, F, F, A, A},
	SendMessage:    {N, F, A, A, A},
	StopOwnRun:     {N, F, A, A, A},
	StopAnyRun:     {N, F, F, A, A},
	KillRun:        {N, F, F, A, A},
	EditAgent:      {N, F, F, A, A},
	DecideChanges:  {N, F, F, A, A},
	WriteFiles:     {N, F, F, A, A},
	SetBudget:      {N, F, F, F, A},
	Share:          {N, F, F, F, A},
	Release:        {N, F, F, F, A},
	DeleteAgent:    {N, F, F, F, A},
	UseTerminal:    {N, F, F, A, A},
	ReadDocuments:  {N, A, A, A, A},
	WriteDocuments: {N, F, F, A, A},
}

func TestLibraryEveryCase(t *testing.T) {
	// signedIn, admin, author → read, publish, delete
	tests := []struct {
		signedIn, admin, author bool
		want                    [3]Decision
	}{
		{false, false, false, [3]Decision{N, N, N}},
		{false, true, true, [3]Decision{N, N, N}},
		{true, false, false, [3]Decision{A, A, F}},
		{true, false, true, [3]Decision{A, A, A}},
		{true, true, false, [3]Decision{A, A, A}},
		{true, true, true, [3]Decision{A, A, A}},
	}
	for _, tt := range tests {
		for a := ReadLibrary; a < numLibraryActions; a++ {
			if got := Library(tt.signedIn, tt.admin, tt.author, a); got != tt.want[a] {
				t.Errorf("Library(signedIn %v, admin %v, author %v, %d) = %v, want %v", tt.signedIn, tt.admin, tt.author, a, got, tt.want[a])
			}
		}
	}
	if got := Library(true, true, true, numLibraryActions); got != Forbid {
		t.Errorf("an unknown library action: %v, want forbid", got)
	}
}

func TestTargetEveryLevelAndConsent(t *testing.T) {
	//                         none viewer runner editor owner
	notAccepted := [5]Decision{N, N, N, N, A}
	accepted := [5]Decision{N, F, A, A, A}
	for i, l := range levels {
		if got := Target(l, false); got != notAccepted[i] {
			t.Errorf("Target(%v, not accepted) = %v, want %v", l, got, notAccepted[i])
		}
		if got := Target(l, true); got != accepted[i] {
			t.Errorf("Target(%v, accepted) = %v, want %v", l, got, accepted[i])
		}
	}
	for _, l := range []corral.Level{corral.Level(-1), corral.LevelOwner + 1} {
		for _, ok := range []bool{false, true} {
			if got := Target(l, ok); got != Hide {
				t.Errorf("Target(%v, %v) = %v, want hide", l, ok, got)
			}
		}
	}
}

func TestCheckEveryActionAndLevel(t *testing.T) {
	for _, a := range Actions() {
		row, ok := want[a]
		if !ok {
			t.Errorf("action %v has no row in the expected table: decide who may do it", a)
			continue
		}
		for i, l := range levels {
			if got := Check(l, a); got != row[i] {
				t.Errorf("Check(%v, %v) = %v, want %v", l, a, got, row[i])
			}
		}
	}
	if len(want) != len(Actions()) {
		t.Errorf("expected table has %d rows, policy has %d actions", len(want), len(Actions()))
	}
}

func TestCheckFailsClosed(t *testing.T) {
	tests := []struct {
		name   string
		level  corral.Level
		action Action
		want   Decision
	}{
		{"negative level", corral.Level(-1), ViewAgent, Hide},
		{"level above owner", corral.LevelOwner + 1, ViewAgent, Hide},
		{"unknown action", corral.LevelOwner, numActions, Forbid},
		{"negative action", corral.LevelOwner, Action(-1), Forbid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.level, tt.action); got != tt.want {
				t.Errorf("Check(%v, %v) = %v, want %v", tt.level, tt.action, got, tt.want)
			}
		})
	}
}

func TestDecisionErr(t *testing.T) {
	if err := Allow.Err("agent", ViewAgent); err != nil {
		t.Errorf("Allow.Err = %v, want nil", err)
	}
	if code := corral.ErrorCode(Forbid.Err("agent", Share)); code != corral.EFORBIDDEN {
		t.Errorf("Forbid.Err code = %q, want %q", code, corral.EFORBIDDEN)
	}
	hidden, missing := Hide.Err("agent", ViewAgent), corral.NotFound("agent")
	if corral.ErrorCode(hidden) != corral.ENOTFOUND || corral.ErrorMessage(hidden) != corral.ErrorMessage(missing) {
		t.Errorf("Hide.Err = %v, want the same error as a missing agent (%v)", hidden, missing)
	}
}

func TestOverseeEveryActionAndCaller(t *testing.T) {
	// Written out by hand, like want: anonymous, signed in, admin.
	none, own, all := ReachNone, ReachOwn, ReachAll
	wantReach := map[ServerAction][3]Reach{
		ReadUsage:   {none, own, all},
		ListRuns:    {none, own, all},
		ReadAudit:   {none, none, all},
		ReadBudgets: {none, none, all},
	}
	callers := []struct {
		name            string
		signedIn, admin bool
	}{{"anonymous", false, false}, {"signed in", true, false}, {"admin", true, true}}
	for a := ServerAction(0); a < numServerActions; a++ {
		row, ok := wantReach[a]
		if !ok {
			t.Errorf("server action %v has no row in the expected table: decide who may do it", a)
			continue
		}
		for i, c := range callers {
			if got := Oversee(c.signedIn, c.admin, a); got != row[i] {
				t.Errorf("Oversee(%s, %v) = %v, want %v", c.name, a, got, row[i])
			}
		}
		// An admin flag without a sign-in is no one.
		if got := Oversee(false, true, a); got != ReachNone {
			t.Errorf("Oversee(not signed in, admin, %v) = %v, want none", a, got)
		}
	}
	for _, a := range []ServerAction{-1, numServerActions} {
		if got := Oversee(true, true, a); got != ReachNone {
			t.Errorf("Oversee(admin, unknown action %d) = %v, want none", a, got)
		}
	}
}
