package service

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/auth"
	"corral/internal/poll"
	"corral/internal/store"
)

// testClock is the injected clock of the throttles: tests move it, never
// sleep.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const testPassword = "correct horse battery"

// loginEnv is Accounts over a real SQLite store with alice and bob, a fake
// clock, and the holds of hot addresses recorded instead of slept.
type loginEnv struct {
	t     *testing.T
	s     *Accounts
	clock *testClock
	mu    sync.Mutex
	holds []time.Duration
}

func newLoginEnv(t *testing.T) *loginEnv {
	t.Helper()
	return newLoginEnvConfig(t, Config{})
}

// newLoginEnvConfig is newLoginEnv with cfg's settings (its clock is the
// env's).
func newLoginEnvConfig(t *testing.T, cfg Config) *loginEnv {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clock := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cheap := auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}
	cfg.Now = clock.Now
	s, err := NewAccounts(db, cheap, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &loginEnv{t: t, s: s, clock: clock}
	s.sleep = func(_ context.Context, d time.Duration) {
		e.mu.Lock()
		e.holds = append(e.holds, d)
		e.mu.Unlock()
	}
	for _, email := range []string{"alice@example.com", "bob@example.com"} {
		if _, err := s.CreateUser(ctx, email, email[:1], testPassword, false); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// login tries a password from an address and returns the error code ("" on
// success) and the Retry-After of a refusal.
func (e *loginEnv) login(email, password, from string) (string, time.Duration) {
	e.t.Helper()
	_, token, err := e.s.Login(context.Background(), email, password, netip.MustParseAddr(from))
	if err == nil {
		if token == "" {
			e.t.Fatalf("Login(%q) from %s succeeded without a session token", email, from)
		}
		return "", 0
	}
	var ce *corral.Error
	if !asError(err, &ce) {
		e.t.Fatalf("Login(%q) from %s = %v, want a *corral.Error", email, from, err)
	}
	if ce.Code != corral.EUNAUTH && ce.Code != corral.ETHROTTLED {
		e.t.Fatalf("Login(%q) from %s = %v, want unauthenticated or throttled", email, from, err)
	}
	return ce.Code, ce.RetryAfter
}

func asError(err error, target **corral.Error) bool {
	e, ok := err.(*corral.Error)
	*target = e
	return ok
}

// step is one login attempt, after advancing the clock, and its outcome:
// "" for signed in, else the error code; retry is the Retry-After wanted
// of a throttled answer (0: any).
type step struct {
	email, password, from string
	advance               time.Duration
	want                  string
	retry                 time.Duration
}

const (
	ok        = ""
	unauth    = corral.EUNAUTH
	throttled = corral.ETHROTTLED
	wrong     = "not the password"
	addrA     = "192.0.2.1"
	addrB     = "198.51.100.7"
)

func repeat(n int, s step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func steps(parts ...[]step) []step {
	var all []step
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

func one(s step) []step { return []step{s} }

// spray is n failures from one address, each on a different account:
// existing and unknown ones alike.
func spray(n int, from string) []step {
	out := make([]step, n)
	for i := range out {
		email := fmt.Sprintf("user%d@example.com", i)
		if i == 0 {
			email = "bob@example.com"
		}
		out[i] = step{email: email, password: wrong, from: from, want: unauth}
	}
	return out
}

func TestLoginThrottle(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		holds int // failures a hot address held its turn for
	}{
		{
			name: "correct password from an address that failed on 50 other accounts",
			steps: steps(
				spray(50, addrA),
				one(step{email: "alice@example.com", password: testPassword, from: addrA, want: ok}),
			),
			holds: 50 - sprayFree, // from the failure after the streak made it hot
		},
		{
			name: "same from one IPv6 /64, from another address in it",
			steps: steps(
				spray(50, "2001:db8::1"),
				one(step{email: "alice@example.com", password: testPassword, from: "2001:db8::ffff", want: ok}),
			),
			holds: 50 - sprayFree,
		},
		{
			name: "bob's failures never affect alice",
			steps: steps(
				repeat(5, step{email: "bob@example.com", password: wrong, from: addrA, want: unauth}),
				one(step{email: "bob@example.com", password: testPassword, from: addrA, want: throttled, retry: time.Second}),
				one(step{email: "alice@example.com", password: wrong, from: addrA, want: unauth}),
				one(step{email: "alice@example.com", password: testPassword, from: addrA, want: ok}),
				one(step{email: "alice@example.com", password: testPassword, from: addrB, want: ok}),
			),
		},
		{
			name: "an attacker hammering alice locks alice everywhere until the lock ends",
			steps: steps(
				repeat(5, step{email: "alice@example.com", password: wrong, from: addrA, want: unauth}),
				one(step{email: "alice@example.com", password: wrong, from: addrA, want: throttled, retry: time.Second}),
				// The per-account lock: alice herself, from elsewhere, waits too.
				one(step{email: "alice@example.com", password: testPassword, from: addrB, want: throttled, retry: time.Second}),
				one(step{email: "alice@example.com", password: testPassword, from: addrB, advance: time.Second, want: ok}),
				// Her login ended the account's streak, not the attacker's:
				// its next failure locks it out of alice for 2s, and only it.
				one(step{email: "alice@example.com", password: wrong, from: addrA, want: unauth}),
				one(step{email: "alice@example.com", password: testPassword, from: addrA, want: throttled, retry: 2 * time.Second}),
				one(step{email: "alice@example.com", password: testPassword, from: addrB, want: ok}),
				one(step{email: "bob@example.com", password: testPassword, from: addrA, want: ok}),
			),
		},
		{
			name: "an unknown email is throttled like a known one",
			steps: steps(
				repeat(5, step{email: "nobody@example.com", password: wrong, from: addrA, want: unauth}),
				one(step{email: "nobody@example.com", password: wrong, from: addrA, want: throttled, retry: time.Second}),
				one(step{email: "NOBODY@example.com ", password: wrong, from: addrB, want: throttled, retry: time.Second}),
				one(step{email: "nobody@example.com", password: wrong, from: addrB, advance: time.Second, want: unauth}),
				one(step{email: "nobody@example.com", password: wrong, from: addrB, want: throttled, retry: 2 * time.Second}),
			),
		},
		{
			name: "a malformed email is throttled like a known one",
			steps: steps(
				repeat(5, step{email: "not an email", password: wrong, from: addrA, want: unauth}),
				one(step{email: "also@not@one", password: wrong, from: addrA, want: throttled, retry: time.Second}),
				one(step{email: "alice@example.com", password: testPassword, from: addrA, want: ok}),
			),
		},
		{
			name: "a success from the address ends its spray streak",
			steps: steps(
				spray(sprayFree-1, addrA),
				one(step{email: "alice@example.com", password: testPassword, from: addrA, want: ok}),
				spray(sprayFree-1, addrA)[1:], // bob is locked by now; the others are fresh
			),
			holds: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newLoginEnv(t)
			for i, s := range tt.steps {
				e.clock.Advance(s.advance)
				got, retry := e.login(s.email, s.password, s.from)
				if got != s.want || (s.retry != 0 && retry != s.retry) {
					t.Fatalf("step %d: Login(%q, %q) from %s = %q (Retry-After %v), want %q (Retry-After %v)",
						i, s.email, s.password, s.from, got, retry, s.want, s.retry)
				}
			}
			if len(e.holds) != tt.holds {
				t.Errorf("hot address held its turn %d times, want %d", len(e.holds), tt.holds)
			}
			for _, d := range e.holds {
				if d != sprayHold {
					t.Errorf("hold = %v, want %v", d, sprayHold)
				}
			}
		})
	}
}

// TestUnknownEmailAnswersLikeKnown runs the same attack on a known and an
// unknown account: every answer and Retry-After is the same.
func TestUnknownEmailAnswersLikeKnown(t *testing.T) {
	run := func(email string) []string {
		e := newLoginEnv(t)
		var out []string
		for range 12 {
			code, retry := e.login(email, wrong, addrA)
			out = append(out, fmt.Sprintf("%s %v", code, retry))
			if code == throttled {
				e.clock.Advance(retry)
			}
		}
		return out
	}
	known, unknown := run("alice@example.com"), run("nobody@example.com")
	if fmt.Sprint(known) != fmt.Sprint(unknown) {
		t.Errorf("known account answered %v, unknown %v: must be the same", known, unknown)
	}
}

// TestHotAddressIsCheckedOneAtATime: while a failure from a hot address
// holds its turn, the next login from that address waits, one from
// elsewhere does not, a waiting client that leaves gives up unchecked, and
// the hold is not cut short when the failing client leaves.
func TestHotAddressIsCheckedOneAtATime(t *testing.T) {
	e := newLoginEnv(t)
	for _, s := range spray(sprayFree, addrA) {
		if got, _ := e.login(s.email, s.password, s.from); got != s.want {
			t.Fatalf("spray: Login(%q) = %q, want %q", s.email, got, s.want)
		}
	}
	held, release := make(chan struct{}), make(chan struct{})
	holdCut := make(chan bool, 1)
	e.s.sleep = func(ctx context.Context, d time.Duration) {
		close(held)
		<-release
		holdCut <- ctx.Err() != nil
	}
	a := netip.MustParseAddr(addrA)
	addr := addrKey(a)
	waitRefs := func(n int) {
		t.Helper()
		if !poll.Eventually(10*time.Second, func() bool { return e.s.hot.refs(addr) == n }) {
			t.Fatalf("logins holding or waiting for the hot address's turn = %d, want %d", e.s.hot.refs(addr), n)
		}
	}
	firstCtx, hangUp := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, _, err := e.s.Login(firstCtx, "carol@example.com", wrong, a)
		first <- err
	}()
	wait(t, held, "the first login's hold")
	second := make(chan error, 1)
	go func() {
		_, _, err := e.s.Login(context.Background(), "alice@example.com", testPassword, a)
		second <- err
	}()
	waitRefs(2) // the second waits behind the first, asleep
	leaverCtx, leave := context.WithCancel(context.Background())
	leaver := make(chan error, 1)
	go func() {
		_, _, err := e.s.Login(leaverCtx, "alice@example.com", testPassword, a)
		leaver <- err
	}()
	waitRefs(3)
	leave()
	if err := wait(t, leaver, "the login that left"); corral.ErrorCode(err) != corral.EUNAVAIL {
		t.Fatalf("a login that left while waiting = %v, want unavailable, never checked", err)
	}
	waitRefs(2)
	if _, _, err := e.s.Login(context.Background(), "alice@example.com", testPassword, netip.MustParseAddr(addrB)); err != nil {
		t.Fatalf("a login from another address waited for the hot one or failed: %v", err)
	}
	select {
	case err := <-second:
		t.Fatalf("the second login from the hot address ended (%v) while the first held its turn", err)
	default:
	}
	hangUp() // the first client leaves during its hold
	close(release)
	if wait(t, holdCut, "the end of the hold") {
		t.Errorf("the hold ended when its client left: it must last its full time")
	}
	if err := wait(t, first, "the first login"); corral.ErrorCode(err) != corral.EUNAUTH {
		t.Fatalf("first login = %v, want unauthenticated", err)
	}
	if err := wait(t, second, "the second login"); err != nil {
		t.Fatalf("the correct password from the hot address = %v, want signed in", err)
	}
	waitRefs(0)
}

// wait receives from ch, failing the test if nothing comes in 10s.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never came", what)
		panic("unreachable")
	}
}

// refs reports how many logins hold or wait for key's turn.
func (g *gates) refs(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.m[key]; e != nil {
		return e.refs
	}
	return 0
}

func TestAddrKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"192.0.2.1", "addr:192.0.2.1"},
		{"::ffff:192.0.2.1", "addr:192.0.2.1"},
		{"2001:db8:1:2:3:4:5:6", "addr:2001:db8:1:2::/64"},
		{"2001:db8:1:2::9", "addr:2001:db8:1:2::/64"},
		{"::", "addr:::/64"},
	}
	for _, tt := range tests {
		if got := addrKey(netip.MustParseAddr(tt.in)); got != tt.want {
			t.Errorf("addrKey(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
