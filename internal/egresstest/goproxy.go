package egresstest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

// DefaultModuleProxyHost is a name for a module proxy, for tests that
// need no other.
const DefaultModuleProxyHost = "proxy.corral.test"

// ModulePath and ModuleVersion are the one module a GoProxy serves.
const (
	ModulePath    = "corral.test/tiny"
	ModuleVersion = "v1.0.0"
)

// The module's two files; tiny.go's Works constant holds Works.
var (
	moduleGoMod  = "module " + ModulePath + "\n\ngo 1.21\n"
	moduleTinyGo = "package tiny\n\nconst Works = " + strconv.Quote(Works) + "\n"
)

// GoProxy is a Go module proxy (the GOPROXY protocol) over plain HTTP on
// loopback, serving ModulePath at ModuleVersion. Everything else is 404,
// which the go command takes for "no such module or version".
type GoProxy struct {
	URL  string // "http://<host>:<port>", the GOPROXY to give the go command
	Addr string // "127.0.0.1:<port>", where the name must resolve and connect
	Host string // the name it answers to

	files map[string]file // by path, such as /corral.test/tiny/@v/list
	log   requestLog
}

type file struct {
	contentType string
	body        []byte
}

// ModuleProxy starts a module proxy answering to host; it stops when the
// test ends.
func ModuleProxy(t T, host string) *GoProxy {
	t.Helper()
	zipped, err := moduleZip()
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{ModuleVersion, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	// The module path needs no case-encoding (!x for X): it is lower case.
	base := "/" + ModulePath + "/@v/" + ModuleVersion
	p := &GoProxy{Host: host, files: map[string]file{
		"/" + ModulePath + "/@v/list": {"text/plain; charset=utf-8", []byte(ModuleVersion + "\n")},
		"/" + ModulePath + "/@latest": {"application/json", info},
		base + ".info":                {"application/json", info},
		base + ".mod":                 {"text/plain; charset=utf-8", []byte(moduleGoMod)},
		base + ".zip":                 {"application/zip", zipped},
	}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.Addr = srv.Listener.Addr().String()
	_, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p.URL = "http://" + net.JoinHostPort(host, port)
	return p
}

// Requests returns every request the proxy received, in order.
func (p *GoProxy) Requests() []Request { return p.log.all() }

func (p *GoProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.log.add(r, true)
	f, ok := p.files[r.URL.Path]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Write(f.body)
}

// moduleZip is the module as the go command expects it from a proxy:
// every file under "<path>@<version>/", no directory entries. Built by
// hand (golang.org/x/mod/zip would need a new requirement in go.mod);
// TestModuleProxyGoModDownload has the go command check it.
func moduleZip() ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	prefix := ModulePath + "@" + ModuleVersion + "/"
	for _, f := range []struct{ name, body string }{
		{"go.mod", moduleGoMod},
		{"tiny.go", moduleTinyGo},
	} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: prefix + f.name, Method: zip.Deflate})
		if err != nil {
			return nil, err
		}
		if _, err := strings.NewReader(f.body).WriteTo(w); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
