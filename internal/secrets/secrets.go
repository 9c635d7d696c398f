// Package secrets keeps Corral's secrets at rest: the server's secret key,
// loaded from a file in the data directory (created on first start) or
// given in the environment, and the AEAD that seals a secret to the one
// database row it belongs to.
//
// The key lives apart from the database on purpose: a copy of corral.db
// (a backup, a stolen disk image of the database alone) holds ciphertext
// only. Nothing here logs, and no error carries key or plaintext bytes.
package secrets

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	"corral"
)

// KeySize is the length of the server's secret key in bytes.
const KeySize = chacha20poly1305.KeySize

// KeyFile is the name of the key file in the data directory.
const KeyFile = "secret.key"

// version is the first byte of every sealed value, so a later format (a
// rotated key, another cipher) can be told apart from this one.
const version = 1

// Key seals and opens secrets. It keeps only the AEAD built from the key,
// never the key's bytes in a field of its own, and prints as a placeholder,
// so logging a value that holds a Key by mistake shows nothing of it.
type Key struct {
	aead cipher.AEAD
	mac  []byte // a subkey of the key's, for Digest alone
}

// NewKey returns a Key for raw, which must be KeySize bytes. The AEAD
// copies raw: the caller may (and should) zero it afterwards.
func NewKey(raw []byte) (*Key, error) {
	if len(raw) != KeySize {
		return nil, corral.Errorf(corral.EINVALID, "the secret key must be %d bytes, not %d", KeySize, len(raw))
	}
	aead, err := chacha20poly1305.NewX(raw)
	if err != nil {
		return nil, corral.Internal("secrets.NewKey", err)
	}
	mac, err := hkdf.Key(sha256.New, raw, nil, "corral keyed digests", sha256.Size)
	if err != nil {
		return nil, corral.Internal("secrets.NewKey", err)
	}
	return &Key{aead: aead, mac: mac}, nil
}

// ParseKey reads a key given as the base64 (standard alphabet, padded or
// not) of KeySize bytes, as in CORRAL_SECRET_KEY. Its errors never repeat
// the value.
func ParseKey(b64 string) (*Key, error) {
	s := strings.TrimSpace(b64)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, corral.Errorf(corral.EINVALID, "CORRAL_SECRET_KEY is not base64: give the base64 of %d random bytes (head -c %d /dev/urandom | base64)", KeySize, KeySize)
	}
	defer clear(raw)
	if len(raw) != KeySize {
		return nil, corral.Errorf(corral.EINVALID, "CORRAL_SECRET_KEY decodes to %d bytes, want %d (head -c %d /dev/urandom | base64)", len(raw), KeySize, KeySize)
	}
	return NewKey(raw)
}

// LoadKeyFile returns the key in the file at path, creating the file with
// KeySize random bytes, mode 0600, when it does not exist. It fails closed:
// a file that is not a regular file, that anyone but its owner may read or
// write, or that does not hold exactly KeySize bytes is refused with a
// message saying what to do, never repaired or replaced (replacing it would
// make every stored credential unreadable). created reports a new file.
func LoadKeyFile(path string) (key *Key, created bool, err error) {
	const op = "secrets.LoadKeyFile"
	key, err = createKeyFile(path)
	switch {
	case err == nil:
		return key, true, nil
	case !errors.Is(err, os.ErrExist):
		return nil, false, err
	}
	// O_NOFOLLOW: a symlink planted in place of the key would make us
	// read, and trust, a file someone else chose.
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, false, &corral.Error{Code: corral.EINVALID, Op: op, Err: err,
			Message: fmt.Sprintf("cannot open the secret key file %s (it must be a regular file, not a link)", path)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, corral.Internal(op, err)
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, false, corral.Errorf(corral.EINVALID, "the secret key file %s is not a regular file", path)
	case st.Mode().Perm()&0o077 != 0:
		return nil, false, corral.Errorf(corral.EINVALID,
			"the secret key file %s has mode %04o: others may read or change it. Make it private (chmod 600 %s) and consider the stored credentials exposed",
			path, st.Mode().Perm(), path)
	case st.Size() != KeySize:
		return nil, false, corral.Errorf(corral.EINVALID,
			"the secret key file %s holds %d bytes, want %d: restore it from a backup (a new key cannot open the stored credentials; if there are none, delete the file and a new one is made)",
			path, st.Size(), KeySize)
	}
	raw := make([]byte, KeySize)
	defer clear(raw)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, false, corral.Internal(op, err)
	}
	key, err = NewKey(raw)
	return key, false, err
}

