package role

import (
	"testing"

	"corral"
)

// TestNoRoleSkipsDatabaseAndServesBrowsers is the invariant that keeps an
// unauthenticated browser-facing process from existing.
func TestNoRoleSkipsDatabaseAndServesBrowsers(t *testing.T) {
	for _, r := range Roles {
		if ServesBrowsers(r) && !NeedsDatabase(r) {
			t.Errorf("role %q serves browsers without the database", r)
		}
	}
}

func TestPredicates(t *testing.T) {
	tests := []struct {
		role                          Role
		database, browsers, worktrees bool
		nodes, dials                  bool
	}{
		{All, true, true, true, false, false},
		{Control, true, true, false, true, false},
		{Sandbox, false, false, true, false, true},
	}
	if len(tests) != len(Roles) {
		t.Fatalf("table covers %d roles, there are %d", len(tests), len(Roles))
	}
	for _, tt := range tests {
		t.Run(string(tt.role), func(t *testing.T) {
			if got := NeedsDatabase(tt.role); got != tt.database {
				t.Errorf("NeedsDatabase(%q) = %v, want %v", tt.role, got, tt.database)
			}
			if got := ServesBrowsers(tt.role); got != tt.browsers {
				t.Errorf("ServesBrowsers(%q) = %v, want %v", tt.role, got, tt.browsers)
			}
			if got := HoldsWorktree(tt.role); got != tt.worktrees {
				t.Errorf("HoldsWorktree(%q) = %v, want %v", tt.role, got, tt.worktrees)
			}
			if got := ReachesNodes(tt.role); got != tt.nodes {
				t.Errorf("ReachesNodes(%q) = %v, want %v", tt.role, got, tt.nodes)
			}
			if got := DialsControl(tt.role); got != tt.dials {
				t.Errorf("DialsControl(%q) = %v, want %v", tt.role, got, tt.dials)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Role
		wantErr bool
	}{
		{"all", All, false},
		{"control", Control, false},
		{"sandbox", Sandbox, false},
		{"", "", true},
		{"ALL", "", true},
		{"all ", "", true},
		{"controller", "", true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("Parse(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && corral.ErrorCode(err) != corral.EINVALID {
			t.Errorf("Parse(%q) error code = %q, want %q", tt.in, corral.ErrorCode(err), corral.EINVALID)
		}
	}
}

func TestEveryRoleIsSupported(t *testing.T) {
	for _, r := range Roles {
		if err := Supported(r); err != nil {
			t.Errorf("Supported(%q) = %v", r, err)
		}
	}
	if err := Supported(Role("everything")); corral.ErrorCode(err) != corral.EINVALID {
		t.Errorf("Supported of an unknown role = %v, want EINVALID", err)
	}
}
