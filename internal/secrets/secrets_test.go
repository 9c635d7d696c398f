package secrets

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral"
)

func TestLoadKeyFileCreatesPrivateFileOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), KeyFile)
	k1, created, err := LoadKeyFile(path)
	if err != nil || !created {
		t.Fatalf("LoadKeyFile(new) = created %v, %v; want a new key", created, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != KeySize {
		t.Fatalf("key file mode %04o size %d, want 0600 and %d", st.Mode().Perm(), st.Size(), KeySize)
	}
	raw, _ := os.ReadFile(path)
	if bytes.Equal(raw, make([]byte, KeySize)) {
		t.Fatal("the key file is all zeros")
	}
	k2, created, err := LoadKeyFile(path)
	if err != nil || created {
		t.Fatalf("LoadKeyFile(existing) = created %v, %v; want the same key reused", created, err)
	}
	ad := AD("test", "row")
	plain, err := k2.Open(k1.Seal([]byte("hello"), ad), ad)
	if err != nil || string(plain) != "hello" {
		t.Fatalf("a value sealed before the restart opens as %q, %v; want hello", plain, err)
	}
}

func TestLoadKeyFileRefuses(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, path string)
	}{
		{"readable by others", func(t *testing.T, path string) { writeKey(t, path, KeySize, 0o644) }},
		{"readable by the group", func(t *testing.T, path string) { writeKey(t, path, KeySize, 0o640) }},
		{"writable by others", func(t *testing.T, path string) { writeKey(t, path, KeySize, 0o602) }},
		{"too short", func(t *testing.T, path string) { writeKey(t, path, KeySize-1, 0o600) }},
		{"too long", func(t *testing.T, path string) { writeKey(t, path, KeySize+1, 0o600) }},
		{"empty (a crash during the first start)", func(t *testing.T, path string) { writeKey(t, path, 0, 0o600) }},
		{"a directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlink to a private key", func(t *testing.T, path string) {
			other := filepath.Join(t.TempDir(), "elsewhere.key")
			writeKey(t, other, KeySize, 0o600)
			if err := os.Symlink(other, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), KeyFile)
			c.setup(t, path)
			before, _ := os.Lstat(path)
			key, _, err := LoadKeyFile(path)
			if err == nil {
				t.Fatalf("LoadKeyFile = %v, nil; want a refusal", key)
			}
			var e *corral.Error
			if !errors.As(err, &e) || e.Code != corral.EINVALID || !strings.Contains(e.Message, path) {
				t.Fatalf("LoadKeyFile error = %#v, want invalid_input naming %s", err, path)
			}
			after, err := os.Lstat(path)
			if err != nil || after.Mode() != before.Mode() || after.Size() != before.Size() {
				t.Fatalf("the refused file was changed: before %v, after %v (%v)", before.Mode(), after, err)
			}
		})
	}
}

func writeKey(t *testing.T, path string, n int, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Repeat([]byte{7}, n), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func TestParseKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0xA5}, KeySize)
	const secretish = "not-a-key-but-do-not-echo-me"
	cases := []struct {
		name string
		in   string
		ok   bool
	}{
		{"padded base64", base64.StdEncoding.EncodeToString(raw), true},
		{"unpadded base64", base64.RawStdEncoding.EncodeToString(raw), true},
		{"with a trailing newline", base64.StdEncoding.EncodeToString(raw) + "\n", true},
		{"16 bytes", base64.StdEncoding.EncodeToString(raw[:16]), false},
		{"33 bytes", base64.StdEncoding.EncodeToString(append(raw, 1)), false},
		{"not base64", secretish, false},
		{"empty", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, err := ParseKey(c.in)
			if c.ok {
				if err != nil {
					t.Fatalf("ParseKey(%q) = %v", c.in, err)
				}
				fixed, _ := NewKey(raw)
				ad := AD("x")
				if _, err := fixed.Open(k.Seal([]byte("p"), ad), ad); err != nil {
					t.Fatalf("ParseKey(%q) gave another key than its bytes: %v", c.in, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseKey(%q) = nil error, want a refusal", c.in)
			}
			if c.in != "" && strings.Contains(err.Error(), strings.TrimSpace(c.in)) {
				t.Fatalf("ParseKey's error repeats the value: %v", err)
			}
		})
	}
}

