package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The CA's files in its directory. The certificate is what a sandbox
// trusts; the key never leaves the server.
const (
	caCertFile = "egress-ca.pem"
	caKeyFile  = "egress-ca.key"
)

const (
	caName     = "Corral egress CA"
	caValidity = 10 * 365 * 24 * time.Hour
	// A leaf lives a week and is minted again a day before it ends: short
	// enough that a leaked one is soon worthless, long enough that a busy
	// host is not signed for on every connection.
	leafValidity = 7 * 24 * time.Hour
	leafRenew    = 24 * time.Hour
	// maxLeaves bounds the cache: an agent that connects to many hosts
	// costs a signature each, not memory without end.
	maxLeaves = 1024
)

// CA is the certificate authority the proxy signs its leaf certificates
// with when it terminates a run's TLS (a rule with methods or paths, a
// secret to add). It is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	// leafKey is the one key of every leaf: minting is then a signature,
	// and the key is as secret as the CA's own, which sits beside it.
	leafKey *ecdsa.PrivateKey
	now     func() time.Time

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// LoadCA loads the CA in dir, or makes it there the first time: an ECDSA
// P-256 key (mode 0600) and a self-signed certificate valid ten years,
// each written whole or not at all.
func LoadCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		return parseCA(certPEM, keyPEM)
	case errors.Is(certErr, fs.ErrNotExist) && (keyErr == nil || errors.Is(keyErr, fs.ErrNotExist)):
		// Nothing yet, or a key left by a first start that stopped before
		// its certificate was written: no one can trust a key without a
		// certificate, so both are made anew.
		return createCA(dir, certPath, keyPath)
	case certErr == nil:
		return nil, fmt.Errorf("egress CA: %s is there but its key %s is not: restore the key, or remove both to make a new CA (sandboxes must then trust the new one)", certPath, keyPath)
	default:
		return nil, fmt.Errorf("egress CA: %w", errors.Join(certErr, keyErr))
	}
}

func createCA(dir, certPath, keyPath string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: caName, Organization: []string{"Corral"}},
		NotBefore:             now.Add(-time.Hour), // a sandbox's clock may lag the server's
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	// The key first: a certificate on disk always has its key beside it.
	if err := writeAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return parseCA(certPEM, keyPEM)
}

// writeAtomic writes data to a temporary file beside path and renames it
// into place, so that a crash leaves the old file or the new one whole.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("egress CA: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("egress CA: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("egress CA: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("egress CA: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("egress CA: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("egress CA: %w", err)
	}
	return nil
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || cb.Type != "CERTIFICATE" || kb == nil {
		return nil, errors.New("egress CA: the certificate or the key is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA: certificate: %w", err)
	}
	var key *ecdsa.PrivateKey
	if k, err := x509.ParsePKCS8PrivateKey(kb.Bytes); err == nil {
		key, _ = k.(*ecdsa.PrivateKey)
	} else if k, err := x509.ParseECPrivateKey(kb.Bytes); err == nil {
		key = k
	}
	if key == nil {
		return nil, errors.New("egress CA: the key is not an ECDSA private key")
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) || !cert.IsCA {
		return nil, errors.New("egress CA: the key is not the certificate's, or the certificate is not a CA's")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: leaf key: %w", err)
	}
	return &CA{cert: cert, certPEM: pem.EncodeToMemory(cb), key: key, leafKey: leafKey,
		now: time.Now, leaves: map[string]*tls.Certificate{}}, nil
}

// ParseCA is the CA whose certificate and key (PEM) are given, as LoadCA
// reads them from its files.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) { return parseCA(certPEM, keyPEM) }

// KeyPEM is the CA's key (PKCS #8, PEM): for a store that seals it, so
// that several servers sign alike; never for a sandbox.
func (ca *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// CertPEM is the CA's certificate, for a sandbox to trust.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// leaf answers a certificate for host (a name or an IP address), minted
// or from the cache.
func (ca *CA) leaf(host string) (*tls.Certificate, error) {
	now := ca.now()
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && now.Add(leafRenew).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: leaf for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress CA: leaf for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: ca.leafKey, Leaf: leaf}
	if len(ca.leaves) >= maxLeaves {
		for h := range ca.leaves { // any one: the cache only saves signatures
			delete(ca.leaves, h)
			break
		}
	}
	ca.leaves[host] = c
	return c, nil
}

// serial is a random 128-bit serial number, as the Baseline Requirements
// ask (at least 64 bits of randomness).
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
