package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/api"
	"corral/internal/auth"
)

const password = "correct horse battery"

func TestSignupLoginMeLogout(t *testing.T) {
	e := newEnv(t, envOptions{})
	first := e.signup("First@Example.com ", "First")
	second := e.signup("second@example.com", "Second")
	if !first.user.Admin || second.user.Admin {
		t.Fatalf("admin flags: first %v, second %v; want only the first account admin", first.user.Admin, second.user.Admin)
	}
	if first.user.Email != "first@example.com" {
		t.Errorf("email stored as %q, want it normalised to first@example.com", first.user.Email)
	}
	e.anon().do("POST", "/api/auth/signup", map[string]string{"email": "FIRST@example.com", "name": "Dup", "password": password}).want(http.StatusConflict)

	res := e.anon().do("POST", "/api/auth/login", map[string]string{"email": "first@example.com", "password": password}).want(http.StatusOK)
	var c *http.Cookie
	for _, ck := range (&http.Response{Header: res.header}).Cookies() {
		if ck.Name == api.CookieName {
			c = ck
		}
	}
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge <= 0 {
		t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Lax, Path=/, with an expiry", c)
	}
	if !strings.HasPrefix(c.Value, "cs_") || len(c.Value) < 40 {
		t.Fatalf("session token %q is not a 256-bit token", c.Value)
	}
	session := &client{e: e, cookie: c.Value}
	var me api.UserAnswer
	session.do("GET", "/api/me", nil).want(http.StatusOK).decode(&me)
	if me.User.ID != first.user.ID {
		t.Fatalf("/api/me = %+v, want %s", me.User, first.user.ID)
	}
	session.do("POST", "/api/auth/logout", nil).want(http.StatusNoContent)
	// The token is revoked server-side: replaying the cookie fails.
	session.do("GET", "/api/me", nil).want(http.StatusUnauthorized)
	// The other session of the same account is untouched.
	first.do("GET", "/api/me", nil).want(http.StatusOK)
}

// TestEmailsOneFormAndASCIIForAdmins: an email is one account however its
// letters are composed or cased, and the administrators' list shows a
// non-ASCII domain in punycode.
func TestEmailsOneFormAndASCIIForAdmins(t *testing.T) {
	e := newEnv(t, envOptions{})
	admin := e.signup("admin@example.com", "Admin")
	decomposed := "A\u030aSA@BU\u0308CHER.de" // Å and Ü as letter + combining mark
	asa := e.signup(decomposed, "Åsa")
	if want := "\u00e5sa@b\u00fccher.de"; asa.user.Email != want {
		t.Fatalf("email stored as %+q, want %+q", asa.user.Email, want)
	}
	e.anon().do("POST", "/api/auth/signup", map[string]string{"email": "\u00e5sa@B\u00dcCHER.DE", "name": "Dup", "password": password}).want(http.StatusConflict)
	e.anon().do("POST", "/api/auth/login", map[string]string{"email": "\u00c5sa@b\u00fccher.de", "password": password}).want(http.StatusOK)
	e.anon().do("POST", "/api/auth/login", map[string]string{"email": "a\u030asa@bu\u0308cher.de", "password": password}).want(http.StatusOK)

	asa.do("GET", "/api/users", nil).want(http.StatusForbidden)
	res := admin.do("GET", "/api/users", nil).want(http.StatusOK)
	var listed struct {
		Items []map[string]any `json:"items"`
	}
	res.decode(&listed)
	got := map[string]any{}
	for _, u := range listed.Items {
		got[u["email"].(string)] = u["email_ascii"]
	}
	want := map[string]any{"admin@example.com": nil, "\u00e5sa@b\u00fccher.de": "\u00e5sa@xn--bcher-kva.de"}
	if len(got) != len(want) || got["admin@example.com"] != nil || got["\u00e5sa@b\u00fccher.de"] != want["\u00e5sa@b\u00fccher.de"] {
		t.Fatalf("GET /api/users email → email_ascii = %v, want %v (no email_ascii for an ASCII domain)", got, want)
	}
}