// createKeyFile makes a new key file at path. O_EXCL: two starts racing, or
// a file made between a check and a create, can never both write a key; the
// loser reads the winner's. A failed write removes the partial file.
func createKeyFile(path string) (*Key, error) {
	const op = "secrets.createKeyFile"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, err
		}
		return nil, &corral.Error{Code: corral.EINVALID, Op: op, Err: err,
			Message: fmt.Sprintf("cannot create the secret key file %s", path)}
	}
	raw := make([]byte, KeySize)
	defer clear(raw)
	rand.Read(raw) // never fails (crypto/rand panics rather than return short)
	_, err = f.Write(raw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, corral.Internal(op, err)
	}
	return NewKey(raw)
}

// Seal encrypts plaintext for the row that ad names (see AD). Each call
// draws a new random 24-byte nonce: XChaCha20's nonce is large enough that
// random nonces never collide in practice, so no counter must survive
// restarts. The result is version || nonce || ciphertext and tag.
func (k *Key) Seal(plaintext, ad []byte) []byte {
	out := make([]byte, 1+chacha20poly1305.NonceSizeX, 1+chacha20poly1305.NonceSizeX+len(plaintext)+chacha20poly1305.Overhead)
	out[0] = version
	rand.Read(out[1:]) // never fails
	return k.aead.Seal(out, out[1:], plaintext, ad)
}

// ErrOpen is the cause of every failure to open a sealed value: a wrong
// key, a tampered or truncated value, or one sealed for another row. The
// three are indistinguishable by design.
var ErrOpen = errors.New("the sealed value does not open with this key for this row")

// Open decrypts what Seal returned for the same ad. The plaintext is a new
// slice the caller owns and should zero when done.
func (k *Key) Open(sealed, ad []byte) ([]byte, error) {
	if len(sealed) < 1+chacha20poly1305.NonceSizeX+chacha20poly1305.Overhead || sealed[0] != version {
		return nil, ErrOpen
	}
	nonce, box := sealed[1:1+chacha20poly1305.NonceSizeX], sealed[1+chacha20poly1305.NonceSizeX:]
	plain, err := k.aead.Open(nil, nonce, box, ad)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// AD builds additional data from the fields that name a row, each prefixed
// by its length so that no two different lists of fields give the same
// bytes ("ab","c" and "a","bc" differ). The first field should name the
// kind of row, so a value sealed for one table cannot open in another.
func AD(fields ...string) []byte {
	var b []byte
	for _, f := range fields {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

// Digest is a keyed hash of data for purpose: HMAC-SHA-256 under a
// subkey derived from the key (HKDF-SHA-256), so that a value kept only as
// its digest (a client address, an email) cannot be found again by trying
// every candidate, as a plain hash of it could, without the key. The same
// key gives the same digest on every server that shares it.
func (k *Key) Digest(purpose string, data []byte) []byte {
	m := hmac.New(sha256.New, k.mac)
	m.Write(AD(purpose))
	m.Write(data)
	return m.Sum(nil)
}

// String hides the key from fmt.
func (k *Key) String() string { return "secrets.Key(hidden)" }

// GoString hides the key from %#v.
func (k *Key) GoString() string { return k.String() }

// LogValue hides the key from slog.
func (k *Key) LogValue() slog.Value { return slog.StringValue(k.String()) }