func TestSealOpen(t *testing.T) {
	k := newTestKey(t)
	ad := AD("credential", "crd_1", "usr_1")
	plain := []byte("ghp_0123456789-the-secret")
	a, b := k.Seal(plain, ad), k.Seal(plain, ad)
	if bytes.Equal(a, b) {
		t.Fatal("two seals of one plaintext are equal: the nonce is not fresh")
	}
	if bytes.Contains(a, plain) {
		t.Fatal("the sealed value contains the plaintext")
	}
	got, err := k.Open(a, ad)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open(Seal(p)) = %q, %v; want %q", got, err, plain)
	}
	if got, err := k.Open(k.Seal(nil, ad), ad); err != nil || len(got) != 0 {
		t.Fatalf("Open(Seal(empty)) = %q, %v", got, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	k := newTestKey(t)
	ad := AD("credential", "crd_1", "usr_1")
	sealed := k.Seal([]byte("the secret"), ad)
	flip := func(i int) []byte {
		c := bytes.Clone(sealed)
		c[i] ^= 1
		return c
	}
	cases := []struct {
		name   string
		key    *Key
		sealed []byte
		ad     []byte
	}{
		{"a flipped ciphertext byte", k, flip(len(sealed) / 2), ad},
		{"a flipped tag byte", k, flip(len(sealed) - 1), ad},
		{"a flipped nonce byte", k, flip(3), ad},
		{"another version", k, flip(0), ad},
		{"truncated", k, sealed[:len(sealed)-1], ad},
		{"empty", k, nil, ad},
		{"another row's id", k, sealed, AD("credential", "crd_2", "usr_1")},
		{"another owner", k, sealed, AD("credential", "crd_1", "usr_2")},
		{"fields shifted across the boundary", k, sealed, AD("credential", "crd_1u", "sr_1")},
		{"another key", newTestKey(t), sealed, ad},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.key.Open(c.sealed, c.ad)
			if !errors.Is(err, ErrOpen) || got != nil {
				t.Fatalf("Open = %q, %v; want nil, ErrOpen", got, err)
			}
		})
	}
}

// TestKeyPrintsNothing: a Key logged or printed by mistake shows no byte of
// the key.
func TestKeyPrintsNothing(t *testing.T) {
	raw := bytes.Repeat([]byte("K"), KeySize)
	k, err := NewKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("oops", "key", k)
	for _, out := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k), logged.String()} {
		if strings.Contains(out, "KKKK") || strings.Contains(out, "0x4b, 0x4b") || strings.Contains(out, "75, 75") {
			t.Fatalf("a printed Key shows its bytes: %s", out)
		}
	}
}

func newTestKey(t *testing.T) *Key {
	t.Helper()
	k, _, err := LoadKeyFile(filepath.Join(t.TempDir(), KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestDigest: the same key gives the same digest on every server; another
// key, another purpose or other data gives another, and none is the plain
// hash a guesser could compute without the key.
func TestDigest(t *testing.T) {
	newKey := func(b byte) *Key {
		k, err := NewKey(bytes.Repeat([]byte{b}, KeySize))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, again, other := newKey(1), newKey(1), newKey(2)
	base := a.Digest("throttle login", []byte("acct:a@example.com"))
	if !bytes.Equal(base, again.Digest("throttle login", []byte("acct:a@example.com"))) {
		t.Fatal("two servers with one key disagree on a digest")
	}
	plain := sha256.Sum256([]byte("acct:a@example.com"))
	for _, tc := range []struct {
		name string
		got  []byte
	}{
		{"another key", other.Digest("throttle login", []byte("acct:a@example.com"))},
		{"another purpose", a.Digest("throttle spray", []byte("acct:a@example.com"))},
		{"other data", a.Digest("throttle login", []byte("acct:b@example.com"))},
		{"the plain hash", plain[:]},
	} {
		if bytes.Equal(tc.got, base) {
			t.Errorf("%s gives the same digest", tc.name)
		}
	}
}