// TestOneMailboxOneAccount: the spellings of one mailbox (a domain in
// punycode or in Unicode, full-width letters) are one account, and an
// address mixing scripts is marked for the admins.
func TestOneMailboxOneAccount(t *testing.T) {
	e := newEnv(t, envOptions{})
	admin := e.signup("admin@example.com", "Admin")
	e.signup("victim1@xn--exmple-4nf.com", "Victim")
	for _, dup := range []string{"victim1@ex\u0430mple.com", "VICTIM1@EX\u0410MPLE.COM"} {
		e.anon().do("POST", "/api/auth/signup", map[string]string{"email": dup, "name": "Dup", "password": password}).want(http.StatusConflict)
	}
	e.signup("victim2@example.com", "Victim 2")
	e.anon().do("POST", "/api/auth/signup", map[string]string{"email": "\uff56\uff49\uff43\uff54\uff49\uff4d2@\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com", "name": "Dup", "password": password}).want(http.StatusConflict)
	e.signup("v\u0456ctim2@example.com", "Look-alike") // a Cyrillic і: another mailbox, marked

	var listed struct {
		Items []map[string]any `json:"items"`
	}
	admin.do("GET", "/api/users", nil).want(http.StatusOK).decode(&listed)
	mixed := map[string]any{}
	for _, u := range listed.Items {
		mixed[u["email"].(string)] = u["email_mixed_script"]
	}
	want := map[string]any{"admin@example.com": false, "victim1@ex\u0430mple.com": true, "victim2@example.com": false, "v\u0456ctim2@example.com": true}
	if len(mixed) != len(want) {
		t.Fatalf("users = %v, want %v", mixed, want)
	}
	for email, w := range want {
		if mixed[email] != w {
			t.Errorf("%+q: email_mixed_script = %v, want %v", email, mixed[email], w)
		}
	}
}

func TestSessionsExpire(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.signup("u@example.com", "U")
	u.do("GET", "/api/me", nil).want(http.StatusOK)
	e.clock.Advance(7*24*time.Hour + time.Second)
	u.do("GET", "/api/me", nil).want(http.StatusUnauthorized)
}

func TestSameAnswerForUnknownEmailAndWrongPassword(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.signup("known@example.com", "Known")
	wrong := e.anon().do("POST", "/api/auth/login", map[string]string{"email": "known@example.com", "password": "not the password"}).want(http.StatusUnauthorized)
	unknown := e.anon().do("POST", "/api/auth/login", map[string]string{"email": "nobody@example.com", "password": "not the password"}).want(http.StatusUnauthorized)
	if !bytes.Equal(wrong.body, unknown.body) {
		t.Fatalf("wrong password answers %q, unknown email %q: must be identical", wrong.body, unknown.body)
	}
}

func TestLoginThrottling(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.signup("victim@example.com", "Victim")
	try := func(pw string) *response {
		return e.anon().do("POST", "/api/auth/login", map[string]string{"email": "victim@example.com", "password": pw})
	}
	for i := 0; i < 5; i++ {
		try("guess").want(http.StatusUnauthorized)
	}
	var waits []int
	for i := 0; i < 3; i++ {
		res := try(password) // even the right password is refused while locked
		res.want(http.StatusTooManyRequests)
		if res.code() != "throttled" {
			t.Fatalf("code = %q, want throttled", res.code())
		}
		secs, err := strconv.Atoi(res.header.Get("Retry-After"))
		if err != nil || secs < 1 {
			t.Fatalf("Retry-After = %q, want whole seconds ≥ 1", res.header.Get("Retry-After"))
		}
		waits = append(waits, secs)
		e.clock.Advance(time.Duration(secs) * time.Second)
		try("guess again").want(http.StatusUnauthorized)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] <= waits[i-1] {
			t.Fatalf("Retry-After did not grow: %v", waits)
		}
	}
	e.clock.Advance(time.Hour)
	try(password).want(http.StatusOK)
}

