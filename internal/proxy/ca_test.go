package proxy

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	ca, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert.Subject.CommonName != caName || !ca.cert.IsCA || ca.cert.NotAfter.Before(time.Now().Add(9*365*24*time.Hour)) {
		t.Fatalf("CA certificate %q, CA %v, until %v", ca.cert.Subject.CommonName, ca.cert.IsCA, ca.cert.NotAfter)
	}
	for name, want := range map[string]os.FileMode{caKeyFile: 0o600, caCertFile: 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: %v, %v; want mode %v", name, fi.Mode(), err, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("the CA's directory holds %d files, want 2 (no temporary one left)", len(entries))
	}

	again, err := LoadCA(dir)
	if err != nil || !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
		t.Fatalf("loading the CA again: %v, or another certificate", err)
	}

	// A key without its certificate (a first start stopped between the
	// two) is replaced; a certificate without its key is an error.
	os.Remove(filepath.Join(dir, caCertFile))
	fresh, err := LoadCA(dir)
	if err != nil || bytes.Equal(fresh.CertPEM(), ca.CertPEM()) {
		t.Fatalf("a key alone: %v, or the old certificate", err)
	}
	os.Remove(filepath.Join(dir, caKeyFile))
	if _, err := LoadCA(dir); err == nil || !strings.Contains(err.Error(), "its key") {
		t.Fatalf("a certificate alone: %v", err)
	}
	// Another CA's key beside the certificate is refused.
	other := t.TempDir()
	if _, err := LoadCA(other); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(other, caKeyFile))
	os.WriteFile(filepath.Join(dir, caKeyFile), key, 0o600)
	if _, err := LoadCA(dir); err == nil {
		t.Fatal("a key of another CA was taken")
	}
	os.WriteFile(filepath.Join(dir, caKeyFile), []byte("not a key"), 0o600)
	if _, err := LoadCA(dir); err == nil {
		t.Fatal("a key that is not PEM was taken")
	}
}

func TestLeaf(t *testing.T) {
	ca, err := LoadCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	for _, host := range []string{"registry.npmjs.org", "10.0.0.5", "2001:db8::1"} {
		c, err := ca.leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Fatalf("the leaf for %s: %v", host, err)
		}
		if life := c.Leaf.NotAfter.Sub(c.Leaf.NotBefore); life > leafValidity+2*time.Hour {
			t.Fatalf("the leaf for %s lives %v", host, life)
		}
		if again, _ := ca.leaf(host); again != c {
			t.Fatalf("the leaf for %s was minted again", host)
		}
	}
	// A leaf near its end is minted anew.
	first, _ := ca.leaf("10.0.0.5")
	ca.now = func() time.Time { return time.Now().Add(leafValidity - leafRenew/2) }
	if again, _ := ca.leaf("10.0.0.5"); again == first || !again.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Fatal("a leaf near its end was not renewed")
	}
	ca.now = time.Now
	// The cache is bounded.
	for i := 0; i < maxLeaves+10; i++ {
		ca.leaf("h" + strings.Repeat("x", i%50) + "-" + string(rune('a'+i%26)) + ".example.com")
	}
	if n := len(ca.leaves); n > maxLeaves {
		t.Fatalf("%d leaves cached, at most %d", n, maxLeaves)
	}
}
