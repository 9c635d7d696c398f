//go:build linux

package workspace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral"
)

// crashEnv names the variable that makes the test binary a crash helper:
// it applies the change set it describes, printing each step and waiting
// for a byte on stdin before doing it, so that the parent can SIGKILL it
// exactly before (or during) any step.
const crashEnv = "WORKSPACE_TEST_APPLY"

type crashArgs struct {
	Dir, JournalDir, ID, Staged string
	Entries                     []Entry
}

func TestMain(m *testing.M) {
	if args := os.Getenv(crashEnv); args != "" {
		os.Exit(crashHelper(args))
	}
	os.Exit(m.Run())
}

func crashHelper(args string) int {
	var a crashArgs
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	var b [1]byte
	hook := func(step string) error {
		fmt.Fprintf(out, "step %s\n", step)
		out.Flush()
		if _, err := io.ReadFull(os.Stdin, b[:]); err != nil {
			os.Exit(3) // the parent went away
		}
		return nil
	}
	err := Apply(a.Dir, a.JournalDir, a.ID, a.Entries, DirSource(a.Staged), hook)
	fmt.Fprintf(out, "done %s\n", corral.ErrorCode(err))
	out.Flush()
	return 0
}

// errInjected is the failure the fault hooks inject.
var errInjected = errors.New("injected I/O failure")

// crashed is what a hook panics with to stop an apply dead, as a crash
// would: no rollback, no clean-up.
type crashed struct{}

// faultHook fails at the n-th step: "error" fails that step only,
// "sticky" fails it and every later one (a disk that went away), "crash"
// stops there.
func faultHook(mode string, n int) Hook {
	calls := 0
	return func(string) error {
		calls++
		switch {
		case mode == "crash" && calls == n:
			panic(crashed{})
		case mode == "error" && calls == n, mode == "sticky" && calls >= n:
			return errInjected
		}
		return nil
	}
}

// survive runs f, turning a crashed panic into crashed=true.
func survive(f func() error) (err error, crash bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crashed); !ok {
				panic(r)
			}
			crash = true
		}
	}()
	return f(), false
}

// crashAt lays out e's before-image and crashes an apply before the step
// that pick chooses among the steps of a clean apply (1-based).
func crashAt(t testing.TB, e *env, pick func(steps []string) int) {
	t.Helper()
	n := pick(recordSteps(t, e))
	if n < 1 {
		t.Fatalf("no step to crash at")
	}
	e.reset(t)
	if _, crash := survive(func() error { return e.apply(faultHook("crash", n)) }); !crash {
		t.Fatalf("the apply did not reach step %d", n)
	}
}

// TestApplyFaults fails every step of an apply in turn, in three ways, and
// then every step of the recovery after each crash point, in two ways.
// Whatever happens, after a Recover with no faults the workspace is
// exactly the before-image (failure before the commit mark) or the
// after-image (after it), and the journal directory is empty.
func TestApplyFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault matrix applies thousands of times (minutes): make test runs it")
	}
	// The matrix simulates failures and crashes of the process, not of the
	// disk: fsyncs would only make its ten thousand applies take minutes.
	// TestApplyCrashes and the other tests keep them.
	realFsync, realSyncFS := fsync, syncFS
	fsync = func(int) error { return nil }
	syncFS = func(int) error { return nil }
	t.Cleanup(func() { fsync, syncFS = realFsync, realSyncFS })

	total := 0
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			e := newEnv(t, fx)
			steps := recordSteps(t, e)
			commit := slices.Index(steps, "commit-rename") + 1
			durable := slices.Index(steps, "commit-sync-dir") + 1
			if commit == 0 || durable != commit+1 {
				t.Fatalf("steps %v: no commit mark", steps)
			}
			image := func(n int) map[string]string {
				if n <= commit {
					return e.before
				}
				return e.after
			}
			recoverAfter := recoveryCrashPoints(steps, len(fx.changes) <= 3 || os.Getenv("CORRAL_FAULT_FULL") != "")
			points := 0
			for n := 1; n <= len(steps); n++ {
				for _, mode := range []string{"error", "sticky", "crash"} {
					what := fmt.Sprintf("%s at step %d (%s)", mode, n, steps[n-1])
					e.reset(t)
					err, crash := survive(func() error { return e.apply(faultHook(mode, n)) })
					points++
					switch {
					case crash:
					case n <= commit:
						wantCode(t, err, corral.EINTERNAL)
						if mode == "error" {
							// The rollback ran in the apply itself.
							e.checkImage(t, e.before, what+", before Recover")
							e.checkNoJournal(t, what+", before Recover")
						}
					case n == durable:
						wantCode(t, err, corral.EINTERNAL)
					case err != nil:
						t.Fatalf("%s: Apply after the commit mark: %v", what, err)
					}
					if err := Recover(e.ws, e.jdir, nil); err != nil {
						t.Fatalf("%s: Recover: %v", what, err)
					}
					e.checkImage(t, image(n), what)
					e.checkNoJournal(t, what)
				}

				if !recoverAfter[n] {
					continue
				}
				// Recovery interrupted at each of its own steps.
				e.reset(t)
				survive(func() error { return e.apply(faultHook("crash", n)) })
				var rsteps []string
				must(t, Recover(e.ws, e.jdir, func(s string) error { rsteps = append(rsteps, s); return nil }))
				e.checkImage(t, image(n), fmt.Sprintf("crash at step %d, recovered", n))
				for m := 1; m <= len(rsteps); m++ {
					for _, mode := range []string{"error", "crash"} {
						what := fmt.Sprintf("crash at step %d (%s), recovery %s at step %d (%s)", n, steps[n-1], mode, m, rsteps[m-1])
						e.reset(t)
						survive(func() error { return e.apply(faultHook("crash", n)) })
						err, _ := survive(func() error { return Recover(e.ws, e.jdir, faultHook(mode, m)) })
						points++
						if err != nil {
							wantCode(t, err, corral.EINTERNAL)
						}
						if err := Recover(e.ws, e.jdir, nil); err != nil {
							t.Fatalf("%s: second Recover: %v", what, err)
						}
						e.checkImage(t, image(n), what)
						e.checkNoJournal(t, what)
					}
				}
			}
			t.Logf("%d apply steps (commit mark at %d), recovery failed at every step after %d crash points, %d fault points",
				len(steps), commit, len(recoverAfter), points)
			total += points
		})
	}
	t.Logf("%d fault points in all", total)
}

