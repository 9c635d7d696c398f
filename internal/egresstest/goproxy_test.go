package egresstest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestModuleProxy(t *testing.T) {
	p := ModuleProxy(t, DefaultModuleProxyHost)
	c := client(t, Resolver(map[string]netip.Addr{DefaultModuleProxyHost: loopback}), "")
	base := p.URL + "/" + ModulePath + "/@v/"

	if got := string(get(t, c, base+"list", nil, http.StatusOK)); got != ModuleVersion+"\n" {
		t.Errorf("list = %q, want %q", got, ModuleVersion+"\n")
	}
	for _, url := range []string{base + ModuleVersion + ".info", p.URL + "/" + ModulePath + "/@latest"} {
		var info struct {
			Version string
			Time    time.Time
		}
		if err := json.Unmarshal(get(t, c, url, nil, http.StatusOK), &info); err != nil || info.Version != ModuleVersion || info.Time.IsZero() {
			t.Errorf("GET %s = %+v, %v; want version %s with a time", url, info, err, ModuleVersion)
		}
	}
	wantMod := "module corral.test/tiny\n\ngo 1.21\n"
	if got := string(get(t, c, base+ModuleVersion+".mod", nil, http.StatusOK)); got != wantMod {
		t.Errorf(".mod = %q, want %q", got, wantMod)
	}

	zipped := get(t, c, base+ModuleVersion+".zip", nil, http.StatusOK)
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		t.Fatalf(".zip: %v", err)
	}
	want := map[string]string{
		"corral.test/tiny@v1.0.0/go.mod":  wantMod,
		"corral.test/tiny@v1.0.0/tiny.go": "package tiny\n\nconst Works = \"tiny works\"\n",
	}
	if len(zr.File) != len(want) {
		t.Errorf(".zip holds %d files, want %d", len(zr.File), len(want))
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if w, ok := want[f.Name]; !ok || string(b) != w {
			t.Errorf(".zip file %s = %q, want %q", f.Name, b, w)
		}
	}

	for _, path := range []string{
		"/" + ModulePath + "/@v/v1.0.1.info",
		"/" + ModulePath + "/@v/v1.0.1.zip",
		"/corral.test/other/@v/list",
		"/" + ModulePath + "/@v/v1.0.0.ziphash",
		"/sumdb/sum.golang.org/supported",
		"/",
	} {
		get(t, c, p.URL+path, nil, http.StatusNotFound)
	}

	log := p.Requests()
	if len(log) != 11 {
		t.Errorf("logged %d requests, want 11", len(log))
	}
	for _, r := range log {
		if r.Host != strings.TrimPrefix(p.URL, "http://") || r.Method != http.MethodGet {
			t.Errorf("logged %+v, want GETs for %s", r, strings.TrimPrefix(p.URL, "http://"))
		}
	}
}

// TestModuleProxyGoModDownload has the real go command download the
// module through a proxy that resolves the module proxy's name: the go
// command checks the zip more strictly than any test here would.
func TestModuleProxyGoModDownload(t *testing.T) {
	goBin := lookPath(t, "go")
	t.Logf("go: %s", strings.TrimSpace(run(t, "", []string{"GOTOOLCHAIN=local", "GOENV=off"}, goBin, "version")))
	p := ModuleProxy(t, DefaultModuleProxyHost)
	proxy := egressProxy(t, Resolver(map[string]netip.Addr{DefaultModuleProxyHost: loopback}))

	gopath := t.TempDir()
	env := []string{
		"HOME=" + t.TempDir(),
		"GOENV=off",
		"GOPATH=" + gopath,
		"GOMODCACHE=" + filepath.Join(gopath, "pkg", "mod"),
		"GOCACHE=" + t.TempDir(),
		"GOPROXY=" + p.URL, // no ",direct": nothing may be fetched from elsewhere
		"GOSUMDB=off", "GONOSUMDB=", "GONOSUMCHECK=", "GOPRIVATE=", "GONOPROXY=", "GOINSECURE=",
		// -modcacherw: the module cache is read-only otherwise, and
		// t.TempDir could not remove it.
		"GOFLAGS=-mod=mod -modcacherw",
		"GOTOOLCHAIN=local",
		"GOTELEMETRY=off",
		"HTTP_PROXY=" + proxy, "http_proxy=" + proxy,
	}
	out := run(t, t.TempDir(), env, goBin, "mod", "download", "-json", ModulePath+"@"+ModuleVersion)

	var got struct {
		Path, Version, Error, Dir, Zip, Sum string
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("go mod download -json: %v\n%s", err, out)
	}
	if got.Error != "" || got.Path != ModulePath || got.Version != ModuleVersion || !strings.HasPrefix(got.Sum, "h1:") {
		t.Fatalf("go mod download = %+v, want %s@%s with an h1: sum", got, ModulePath, ModuleVersion)
	}
	b, err := os.ReadFile(filepath.Join(got.Dir, "tiny.go"))
	if err != nil || !strings.Contains(string(b), `"tiny works"`) {
		t.Errorf("downloaded tiny.go = %q, %v; want the Works constant", b, err)
	}

	var sawZip bool
	for _, r := range p.Requests() {
		t.Logf("module proxy: %s %s (Host %s)", r.Method, r.Path, r.Host)
		if r.Host != strings.TrimPrefix(p.URL, "http://") {
			t.Errorf("go asked for Host %q, want the proxy's name %q", r.Host, strings.TrimPrefix(p.URL, "http://"))
		}
		sawZip = sawZip || strings.HasSuffix(r.Path, ".zip")
	}
	if !sawZip {
		t.Errorf("the module proxy saw %v, want the zip fetched through the egress proxy", p.Requests())
	}
}
