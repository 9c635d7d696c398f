package kerneltest

import (
	"fmt"
	"testing"
)

// recorder is a TB that remembers how the test would have ended.
type recorder struct{ skipped, failed string }

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestSkip(t *testing.T) {
	tests := []struct {
		name          string
		env           string
		skipped, fail string
	}{
		{name: "unset skips", env: "", skipped: "needs root"},
		{name: "0 skips", env: "0", skipped: "needs root"},
		{name: "other values skip", env: "yes", skipped: "needs root"},
		{name: "1 fails with the reason", env: "1", fail: "needs root (CORRAL_REQUIRE_KERNEL=1: this machine must be able to run it)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(Env, tt.env)
			r := &recorder{}
			Skip(r, "needs %s", "root")
			if r.skipped != tt.skipped || r.failed != tt.fail {
				t.Errorf("Skip with %s=%q: skipped %q, failed %q; want skipped %q, failed %q", Env, tt.env, r.skipped, r.failed, tt.skipped, tt.fail)
			}
		})
	}
}