// recoveryCrashPoints chooses the crash points (1-based steps) after which
// TestApplyFaults fails every step of the recovery: all of them, or, to
// keep the 20-file change set within a CI run (CORRAL_FAULT_FULL=1 runs
// them all), the first and the last step of each kind ("rename",
// "write-temp", ...), which covers every phase of the apply.
func recoveryCrashPoints(steps []string, all bool) map[int]bool {
	points := map[int]bool{}
	first, last := map[string]int{}, map[string]int{}
	for i, s := range steps {
		kind, _, _ := strings.Cut(s, " ")
		if _, ok := first[kind]; !ok {
			first[kind] = i + 1
		}
		last[kind] = i + 1
		if all {
			points[i+1] = true
		}
	}
	for kind := range first {
		points[first[kind]], points[last[kind]] = true, true
	}
	return points
}

// TestApplyCrashes SIGKILLs a helper process applying the 20-file change
// set, before each step in turn and then while each step runs, and
// recovers in the parent. CORRAL_CRASH_ITERATIONS raises the number of
// crashes for a soak run; the ones past two rounds of every step pick
// their step and kind at random.
func TestApplyCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 200 applying processes: make test runs it")
	}
	e := newEnv(t, fixture20())
	steps := recordSteps(t, e)
	commit := slices.Index(steps, "commit-rename") + 1
	iterations := max(200, 2*(len(steps)+1))
	if s := os.Getenv("CORRAL_CRASH_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CORRAL_CRASH_ITERATIONS=%q: want a positive number", s)
		}
		iterations = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CORRAL_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	args, err := json.Marshal(crashArgs{Dir: e.ws, JournalDir: e.jdir, ID: e.id, Staged: e.staged, Entries: e.entries})
	must(t, err)

	counts := map[string]int{}
	start := time.Now()
	for i := range iterations {
		// k is the step to kill at; k == len(steps)+1 lets the apply finish.
		k, during := i%(len(steps)+1)+1, (i/(len(steps)+1))%2 == 1
		if i >= 2*(len(steps)+1) {
			k, during = rng.IntN(len(steps)+1)+1, rng.IntN(2) == 1
		}
		e.reset(t)
		killed, out := runCrashHelper(t, args, k, during)
		what := fmt.Sprintf("iteration %d: kill at step %d of %d (during=%v)", i, k, len(steps), during)
		if !killed && !strings.HasPrefix(out, "done ") {
			t.Fatalf("%s: the helper ended without finishing: %q", what, out)
		}
		if err := Recover(e.ws, e.jdir, nil); err != nil {
			t.Fatalf("%s: Recover: %v", what, err)
		}
		got := snapshot(t, e.ws)
		isBefore, isAfter := diffSnapshots(got, e.before) == "", diffSnapshots(got, e.after) == ""
		switch {
		case !isBefore && !isAfter:
			t.Fatalf("%s: workspace is neither image:\nagainst the before-image:\n%s\nagainst the after-image:\n%s",
				what, diffSnapshots(got, e.before), diffSnapshots(got, e.after))
		case k < commit && !isBefore, k == commit && !during && !isBefore:
			t.Fatalf("%s: killed before the commit mark, but not the before-image", what)
		case k > commit && !isAfter:
			t.Fatalf("%s: killed after the commit mark, but not the after-image", what)
		}
		e.checkNoJournal(t, what)
		if isBefore {
			counts["before"]++
		} else {
			counts["after"]++
		}
		if killed {
			counts["killed"]++
		}
	}
	t.Logf("%d crash iterations over %d steps (seed %d) in %v: %d killed, %d left the before-image, %d the after-image",
		iterations, len(steps), seed, time.Since(start).Round(time.Millisecond), counts["killed"], counts["before"], counts["after"])
}

// runCrashHelper runs the helper and SIGKILLs it when it announces step k:
// before the step runs, or, with during, right after letting it start.
// It returns whether the helper was killed and its last line.
func runCrashHelper(t *testing.T, args []byte, k int, during bool) (killed bool, last string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+string(args))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	n := 0
	for sc.Scan() {
		last = sc.Text()
		if !strings.HasPrefix(last, "step ") {
			continue
		}
		n++
		if n == k {
			if during {
				stdin.Write([]byte{1})
			}
			must(t, cmd.Process.Kill())
			killed = true
			break
		}
		if _, err := stdin.Write([]byte{1}); err != nil {
			t.Fatalf("writing to the helper: %v", err)
		}
	}
	stdin.Close()
	werr := cmd.Wait()
	if !killed && werr != nil {
		t.Fatalf("helper: %v\n%s", werr, stderr.String())
	}
	return killed, last
}
