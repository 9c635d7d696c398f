package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// childEnv names the test child to run: tests that must change the whole
// process irreversibly (seccomp, Landlock, rlimits) run in a re-executed
// copy of the test binary.
const childEnv = "SANDBOX_TEST_CHILD"

// testChildren are the functions a re-executed test binary can run. Each
// test file registers its own in an init function. A child reports by its
// output and exit status.
var testChildren = map[string]func(){}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == InitArg {
		Init() // never returns
	}
	if name := os.Getenv(childEnv); name != "" {
		f, ok := testChildren[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown test child %q\n", name)
			os.Exit(3)
		}
		f()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runChild runs a registered test child and returns its combined output and
// exit code.
func runChild(t *testing.T, name string, env ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append([]string{childEnv + "=" + name}, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("child %s: %v", name, err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}
