package sanitize_test

import (
	"os/exec"
	"testing"
	"unicode/utf8"

	"corral"
	"corral/internal/sanitize"
)

var branchTests = []struct {
	name string
	ok   bool
	git  bool // what git check-ref-format --branch says, where Corral is stricter
}{
	{"main", true, true},
	{"feature/login", true, true},
	{"release-1.2", true, true},
	{"fix_42", true, true},
	{"über", true, true},
	{"a.b", true, true},
	{"", false, false},
	{"@", false, true}, // git reads it as HEAD's branch
	{"-x", false, false},
	{"a..b", false, false},
	{"a@{b", false, false},
	{"a//b", false, false},
	{"/a", false, false},
	{"a/", false, false},
	{"a.", false, false},
	{".a", false, false},
	{"a/.b", false, false},
	{"a.lock", false, false},
	{"a/b.lock/c", false, false},
	{"a b", false, false},
	{"a~1", false, false},
	{"a^", false, false},
	{"a:b", false, false},
	{"a?", false, false},
	{"a*", false, false},
	{"a[b", false, false},
	{"a\\b", false, false},
	{"a\tb", false, false},
	{"a\x7fb", false, false},
	// Corral's own: names that would mean something else in a refspec.
	{"refs/tags/x", false, true},
	{"refs/heads/main", false, true},
	{"+main", false, true},
	{"HEAD", false, false},
}

func TestBranch(t *testing.T) {
	for _, tt := range branchTests {
		err := sanitize.Branch(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("Branch(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && corral.ErrorCode(err) != corral.EINVALID {
			t.Errorf("Branch(%q) code %s, want %s", tt.name, corral.ErrorCode(err), corral.EINVALID)
		}
	}
}

// TestBranchAsGit: where Corral follows git's rules, it agrees with git
// check-ref-format --branch on every case above.
func TestBranchAsGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed (make test installs it)")
	}
	dir := t.TempDir()
	for _, tt := range branchTests {
		if tt.name == "" || !utf8.ValidString(tt.name) {
			continue
		}
		cmd := exec.Command(git, "check-ref-format", "--branch", tt.name)
		cmd.Dir = dir // outside any repository: "@" names no branch there
		got := cmd.Run() == nil
		if got != tt.git {
			t.Errorf("git check-ref-format --branch %q: ok %v, the table says %v", tt.name, got, tt.git)
		}
	}
}
