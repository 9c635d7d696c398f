package egresstest

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// packumentDoc is what a test reads of the registry's document.
type packumentDoc struct {
	Name     string            `json:"name"`
	DistTags map[string]string `json:"dist-tags"`
	Versions map[string]struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Dist    struct {
			Tarball   string `json:"tarball"`
			Shasum    string `json:"shasum"`
			Integrity string `json:"integrity"`
		} `json:"dist"`
	} `json:"versions"`
}

func TestNPMRegistry(t *testing.T) {
	reg := NPMRegistry(t, RegistryOptions{})
	if reg.Host != DefaultRegistryHost || reg.Package != DefaultPackage {
		t.Fatalf("Host, Package = %q, %q; want the defaults %q, %q", reg.Host, reg.Package, DefaultRegistryHost, DefaultPackage)
	}
	c := client(t, Resolver(map[string]netip.Addr{reg.Host: loopback}), reg.CAFile)

	for _, accept := range []string{"application/json", "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*"} {
		t.Run(accept, func(t *testing.T) {
			doc := getPackument(t, c, reg, accept, nil)
			v, ok := doc.Versions[PackageVersion]
			if doc.Name != DefaultPackage || doc.DistTags["latest"] != PackageVersion || !ok {
				t.Fatalf("packument = %+v, want %s with latest and only version %s", doc, DefaultPackage, PackageVersion)
			}
			wantURL := reg.URL + DefaultPackage + "/-/" + DefaultPackage + "-" + PackageVersion + ".tgz"
			if v.Dist.Tarball != wantURL {
				t.Fatalf("tarball URL = %q, want %q", v.Dist.Tarball, wantURL)
			}

			tgz := get(t, c, v.Dist.Tarball, nil, http.StatusOK)
			sum1 := sha1.Sum(tgz)
			sum512 := sha512.Sum512(tgz)
			if got := hex.EncodeToString(sum1[:]); got != v.Dist.Shasum {
				t.Errorf("tarball sha1 = %s, packument says %s", got, v.Dist.Shasum)
			}
			if got := "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]); got != v.Dist.Integrity {
				t.Errorf("tarball integrity = %s, packument says %s", got, v.Dist.Integrity)
			}
			files := untar(t, tgz)
			if want := `module.exports = "tiny works"` + "\n"; files["package/index.js"] != want {
				t.Errorf("package/index.js = %q, want %q", files["package/index.js"], want)
			}
			var manifest map[string]string
			if err := json.Unmarshal([]byte(files["package/package.json"]), &manifest); err != nil {
				t.Fatalf("package/package.json: %v", err)
			}
			if manifest["name"] != DefaultPackage || manifest["version"] != PackageVersion {
				t.Errorf("package/package.json = %v, want %s@%s", manifest, DefaultPackage, PackageVersion)
			}
			if len(files) != 2 {
				t.Errorf("tarball holds %d files, want 2: %v", len(files), files)
			}
		})
	}

	t.Run("unknown package", func(t *testing.T) {
		body := get(t, c, reg.URL+"left-pad", nil, http.StatusNotFound)
		var e map[string]string
		if err := json.Unmarshal(body, &e); err != nil || e["error"] == "" {
			t.Errorf("404 body = %s, want an npm JSON error", body)
		}
	})

	for _, r := range reg.Requests() {
		if !r.Authorized || r.Method != http.MethodGet || !strings.HasPrefix(r.Host, reg.Host+":") {
			t.Errorf("logged %+v, want authorized GETs for %s", r, reg.Host)
		}
	}
}

func TestNPMRegistryHeader(t *testing.T) {
	const secret = "Bearer s3cret-npm-token"
	reg := NPMRegistry(t, RegistryOptions{Host: "npm.corral.test", Package: "other-tiny", Header: "Authorization", Value: secret})
	c := client(t, Resolver(map[string]netip.Addr{"npm.corral.test": loopback}), reg.CAFile)

	tests := []struct {
		name   string
		header http.Header
		want   int
	}{
		{"no header", nil, http.StatusUnauthorized},
		{"wrong value", http.Header{"Authorization": {"Bearer guess"}}, http.StatusUnauthorized},
		{"twice", http.Header{"Authorization": {secret, secret}}, http.StatusUnauthorized},
		{"the secret", http.Header{"Authorization": {secret}}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := get(t, c, reg.URL+"other-tiny", tt.header, tt.want)
			if tt.want == http.StatusUnauthorized {
				var e map[string]string
				if err := json.Unmarshal(body, &e); err != nil || e["error"] == "" {
					t.Errorf("401 body = %s, want an npm JSON error", body)
				}
			}
		})
	}

	log := reg.Requests()
	if len(log) != len(tests) {
		t.Fatalf("logged %d requests, want %d", len(log), len(tests))
	}
	for i, tt := range tests {
		r := log[i]
		wantAuth := tt.want == http.StatusOK
		if r.Authorized != wantAuth || r.Path != "/other-tiny" || strings.Join(r.Header.Values("Authorization"), ",") != strings.Join(tt.header.Values("Authorization"), ",") {
			t.Errorf("request %d (%s) logged as %+v, want Authorized %v and its Authorization header", i, tt.name, r, wantAuth)
		}
	}
}

