package auth

import (
	"strings"
	"testing"

	"corral"
)

// tiny are the cheapest parameters HashPassword accepts, for tests where
// the cost would only slow the suite down.
var tiny = Params{Memory: 8, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 16}

func mustHash(t testing.TB, password string, p Params) string {
	t.Helper()
	h, err := HashPassword(password, p)
	if err != nil {
		t.Fatalf("HashPassword(%q, %+v): %v", password, p, err)
	}
	return h
}

func TestHashPasswordDefaultParams(t *testing.T) {
	h := mustHash(t, "correct horse battery staple", DefaultParams)
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("HashPassword(DefaultParams) = %q, want prefix $argon2id$v=19$m=19456,t=2,p=1$", h)
	}
	ok, rehash, err := VerifyPassword("correct horse battery staple", h)
	if !ok || rehash || err != nil {
		t.Errorf("VerifyPassword(right, %q) = %v, %v, %v; want true, false, nil", h, ok, rehash, err)
	}
	ok, rehash, err = VerifyPassword("correct horse battery stapler", h)
	if ok || rehash || err != nil {
		t.Errorf("VerifyPassword(wrong, %q) = %v, %v, %v; want false, false, nil", h, ok, rehash, err)
	}
}

func TestVerifyPassword(t *testing.T) {
	tests := []struct {
		name     string
		password string
		try      string
		wantOK   bool
	}{
		{"right", "hunter2", "hunter2", true},
		{"wrong", "hunter2", "hunter3", false},
		{"prefix of it", "hunter2", "hunter", false},
		{"case differs", "hunter2", "Hunter2", false},
		{"empty against non-empty", "hunter2", "", false},
		{"empty password", "", "", true},
		{"unicode", "pässwörd ✓", "pässwörd ✓", true},
		{"long", strings.Repeat("x", 1000), strings.Repeat("x", 1000), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustHash(t, tt.password, tiny)
			ok, _, err := VerifyPassword(tt.try, h)
			if ok != tt.wantOK || err != nil {
				t.Errorf("VerifyPassword(%q, hash of %q) = %v, %v; want %v, nil", tt.try, tt.password, ok, err, tt.wantOK)
			}
		})
	}
}

func TestHashPasswordSaltsDiffer(t *testing.T) {
	a, b := mustHash(t, "same", tiny), mustHash(t, "same", tiny)
	if a == b {
		t.Fatalf("two hashes of the same password are equal: %q", a)
	}
	pa, sa, _, err := decodePHC(a)
	if err != nil {
		t.Fatal(err)
	}
	_, sb, _, err := decodePHC(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(sa) == string(sb) {
		t.Errorf("two hashes share the salt %x", sa)
	}
	if pa != tiny {
		t.Errorf("decoded params = %+v, want %+v", pa, tiny)
	}
}

func TestNeedsRehash(t *testing.T) {
	d := DefaultParams
	tests := []struct {
		name string
		p    Params
		want bool
	}{
		{"tiny", tiny, true},
		{"less memory", Params{Memory: d.Memory - 1024, Time: d.Time, Threads: 1, SaltLen: d.SaltLen, KeyLen: d.KeyLen}, true},
		{"fewer passes", Params{Memory: d.Memory, Time: 1, Threads: 1, SaltLen: d.SaltLen, KeyLen: d.KeyLen}, true},
		{"shorter key", Params{Memory: d.Memory, Time: d.Time, Threads: 1, SaltLen: d.SaltLen, KeyLen: 16}, true},
		{"shorter salt", Params{Memory: d.Memory, Time: d.Time, Threads: 1, SaltLen: 8, KeyLen: d.KeyLen}, true},
		{"default", d, false},
		{"more passes", Params{Memory: d.Memory, Time: 3, Threads: 1, SaltLen: d.SaltLen, KeyLen: d.KeyLen}, false},
		{"more lanes", Params{Memory: d.Memory, Time: d.Time, Threads: 2, SaltLen: d.SaltLen, KeyLen: d.KeyLen}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustHash(t, "pw", tt.p)
			ok, rehash, err := VerifyPassword("pw", h)
			if !ok || rehash != tt.want || err != nil {
				t.Errorf("VerifyPassword(%q) = %v, %v, %v; want true, %v, nil", h, ok, rehash, err, tt.want)
			}
		})
	}
}

