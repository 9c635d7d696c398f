package corral

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in      string
		want    Level
		wantErr bool
	}{
		{"viewer", LevelViewer, false},
		{"runner", LevelRunner, false},
		{"editor", LevelEditor, false},
		{"owner", LevelOwner, false},
		{"none", LevelNone, true},
		{"", LevelNone, true},
		{"Viewer", LevelNone, true},
		{"admin", LevelNone, true},
	}
	for _, tt := range tests {
		got, err := ParseLevel(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != tt.in {
			t.Errorf("ParseLevel(%q).String() = %q", tt.in, got.String())
		}
	}
	if s := Level(9).String(); s != "Level(9)" {
		t.Errorf("Level(9).String() = %q", s)
	}
}

func TestErrorsKeepInternalsOut(t *testing.T) {
	cause := errors.New("disk I/O error at /var/lib/corral/corral.db")
	tests := []struct {
		name     string
		err      error
		code     string
		message  string
		logHas   string // what Error() keeps for the log
		hideText string // what must not reach the caller
	}{
		{"internal", Internal("sqlite.Agent", cause), EINTERNAL, "internal error", "sqlite.Agent: internal error: disk I/O", "/var/lib"},
		{"wrapped internal", fmt.Errorf("load: %w", Internal("op", cause)), EINTERNAL, "internal error", "disk I/O", "/var/lib"},
		{"plain error", cause, EINTERNAL, "internal error", "disk I/O", "/var/lib"},
		{"user error", Errorf(EINVALID, "name is required"), EINVALID, "name is required", "name is required", ""},
		{"wrapped user error", fmt.Errorf("create: %w", NotFound("agent")), ENOTFOUND, "agent not found", "agent not found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorCode(tt.err); got != tt.code {
				t.Errorf("ErrorCode = %q, want %q", got, tt.code)
			}
			msg := ErrorMessage(tt.err)
			if msg != tt.message {
				t.Errorf("ErrorMessage = %q, want %q", msg, tt.message)
			}
			if tt.hideText != "" && strings.Contains(msg, tt.hideText) {
				t.Errorf("ErrorMessage %q leaks %q", msg, tt.hideText)
			}
			if !strings.Contains(tt.err.Error(), tt.logHas) {
				t.Errorf("Error() = %q, want it to contain %q for the log", tt.err.Error(), tt.logHas)
			}
		})
	}
	if ErrorCode(nil) != "" || ErrorMessage(nil) != "" {
		t.Error("nil error has a code or message")
	}
	if !errors.Is(Internal("op", cause), cause) {
		t.Error("Internal does not unwrap to its cause")
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewID("agt")
		if !strings.HasPrefix(id, "agt_") || len(id) != 4+16 || strings.ToLower(id) != id {
			t.Fatalf("NewID = %q, want agt_ and 16 lowercase base32 characters", id)
		}
		if seen[id] {
			t.Fatalf("NewID repeated %q", id)
		}
		seen[id] = true
	}
}

func TestBudgetSpent(t *testing.T) {
	tests := []struct {
		b    Budget
		want bool
	}{
		{Budget{Tokens: 0, Used: 0}, false},       // unlimited
		{Budget{Tokens: 0, Used: 1 << 40}, false}, // unlimited, however much is used
		{Budget{Tokens: 100, Used: 99}, false},
		{Budget{Tokens: 100, Used: 100}, true},
		{Budget{Tokens: 100, Used: 130}, true}, // a call may overshoot
	}
	for _, tt := range tests {
		if got := tt.b.Spent(); got != tt.want {
			t.Errorf("%+v.Spent() = %v, want %v", tt.b, got, tt.want)
		}
	}
}