// TestNPMInstall has a real npm install the package through a proxy that
// resolves the registry's name, with the token in .npmrc, and node run it.
func TestNPMInstall(t *testing.T) {
	npm := lookPath(t, "npm")
	node := lookPath(t, "node")
	t.Logf("npm %s, node %s", strings.TrimSpace(run(t, "", nil, npm, "--version")), strings.TrimSpace(run(t, "", nil, node, "--version")))
	const token = "s3cret-npm-token"
	reg := NPMRegistry(t, RegistryOptions{Header: "Authorization", Value: "Bearer " + token})
	proxy := egressProxy(t, Resolver(map[string]netip.Addr{reg.Host: loopback}))

	home, project, cache := t.TempDir(), t.TempDir(), t.TempDir()
	npmrc := filepath.Join(home, ".npmrc")
	// "//host:port/:_authToken=": npm sends the token to that registry,
	// tarballs included, as "Authorization: Bearer <token>".
	writeFile(t, npmrc, strings.TrimPrefix(reg.URL, "https:")+":_authToken="+token+"\n")
	// An empty global config: Debian's /etc/npmrc sets cafile, and npm
	// then trusts that file alone, ignoring NODE_EXTRA_CA_CERTS.
	globalrc := filepath.Join(home, "npmrc.global")
	writeFile(t, globalrc, "")
	writeFile(t, filepath.Join(project, "package.json"), `{"name": "egress-check", "version": "0.0.0", "private": true}`+"\n")
	env := []string{
		"HOME=" + home,
		"HTTPS_PROXY=" + proxy, "https_proxy=" + proxy,
		"NODE_EXTRA_CA_CERTS=" + reg.CAFile,
		"npm_config_update_notifier=false",
	}
	run(t, project, env, npm, "install", "--registry", reg.URL, "--userconfig", npmrc, "--globalconfig", globalrc,
		"--no-audit", "--no-fund", "--fetch-retries=0", "--cache", cache, DefaultPackage)

	out := run(t, project, env, node, "-e", `console.log(require("corral-tiny"))`)
	if strings.TrimSpace(out) != Works {
		t.Errorf("node printed %q, want %q", out, Works)
	}

	var sawPackument, sawTarball bool
	for _, r := range reg.Requests() {
		t.Logf("registry: %s %s (Host %s, authorized %v)", r.Method, r.Path, r.Host, r.Authorized)
		if !r.Authorized || r.Header.Get("Authorization") != "Bearer "+token {
			t.Errorf("npm sent %s %s without the token: %v", r.Method, r.Path, r.Header)
		}
		sawPackument = sawPackument || r.Path == "/"+DefaultPackage
		sawTarball = sawTarball || strings.HasSuffix(r.Path, ".tgz")
	}
	if !sawPackument || !sawTarball {
		t.Errorf("registry saw %v, want the packument and the tarball fetched", reg.Requests())
	}
}

func getPackument(t *testing.T, c *http.Client, reg *Registry, accept string, h http.Header) packumentDoc {
	t.Helper()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Accept", accept)
	var doc packumentDoc
	if err := json.Unmarshal(get(t, c, reg.URL+reg.Package, h, http.StatusOK), &doc); err != nil {
		t.Fatalf("packument: %v", err)
	}
	return doc
}

func get(t *testing.T, c *http.Client, url string, h http.Header, wantStatus int) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != wantStatus {
		t.Fatalf("GET %s = %s, want %d: %s", url, resp.Status, wantStatus, body)
	}
	return body
}

func untar(t *testing.T, tgz []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(string(tgz)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(b)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