func TestVerifyPasswordMalformed(t *testing.T) {
	// A well-formed string (the hash of no known password); each case
	// differs from it in one way.
	const (
		salt = "c2FsdHNhbHRzYWx0c2FsdA"                      // 16 bytes
		key  = "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U" // 32 bytes
	)
	valid := "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$" + key
	if _, _, _, err := decodePHC(valid); err != nil {
		t.Fatalf("decodePHC(%q) = %v; the base case must be valid", valid, err)
	}
	tests := []struct {
		name    string
		encoded string
	}{
		{"empty", ""},
		{"argon2i", "$argon2i$v=19$m=8,t=1,p=1$" + salt + "$" + key},
		{"argon2d", "$argon2d$v=19$m=8,t=1,p=1$" + salt + "$" + key},
		{"bcrypt", "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"},
		{"no leading dollar", "argon2id$v=19$m=8,t=1,p=1$" + salt + "$" + key},
		{"trailing dollar", valid + "$"},
		{"missing version", "$argon2id$m=8,t=1,p=1$" + salt + "$" + key},
		{"missing params", "$argon2id$v=19$" + salt + "$" + key},
		{"missing salt", "$argon2id$v=19$m=8,t=1,p=1$" + key},
		{"missing key", "$argon2id$v=19$m=8,t=1,p=1$" + salt},
		{"empty salt", "$argon2id$v=19$m=8,t=1,p=1$$" + key},
		{"empty key", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$"},
		{"v=18", "$argon2id$v=18$m=8,t=1,p=1$" + salt + "$" + key},
		{"v=16", "$argon2id$v=16$m=8,t=1,p=1$" + salt + "$" + key},
		{"v=019", "$argon2id$v=019$m=8,t=1,p=1$" + salt + "$" + key},
		{"version word", "$argon2id$version=19$m=8,t=1,p=1$" + salt + "$" + key},
		{"m=0", "$argon2id$v=19$m=0,t=1,p=1$" + salt + "$" + key},
		{"m below 8 per lane", "$argon2id$v=19$m=15,t=1,p=2$" + salt + "$" + key},
		{"m over 1 GiB", "$argon2id$v=19$m=1048577,t=1,p=1$" + salt + "$" + key},
		{"m 4 GiB", "$argon2id$v=19$m=4294967295,t=1,p=1$" + salt + "$" + key},
		{"m over uint32", "$argon2id$v=19$m=4294967296,t=1,p=1$" + salt + "$" + key},
		{"m negative", "$argon2id$v=19$m=-8,t=1,p=1$" + salt + "$" + key},
		{"m plus sign", "$argon2id$v=19$m=+8,t=1,p=1$" + salt + "$" + key},
		{"m leading zero", "$argon2id$v=19$m=08,t=1,p=1$" + salt + "$" + key},
		{"m hex", "$argon2id$v=19$m=0x8,t=1,p=1$" + salt + "$" + key},
		{"m space", "$argon2id$v=19$m= 8,t=1,p=1$" + salt + "$" + key},
		{"m empty", "$argon2id$v=19$m=,t=1,p=1$" + salt + "$" + key},
		{"t=0", "$argon2id$v=19$m=8,t=0,p=1$" + salt + "$" + key},
		{"t=101", "$argon2id$v=19$m=8,t=101,p=1$" + salt + "$" + key},
		{"p=0", "$argon2id$v=19$m=8,t=1,p=0$" + salt + "$" + key},
		{"p=256", "$argon2id$v=19$m=4096,t=1,p=256$" + salt + "$" + key},
		{"params out of order", "$argon2id$v=19$t=1,m=8,p=1$" + salt + "$" + key},
		{"param missing", "$argon2id$v=19$m=8,t=1$" + salt + "$" + key},
		{"param extra", "$argon2id$v=19$m=8,t=1,p=1,x=1$" + salt + "$" + key},
		{"param keyid", "$argon2id$v=19$m=8,t=1,p=1,keyid=abc$" + salt + "$" + key},
		{"bad base64 salt", "$argon2id$v=19$m=8,t=1,p=1$c2Fsd!NhbHRzYWx0c2FsdA$" + key},
		{"bad base64 key", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2*"},
		{"url base64 key", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2_"},
		{"padded salt", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "==$" + key},
		{"non-canonical trailing bits", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2X"},
		{"newline in key", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$a2V5a2V5a2V5a2V5a2V5\na2V5a2V5a2V5a2V5a2V5a2U"},
		{"trailing newline", valid + "\n"},
		{"short salt", "$argon2id$v=19$m=8,t=1,p=1$c2FsdA$" + key},
		{"short key", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$a2V5a2V5a2V5a2U"},
		{"key 15 bytes", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$a2V5a2V5a2V5a2V5a2V5"},
		{"huge key", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$" + strings.Repeat("AAAA", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, rehash, err := VerifyPassword("pw", tt.encoded)
			if ok || rehash || err == nil {
				t.Fatalf("VerifyPassword(%q) = %v, %v, %v; want false, false, an error", tt.encoded, ok, rehash, err)
			}
			t.Log(err)
			if code := corral.ErrorCode(err); code != corral.EINTERNAL {
				t.Errorf("ErrorCode(%v) = %q, want %q", err, code, corral.EINTERNAL)
			}
			if strings.Contains(err.Error(), salt) || strings.Contains(err.Error(), key) {
				t.Errorf("error %q quotes the stored hash", err)
			}
		})
	}
}

func TestHashPasswordRejectsParams(t *testing.T) {
	d := DefaultParams
	tests := []struct {
		name string
		p    Params
	}{
		{"zero", Params{}},
		{"no threads", Params{Memory: d.Memory, Time: d.Time, SaltLen: d.SaltLen, KeyLen: d.KeyLen}},
		{"no time", Params{Memory: d.Memory, Threads: 1, SaltLen: d.SaltLen, KeyLen: d.KeyLen}},
		{"no memory", Params{Time: d.Time, Threads: 1, SaltLen: d.SaltLen, KeyLen: d.KeyLen}},
		{"memory over 1 GiB", Params{Memory: 1<<20 + 1, Time: d.Time, Threads: 1, SaltLen: d.SaltLen, KeyLen: d.KeyLen}},
		{"time over 100", Params{Memory: d.Memory, Time: 101, Threads: 1, SaltLen: d.SaltLen, KeyLen: d.KeyLen}},
		{"short salt", Params{Memory: d.Memory, Time: d.Time, Threads: 1, SaltLen: 4, KeyLen: d.KeyLen}},
		{"short key", Params{Memory: d.Memory, Time: d.Time, Threads: 1, SaltLen: d.SaltLen, KeyLen: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if h, err := HashPassword("pw", tt.p); err == nil {
				t.Errorf("HashPassword(%+v) = %q, nil; want an error", tt.p, h)
			}
		})
	}
}

func TestDummyVerify(t *testing.T) {
	DummyVerify("anything")
	h := dummyHash()
	if h != dummyHash() {
		t.Errorf("dummyHash changed between calls")
	}
	p, _, _, err := decodePHC(h)
	if err != nil {
		t.Fatalf("decodePHC(dummyHash()) = %v", err)
	}
	if p != DefaultParams {
		t.Errorf("dummy hash params = %+v, want DefaultParams %+v", p, DefaultParams)
	}
}

func BenchmarkHashPassword(b *testing.B) {
	for b.Loop() {
		if _, err := HashPassword("correct horse battery staple", DefaultParams); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyPassword(b *testing.B) {
	h := mustHash(b, "correct horse battery staple", DefaultParams)
	for b.Loop() {
		VerifyPassword("correct horse battery staple", h)
	}
}
