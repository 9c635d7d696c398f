package toolstest

import (
	"errors"
	"fmt"
	"testing"
)

// recorder is a TB that remembers how the test would have ended.
type recorder struct{ skipped, failed string }

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestNeed(t *testing.T) {
	missing := errors.New("codex is missing")
	tests := []struct {
		name          string
		env           string
		err           error
		skipped, fail string
	}{
		{name: "installed runs", env: "", err: nil},
		{name: "installed runs where required", env: "1", err: nil},
		{name: "unset skips", env: "", err: missing, skipped: "codex is missing"},
		{name: "0 skips", env: "0", err: missing, skipped: "codex is missing"},
		{name: "other values skip", env: "true", err: missing, skipped: "codex is missing"},
		{name: "1 fails with the reason", env: "1", err: missing,
			fail: "codex is missing (CORRAL_REQUIRE_TOOLS=1: this machine must have the agent CLIs; make tools installs them)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(Env, tt.env)
			r := &recorder{}
			Need(r, tt.err)
			if r.skipped != tt.skipped || r.failed != tt.fail {
				t.Errorf("Need(%v) with %s=%q: skipped %q, failed %q; want skipped %q, failed %q", tt.err, Env, tt.env, r.skipped, r.failed, tt.skipped, tt.fail)
			}
		})
	}
}

func TestDir(t *testing.T) {
	t.Setenv(DirEnv, "/opt/tools")
	if got := Dir(); got != "/opt/tools" {
		t.Errorf("Dir() = %q, want /opt/tools", got)
	}
}