// TestHourlyCapAcrossAddresses: an attacker spreading guesses over many
// addresses and honouring every Retry-After still gets at most 100 answers
// other than 429 per account per hour.
func TestHourlyCapAcrossAddresses(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.signup("victim@example.com", "Victim")
	start := e.clock.Now()
	var answered []time.Time // times of non-429 answers
	for i := 0; e.clock.Now().Sub(start) < 2*time.Hour; i++ {
		req := httptest.NewRequest("POST", "/api/auth/login", strings.NewReader(`{"email":"victim@example.com","password":"guess"}`))
		req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusTooManyRequests:
			secs, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
			e.clock.Advance(time.Duration(secs) * time.Second)
		case http.StatusUnauthorized:
			answered = append(answered, e.clock.Now())
			e.clock.Advance(time.Second)
		default:
			t.Fatalf("attempt %d answered %d %s", i, rec.Code, rec.Body)
		}
	}
	for i := range answered {
		n := 0
		for j := i; j < len(answered) && answered[j].Sub(answered[i]) < time.Hour; j++ {
			n++
		}
		if n > 100 {
			t.Fatalf("%d failed attempts answered within an hour of %v, want ≤ 100", n, answered[i])
		}
	}
	if len(answered) < 10 {
		t.Fatalf("only %d attempts answered in two hours: the throttle should slow, not stop, a patient caller", len(answered))
	}
}

// TestOthersFailuresDoNotLockOneOut: many people behind one address (a
// proxy, a NAT): one of them failing on bob until bob is locked does not
// keep alice, from the same address, out.
func TestOthersFailuresDoNotLockOneOut(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.signup("alice@example.com", "Alice")
	e.signup("bob@example.com", "Bob")
	login := func(email, pw string) int {
		body := fmt.Sprintf(`{"email":%q,"password":%q}`, email, pw)
		req := httptest.NewRequest("POST", "/api/auth/login", strings.NewReader(body))
		req.RemoteAddr = "192.0.2.10:4711"
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)
		return rec.Code
	}
	for range 5 {
		if got := login("bob@example.com", "guess"); got != http.StatusUnauthorized {
			t.Fatalf("bob's failed login = %d, want 401", got)
		}
	}
	if got := login("bob@example.com", password); got != http.StatusTooManyRequests {
		t.Fatalf("bob's login after 5 failures = %d, want 429", got)
	}
	if got := login("alice@example.com", password); got != http.StatusOK {
		t.Fatalf("alice's login from the same address = %d, want 200", got)
	}
}

func TestDisableEndsSessionsAndTokens(t *testing.T) {
	e := newEnv(t, envOptions{})
	admin := e.signup("admin@example.com", "Admin")
	bob := e.signup("bob@example.com", "Bob")
	second := &client{e: e, cookie: loginCookie(t, e, "bob@example.com")}
	var tok api.TokenView
	bob.do("POST", "/api/tokens", map[string]string{"name": "script"}).want(http.StatusCreated).decode(&tok)
	script := &client{e: e, bearer: tok.Token}
	script.do("GET", "/api/me", nil).want(http.StatusOK)

	admin.do("POST", "/api/users/"+admin.user.ID+"/disable", nil).want(http.StatusConflict)
	admin.do("POST", "/api/users/"+bob.user.ID+"/disable", nil).want(http.StatusOK)
	for _, c := range []*client{bob, second, script} {
		c.do("GET", "/api/me", nil).want(http.StatusUnauthorized)
	}
	e.anon().do("POST", "/api/auth/login", map[string]string{"email": "bob@example.com", "password": password}).want(http.StatusUnauthorized)

	admin.do("POST", "/api/users/"+bob.user.ID+"/enable", nil).want(http.StatusOK)
	bob.do("GET", "/api/me", nil).want(http.StatusUnauthorized) // sessions stay ended
	script.do("GET", "/api/me", nil).want(http.StatusOK)
	loginCookie(t, e, "bob@example.com")
}

