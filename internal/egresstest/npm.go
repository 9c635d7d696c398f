package egresstest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// DefaultRegistryHost is the name a registry answers to unless told.
const DefaultRegistryHost = "registry.corral.test"

// DefaultPackage is the package a registry serves unless told.
const DefaultPackage = "corral-tiny"

// PackageVersion is the one version of the package a registry serves.
const PackageVersion = "1.0.0"

// RegistryOptions shape an npm registry.
type RegistryOptions struct {
	// Host is the name the registry answers to and its certificate
	// names; default DefaultRegistryHost.
	Host string
	// Package is the one, unscoped package served; default
	// DefaultPackage.
	Package string
	// Header and Value, when Header is set, are what every request must
	// carry (such as "Authorization" and "Bearer <token>"), else it is
	// refused with 401: the credential the egress proxy injects.
	Header, Value string
}

// Registry is an npm registry on loopback serving one package at
// PackageVersion, whose index.js exports Works.
type Registry struct {
	URL     string // "https://<host>:<port>/", the --registry to give npm
	Addr    string // "127.0.0.1:<port>", where the name must resolve and connect
	Host    string // the name it answers to
	Package string // the package it serves
	CAFile  string // the authority that issued its certificate, PEM

	opt       RegistryOptions
	packument []byte
	tarball   []byte
	log       requestLog
}

// NPMRegistry starts a registry; it stops when the test ends.
func NPMRegistry(t T, opt RegistryOptions) *Registry {
	t.Helper()
	if opt.Host == "" {
		opt.Host = DefaultRegistryHost
	}
	if opt.Package == "" {
		opt.Package = DefaultPackage
	}
	if strings.ContainsAny(opt.Package, "/@%") {
		t.Fatalf("egresstest: package %q: only unscoped names are served", opt.Package)
	}
	caFile, cert := serverCert(t, opt.Host)
	r := &Registry{Host: opt.Host, Package: opt.Package, CAFile: caFile, opt: opt, tarball: packageTarball(opt.Package)}

	srv := httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	// The tarball's URL names the port, so the listener comes first and
	// the document that points at it second.
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r.Addr = srv.Listener.Addr().String()
	r.URL = "https://" + net.JoinHostPort(opt.Host, port) + "/"
	r.packument, err = packument(opt.Package, r.URL+r.tarballPath()[1:], r.tarball)
	if err != nil {
		t.Fatal(err)
	}
	srv.StartTLS()
	return r
}

// Requests returns every request the registry received, in order.
func (r *Registry) Requests() []Request { return r.log.all() }

func (r *Registry) tarballPath() string {
	return "/" + r.Package + "/-/" + r.Package + "-" + PackageVersion + ".tgz"
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	authorized := true
	if r.opt.Header != "" {
		got := req.Header.Values(r.opt.Header)
		authorized = len(got) == 1 && got[0] == r.opt.Value
	}
	r.log.add(req, authorized)
	if !authorized {
		npmError(w, http.StatusUnauthorized, "authentication required: this registry wants "+r.opt.Header)
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		npmError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	switch req.URL.Path {
	case "/" + r.Package:
		// The same full document whether npm asks for it or for the
		// abbreviated one (Accept: application/vnd.npm.install-v1+json):
		// the full one is a superset and npm accepts either.
		w.Header().Set("Content-Type", "application/json")
		w.Write(r.packument)
	case r.tarballPath():
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(r.tarball)
	default:
		npmError(w, http.StatusNotFound, "Not found")
	}
}

// npmError answers as the npm registry does: a JSON body with an error,
// which npm prints.
func npmError(w http.ResponseWriter, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": message})
}

// packument is the registry's document for the package: its versions
// and, for each, where its tarball is and the hashes npm checks it by.
func packument(name, tarballURL string, tarball []byte) ([]byte, error) {
	sha1sum := sha1.Sum(tarball)
	sha512sum := sha512.Sum512(tarball)
	published := "2024-01-01T00:00:00.000Z"
	type dist struct {
		Tarball   string `json:"tarball"`
		Shasum    string `json:"shasum"`
		Integrity string `json:"integrity"`
	}
	type version struct {
		ID      string `json:"_id"`
		Name    string `json:"name"`
		Version string `json:"version"`
		Main    string `json:"main"`
		Dist    dist   `json:"dist"`
	}
	doc := struct {
		ID       string             `json:"_id"`
		Name     string             `json:"name"`
		Modified string             `json:"modified"`
		DistTags map[string]string  `json:"dist-tags"`
		Versions map[string]version `json:"versions"`
		Time     map[string]string  `json:"time"`
	}{
		ID:       name,
		Name:     name,
		Modified: published,
		DistTags: map[string]string{"latest": PackageVersion},
		Versions: map[string]version{PackageVersion: {
			ID:      name + "@" + PackageVersion,
			Name:    name,
			Version: PackageVersion,
			Main:    "index.js",
			Dist: dist{
				Tarball:   tarballURL,
				Shasum:    hex.EncodeToString(sha1sum[:]),
				Integrity: "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:]),
			},
		}},
		Time: map[string]string{"created": published, "modified": published, PackageVersion: published},
	}
	return json.Marshal(doc)
}

// packageTarball is the package as npm publishes it: a gzip'd tar whose
// files sit under package/.
func packageTarball(name string) []byte {
	manifest, _ := json.MarshalIndent(map[string]string{
		"name":    name,
		"version": PackageVersion,
		"main":    "index.js",
		"license": "MIT",
	}, "", "  ")
	files := []struct{ name, body string }{
		{"package/package.json", string(manifest) + "\n"},
		{"package/index.js", "module.exports = " + jsString(Works) + "\n"},
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	// A fixed time keeps the tarball, and so its hashes, the same on
	// every run.
	mtime := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range files {
		// Writes to a bytes.Buffer do not fail.
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: mtime, Typeflag: tar.TypeReg})
		tw.Write([]byte(f.body))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
