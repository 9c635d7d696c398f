package sanitize_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
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

// refTests covers every rule of git-check-ref-format(1) that a name to
// clone can break (rule 2, at least one "/", holds of refs/x/ always),
// each with its number, and Corral's own.
var refTests = []struct {
	rule string
	ref  string
	ok   bool
	git  bool // what git check-ref-format --allow-onelevel refs/x/REF says
}{
	{"", "main", true, true},
	{"", "v1.2.3", true, true},
	{"", "feature/login", true, true},
	{"", "über", true, true},
	{"", "a{b}", true, true},
	{"", "a@b", true, true},
	{"", "HEAD", true, true},
	{"", "@", true, true}, // rule 9 is of the whole name: refs/x/@ is one
	{"", "a.b.lock.c", true, true},
	{"", "\xff", true, true},
	{"1", ".a", false, false},
	{"1", "a/.b", false, false},
	{"1", "a.lock", false, false},
	{"1", "a.lock/b", false, false},
	{"3", "a..b", false, false},
	{"3", "..", false, false},
	{"4", "a\x00b", false, false},
	{"4", "a\x01b", false, false},
	{"4", "a\x1fb", false, false},
	{"4", "a\x7fb", false, false},
	{"4", "a b", false, false},
	{"4", "a~1", false, false},
	{"4", "a^", false, false},
	{"4", "a:b", false, false},
	{"5", "a?", false, false},
	{"5", "a*", false, false},
	{"5", "a[b", false, false},
	{"6", "", false, false},
	{"6", "/a", false, false},
	{"6", "a/", false, false},
	{"6", "a//b", false, false},
	{"7", "a.", false, false},
	{"7", "a/b.", false, false},
	{"8", "a@{b", false, false},
	{"8", "@{-1}", false, false},
	{"10", "a\\b", false, false},
	// Corral's own.
	{"corral", "-x", false, true}, // an option to git clone
	{"corral", strings.Repeat("a", 256), false, true},
	{"", strings.Repeat("a", 255), true, true},
}

func TestRefName(t *testing.T) {
	for _, tt := range refTests {
		err := sanitize.RefName(tt.ref)
		if (err == nil) != tt.ok {
			t.Errorf("RefName(%q) = %v, want ok %v (rule %s)", tt.ref, err, tt.ok, tt.rule)
		}
		if err != nil && corral.ErrorCode(err) != corral.EINVALID {
			t.Errorf("RefName(%q) code %s, want %s", tt.ref, corral.ErrorCode(err), corral.EINVALID)
		}
	}
}

// TestRefNameAsGit: where Corral follows git's rules, it agrees with git
// check-ref-format on every case above.
func TestRefNameAsGit(t *testing.T) {
	git := needGit(t)
	for _, tt := range refTests {
		if strings.IndexByte(tt.ref, 0) >= 0 {
			continue // no argument can hold a NUL
		}
		if got := gitAccepts(t, git, "--allow-onelevel", "refs/x/"+tt.ref); got != tt.git {
			t.Errorf("git check-ref-format --allow-onelevel refs/x/%q: ok %v, the table says %v", tt.ref, got, tt.git)
		}
	}
}

func needGit(t testing.TB) string {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed (make test installs it)")
	}
	return git
}

// gitAccepts runs git check-ref-format with args outside any repository
// ("@" names no branch there), and reports whether it accepted.
func gitAccepts(t testing.TB, git string, args ...string) bool {
	cmd := exec.Command(git, append([]string{"check-ref-format"}, args...)...)
	cmd.Dir = os.TempDir()
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("git check-ref-format %q: %v", args, err)
	}
	return err == nil
}

// FuzzRefName: RefName accepts exactly what git check-ref-format
// --allow-onelevel accepts under refs/x/, less Corral's own refusals (a
// leading "-", past 255 bytes).
func FuzzRefName(f *testing.F) {
	for _, tt := range refTests {
		f.Add(tt.ref)
	}
	git := needGit(f)
	f.Fuzz(func(t *testing.T, ref string) {
		err := sanitize.RefName(ref)
		if err != nil {
			mustCode(t, "RefName", err, corral.EINVALID)
		}
		if strings.IndexByte(ref, 0) >= 0 {
			if err == nil {
				t.Fatalf("RefName(%q) accepted a NUL", ref)
			}
			return
		}
		own := strings.HasPrefix(ref, "-") || len(ref) > 255
		want := !own && gitAccepts(t, git, "--allow-onelevel", "refs/x/"+ref)
		if (err == nil) != want {
			t.Fatalf("RefName(%q) = %v; git and Corral's rules say ok %v", ref, err, want)
		}
	})
}

// FuzzBranch: Branch accepts exactly what git check-ref-format --branch
// accepts, less Corral's own refusals (a name under refs/, a leading "+",
// "@", past 255 bytes).
func FuzzBranch(f *testing.F) {
	for _, tt := range branchTests {
		f.Add(tt.name)
	}
	git := needGit(f)
	f.Fuzz(func(t *testing.T, name string) {
		err := sanitize.Branch(name)
		if err != nil {
			mustCode(t, "Branch", err, corral.EINVALID)
		}
		if name == "" || strings.IndexByte(name, 0) >= 0 {
			if err == nil {
				t.Fatalf("Branch(%q) accepted it", name)
			}
			return
		}
		own := strings.HasPrefix(name, "refs/") || strings.HasPrefix(name, "+") || name == "@" || len(name) > 255
		want := !own && gitAccepts(t, git, "--branch", name)
		if (err == nil) != want {
			t.Fatalf("Branch(%q) = %v; git and Corral's rules say ok %v", name, err, want)
		}
	})
}