func TestAPITokens(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.signup("u@example.com", "U")
	other := e.signup("o@example.com", "O")
	var tok api.TokenView
	u.do("POST", "/api/tokens", map[string]string{"name": "deploy"}).want(http.StatusCreated).decode(&tok)
	if !strings.HasPrefix(tok.Token, "cat_") {
		t.Fatalf("token = %q, want the cat_ prefix", tok.Token)
	}
	script := &client{e: e, bearer: tok.Token}
	script.do("POST", "/api/agents", map[string]string{"name": "from-a-script"}).want(http.StatusCreated)

	var listed api.List[api.TokenView]
	u.do("GET", "/api/tokens", nil).want(http.StatusOK).decode(&listed)
	if len(listed.Items) != 1 || listed.Items[0].Token != "" || listed.Items[0].LastUsedAt == nil {
		t.Fatalf("tokens = %+v, want one, without its secret, with a last use", listed.Items)
	}
	other.do("DELETE", "/api/tokens/"+tok.ID, nil).want(http.StatusNotFound)
	script.do("GET", "/api/me", nil).want(http.StatusOK)
	u.do("DELETE", "/api/tokens/"+tok.ID, nil).want(http.StatusNoContent)
	script.do("GET", "/api/me", nil).want(http.StatusUnauthorized)

	for _, h := range []string{"Basic dTpw", "Bearer", "Bearer cat_short", "bearer " + tok.Token} {
		req, _ := http.NewRequest("GET", e.srv.URL+"/api/me", nil)
		req.Header.Set("Authorization", h)
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q = %d, want 401", h, res.StatusCode)
		}
	}
}

func TestSignupModes(t *testing.T) {
	t.Run("closed", func(t *testing.T) {
		e := newEnv(t, envOptions{signup: "closed"})
		res := e.anon().do("POST", "/api/auth/signup", map[string]string{"email": "a@example.com", "name": "A", "password": password}).want(http.StatusForbidden)
		if !strings.Contains(string(res.body), "closed") {
			t.Errorf("closed signup says %s, want it to say signup is closed", res.body)
		}
	})
	t.Run("invite", func(t *testing.T) {
		e := newEnv(t, envOptions{signup: "invite"})
		// The first admin comes from the command line in invite mode.
		if _, err := e.api.Accounts().CreateUser(context.Background(), "admin@example.com", "Admin", password, true); err != nil {
			t.Fatal(err)
		}
		admin := &client{e: e, cookie: loginCookie(t, e, "admin@example.com")}
		signup := func(email, invite string) *response {
			return e.anon().do("POST", "/api/auth/signup", map[string]string{"email": email, "name": "N", "password": password, "invite": invite})
		}
		signup("a@example.com", "").want(http.StatusForbidden)
		signup("a@example.com", "cin_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").want(http.StatusForbidden)
		var inv api.InviteView
		admin.do("POST", "/api/invites", nil).want(http.StatusCreated).decode(&inv)
		signup("a@example.com", inv.Token).want(http.StatusCreated)
		signup("b@example.com", inv.Token).want(http.StatusForbidden) // single use

		admin.do("POST", "/api/invites", nil).want(http.StatusCreated).decode(&inv)
		e.clock.Advance(8 * 24 * time.Hour)
		signup("c@example.com", inv.Token).want(http.StatusForbidden) // expired
	})
	t.Run("unknown mode", func(t *testing.T) {
		if _, err := newAccountsForMode("sometimes"); err == nil {
			t.Fatal("signup mode \"sometimes\" accepted, want an error")
		}
	})
}

func TestCrossSiteRequestsRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.signup("u@example.com", "U")
	send := func(header, value string) int {
		req, _ := http.NewRequest("POST", e.srv.URL+"/api/agents", strings.NewReader(`{"name":"x"}`))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(&http.Cookie{Name: api.CookieName, Value: u.cookie})
		if header != "" {
			req.Header.Set(header, value)
		}
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	tests := []struct {
		name, header, value string
		want                int
	}{
		{"cross-site fetch", "Sec-Fetch-Site", "cross-site", http.StatusForbidden},
		{"same-site other origin", "Sec-Fetch-Site", "same-site", http.StatusForbidden},
		{"foreign Origin", "Origin", "https://evil.example", http.StatusForbidden},
		{"same origin", "Sec-Fetch-Site", "same-origin", http.StatusCreated},
		{"no browser headers (curl)", "", "", http.StatusCreated},
	}
	for _, tt := range tests {
		if got := send(tt.header, tt.value); got != tt.want {
			t.Errorf("%s: POST with %s=%q = %d, want %d", tt.name, tt.header, tt.value, got, tt.want)
		}
	}
}

// TestPasswordsUseOWASPParameters checks the hash the production
// parameters store.
func TestPasswordsUseOWASPParameters(t *testing.T) {
	e := newEnv(t, envOptions{params: auth.DefaultParams})
	e.signup("u@example.com", "U")
	var hash string
	if err := e.rawDB(t).QueryRow(`SELECT password_hash FROM users`).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("stored hash %q does not use argon2id with m=19456,t=2,p=1", hash)
	}
	loginCookie(t, e, "u@example.com")
}

func TestSignupThrottledPerAddress(t *testing.T) {
	e := newEnv(t, envOptions{})
	signup := func(i int, addr string) *httptest.ResponseRecorder {
		body := fmt.Sprintf(`{"email":"u%d@example.com","name":"U","password":%q}`, i, password)
		req := httptest.NewRequest("POST", "/api/auth/signup", strings.NewReader(body))
		req.RemoteAddr = addr + ":5555"
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)
		return rec
	}
	for i := 0; i < 19; i++ {
		if rec := signup(i, "192.0.2.1"); rec.Code != http.StatusCreated {
			t.Fatalf("signup %d = %d %s, want 201", i, rec.Code, rec.Body)
		}
	}
	signup(19, "192.0.2.1") // the 20th starts the backoff
	rec := signup(20, "192.0.2.1")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("signup 21 = %d (Retry-After %q), want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := signup(21, "192.0.2.2"); rec.Code != http.StatusCreated {
		t.Fatalf("signup from another address = %d, want 201", rec.Code)
	}
	e.clock.Advance(time.Hour)
	if rec := signup(22, "192.0.2.1"); rec.Code != http.StatusCreated {
		t.Fatalf("signup an hour later = %d %s, want 201", rec.Code, rec.Body)
	}
}

func TestLoginRefusesWhatCannotBeAPassword(t *testing.T) {
	e := newEnv(t, envOptions{})
	long := strings.Repeat("p", 1024)
	e.anon().do("POST", "/api/auth/signup", map[string]string{"email": "long@example.com", "name": "L", "password": long}).want(http.StatusCreated)
	login := func(email, pw string) *response {
		return e.anon().do("POST", "/api/auth/login", map[string]string{"email": email, "password": pw})
	}
	login("long@example.com", long).want(http.StatusOK)
	// Longer than any stored password: wrong, even though it starts right.
	wrong := login("long@example.com", long+"x").want(http.StatusUnauthorized)
	malformed := login("not an email", "whatever-password").want(http.StatusUnauthorized)
	if !bytes.Equal(wrong.body, malformed.body) {
		t.Fatalf("answers differ: %s vs %s", wrong.body, malformed.body)
	}
	e.anon().do("POST", "/api/auth/signup", map[string]string{"email": "x@example.com", "name": "X", "password": long + "x"}).want(http.StatusBadRequest)
}
