package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"

	"corral"
)

// Params are the argon2id cost parameters of a password hash.
type Params struct {
	Memory  uint32 // KiB
	Time    uint32 // passes over memory
	Threads uint8
	SaltLen uint32 // bytes
	KeyLen  uint32 // bytes
}

// DefaultParams are OWASP's minimum for argon2id: 19 MiB, 2 passes, 1 lane.
// Hashes with weaker parameters are reported as needing a rehash.
var DefaultParams = Params{Memory: 19456, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}

// Bounds on parameters. A stored hash is data: a corrupt or planted one must
// not make a login allocate gigabytes or spin for minutes, so parameters
// outside these bounds are refused before any work is done.
const (
	maxMemory  = 1 << 20 // KiB, 1 GiB
	maxTime    = 100
	minSaltLen = 8 // the argon2 specification's minimum
	maxSaltLen = 64
	minKeyLen  = 16
	maxKeyLen  = 64
)

// b64 is the encoding of the reference implementation's PHC strings:
// standard alphabet, no padding.
var b64 = base64.RawStdEncoding.Strict()

func (p Params) validate() error {
	switch {
	case p.Threads < 1:
		return errors.New("parallelism below 1")
	case p.Memory < 8*uint32(p.Threads):
		return errors.New("memory below 8 KiB per lane")
	case p.Memory > maxMemory:
		return errors.New("memory above 1 GiB")
	case p.Time < 1:
		return errors.New("time below 1")
	case p.Time > maxTime:
		return fmt.Errorf("time above %d", maxTime)
	case p.SaltLen < minSaltLen || p.SaltLen > maxSaltLen:
		return fmt.Errorf("salt length %d outside [%d, %d]", p.SaltLen, minSaltLen, maxSaltLen)
	case p.KeyLen < minKeyLen || p.KeyLen > maxKeyLen:
		return fmt.Errorf("key length %d outside [%d, %d]", p.KeyLen, minKeyLen, maxKeyLen)
	}
	return nil
}

// weakerThan reports whether p costs an attacker less than q in any
// dimension that matters. Threads are not compared: more lanes over the
// same memory do not make a guess cheaper.
func (p Params) weakerThan(q Params) bool {
	return p.Memory < q.Memory || p.Time < q.Time || p.SaltLen < q.SaltLen || p.KeyLen < q.KeyLen
}

// HashPassword hashes password with argon2id and a fresh random salt, and
// returns the PHC string $argon2id$v=19$m=<KiB>,t=<time>,p=<threads>$<salt>$<key>.
// The only error is parameters outside the bounds VerifyPassword accepts.
func HashPassword(password string, p Params) (string, error) {
	if err := p.validate(); err != nil {
		return "", corral.Internal("auth.HashPassword", fmt.Errorf("invalid argon2 parameters: %w", err))
	}
	salt := make([]byte, p.SaltLen)
	rand.Read(salt) // never fails: crypto/rand crashes the program rather than return short
	key := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	return encodePHC(p, salt, key), nil
}

func encodePHC(p Params, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// VerifyPassword reports whether password matches the PHC string encoded.
//
// A malformed string, another algorithm or version, or parameters outside
// sane bounds are an error (the stored hash is corrupt), never a match.
// needsRehash is reported only with a match, since only then can the caller
// rehash: it is true when the stored parameters are weaker than
// DefaultParams.
func VerifyPassword(password, encoded string) (ok bool, needsRehash bool, err error) {
	p, salt, key, err := decodePHC(encoded)
	if err != nil {
		return false, false, corral.Internal("auth.VerifyPassword", fmt.Errorf("malformed password hash: %w", err))
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	if subtle.ConstantTimeCompare(got, key) != 1 {
		return false, false, nil
	}
	return true, p.weakerThan(DefaultParams), nil
}

// decodePHC parses an argon2id PHC string strictly: exactly the fields
// HashPassword writes, in its order, with canonical numbers and base64.
// Error messages never quote the input, which is a secret's hash.
func decodePHC(s string) (p Params, salt, key []byte, err error) {
	f := strings.Split(s, "$")
	if len(f) != 6 || f[0] != "" {
		return p, nil, nil, errors.New("not five $-separated fields")
	}
	if f[1] != "argon2id" {
		return p, nil, nil, errors.New("algorithm is not argon2id")
	}
	v, ok := strings.CutPrefix(f[2], "v=")
	if !ok {
		return p, nil, nil, errors.New("no version")
	}
	if n, err := parseUint(v, 32); err != nil || n != argon2.Version {
		return p, nil, nil, errors.New("version is not 19")
	}
	params := strings.Split(f[3], ",")
	if len(params) != 3 {
		return p, nil, nil, errors.New("parameters are not m,t,p")
	}
	var vals [3]uint64
	for i, name := range []string{"m", "t", "p"} {
		s, ok := strings.CutPrefix(params[i], name+"=")
		if !ok {
			return p, nil, nil, errors.New("parameters are not m,t,p")
		}
		bits := 32
		if name == "p" {
			bits = 8
		}
		if vals[i], err = parseUint(s, bits); err != nil {
			return p, nil, nil, fmt.Errorf("parameter %s: %w", name, err)
		}
	}
	if salt, err = decodeB64(f[4]); err != nil {
		return p, nil, nil, fmt.Errorf("salt: %w", err)
	}
	if key, err = decodeB64(f[5]); err != nil {
		return p, nil, nil, fmt.Errorf("key: %w", err)
	}
	p = Params{
		Memory:  uint32(vals[0]),
		Time:    uint32(vals[1]),
		Threads: uint8(vals[2]),
		SaltLen: uint32(len(salt)),
		KeyLen:  uint32(len(key)),
	}
	if err := p.validate(); err != nil {
		return p, nil, nil, err
	}
	return p, salt, key, nil
}

// parseUint accepts only the canonical decimal form: no sign, no leading
// zeros, no spaces.
func parseUint(s string, bits int) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil || strconv.FormatUint(n, 10) != s {
		return 0, errors.New("not a canonical decimal number")
	}
	return n, nil
}

// decodeB64 accepts only the canonical encoding. The decoder alone would
// skip embedded newlines.
func decodeB64(s string) ([]byte, error) {
	b, err := b64.DecodeString(s)
	if err != nil || b64.EncodeToString(b) != s {
		return nil, errors.New("not canonical unpadded base64")
	}
	return b, nil
}

// dummyHash is the hash DummyVerify checks against, made on first use so
// that importing the package costs nothing.
var dummyHash = sync.OnceValue(func() string {
	h, err := HashPassword("corral dummy password", DefaultParams)
	if err != nil {
		panic("auth: DefaultParams are invalid: " + err.Error())
	}
	return h
})

// DummyVerify costs what VerifyPassword costs for a hash made with
// DefaultParams, and tells nothing. Login calls it when no account has the
// given email, so that the response time does not reveal which emails have
// accounts. The first call also pays for making the dummy hash once.
func DummyVerify(password string) {
	VerifyPassword(password, dummyHash())
}