func TestGitCommitTrailer(t *testing.T) {
	msg := "Apply change set chg_1\n\nCorral-Change-Set: chg_forged\n\nCorral-Run: run_1\nCorral-Change-Set: chg_1 \nApproved-By: Ann <a@x>\n"
	tests := []struct{ key, want string }{
		{"Corral-Change-Set", "chg_1"},
		{"Corral-Run", "run_1"},
		{"Approved-By", "Ann <a@x>"},
		{"Apply change set", ""}, // not a "key: value" line
		{"Missing", ""},
	}
	for _, tt := range tests {
		if got := (GitCommit{Message: msg}).Trailer(tt.key); got != tt.want {
			t.Errorf("Trailer(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestCharge(t *testing.T) {
	const ceiling = 1000
	for _, tt := range []struct {
		name     string
		u        Tokens
		reported bool
		want     Tokens
		as       bool
	}{
		{"as reported", Tokens{Input: 600, Output: 300}, true, Tokens{Input: 600, Output: 300}, true},
		{"nothing: a call that got no answer", Tokens{}, true, Tokens{}, true},
		{"exactly the ceiling", Tokens{Input: 999, Output: 1}, true, Tokens{Input: 999, Output: 1}, true},
		{"one past it", Tokens{Input: 999, Output: 2}, true, Tokens{Input: ceiling}, false},
		{"negative input", Tokens{Input: -1, Output: 5}, true, Tokens{Input: ceiling}, false},
		{"negative output", Tokens{Input: 5, Output: -1}, true, Tokens{Input: ceiling}, false},
		{"huge: no overflow", Tokens{Input: 9_200_000_000_000_000_000, Output: 9_200_000_000_000_000_000}, true, Tokens{Input: ceiling}, false},
		{"not reported", Tokens{Input: 5}, false, Tokens{Input: ceiling}, false},
	} {
		got, as := Charge(tt.u, tt.reported, ceiling)
		if got != tt.want || as != tt.as {
			t.Errorf("%s: Charge = %+v, %v; want %+v, %v", tt.name, got, as, tt.want, tt.as)
		}
	}
}

// TestStates: every listed state of each kind is Valid and distinct, and
// nothing else is: not "", not another kind's word, not a case variant.
func TestStates(t *testing.T) {
	kinds := []struct {
		name  string
		all   []string
		valid func(string) bool
	}{
		{"RunStatus", strs(AllRunStatuses), func(s string) bool { return RunStatus(s).Valid() }},
		{"AgentState", strs(AllAgentStates), func(s string) bool { return AgentState(s).Valid() }},
		{"ChangeStatus", strs(AllChangeStatuses), func(s string) bool { return ChangeStatus(s).Valid() }},
		{"EntryState", strs(AllEntryStates), func(s string) bool { return EntryState(s).Valid() }},
		{"RepoStatus", strs(AllRepoStatuses), func(s string) bool { return RepoStatus(s).Valid() }},
		{"Violation", strs(AllViolations), func(s string) bool { return Violation(s).Valid() }},
	}
	for _, k := range kinds {
		seen := map[string]bool{}
		for _, s := range k.all {
			if seen[s] {
				t.Errorf("%s %q is listed twice", k.name, s)
			}
			seen[s] = true
			if !k.valid(s) {
				t.Errorf("%s(%q).Valid() = false, want true", k.name, s)
			}
			if k.valid(strings.ToUpper(s)) {
				t.Errorf("%s(%q).Valid() = true, want false", k.name, strings.ToUpper(s))
			}
		}
		for _, s := range []string{"", "sleeping", "cloning ", "dropped\x00"} {
			if k.valid(s) && !seen[s] {
				t.Errorf("%s(%q).Valid() = true, want false", k.name, s)
			}
		}
	}
	for _, s := range AllRunStatuses {
		want := s == RunAdmitted || s == RunRunning || s == RunPaused
		if RunActive(s) != want {
			t.Errorf("RunActive(%q) = %v, want %v", s, !want, want)
		}
	}
}

func strs[S ~string](all []S) []string {
	out := make([]string, len(all))
	for i, s := range all {
		out[i] = string(s)
	}
	return out
}

func TestChangeSetExpired(t *testing.T) {
	cs := ChangeSet{ID: "chg_1", Status: ChangePending, Entries: []ChangeEntry{
		{Path: "a", State: EntryPending}, {Path: "b", State: EntryApplied}, {Path: "c", State: EntryDenied}, {Path: "d", State: EntryPending},
	}}
	got := cs.Expired()
	want := []EntryState{EntryDropped, EntryApplied, EntryDenied, EntryDropped}
	for i, e := range got.Entries {
		if e.State != want[i] {
			t.Errorf("Expired entry %s = %s, want %s", e.Path, e.State, want[i])
		}
	}
	if got.Status != ChangeExpired {
		t.Errorf("Expired status = %s, want %s", got.Status, ChangeExpired)
	}
	if cs.Status != ChangePending || cs.Entries[0].State != EntryPending {
		t.Errorf("Expired changed the change set it was given: %+v", cs)
	}
}
