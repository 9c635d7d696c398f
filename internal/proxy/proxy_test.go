package proxy

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"corral"
)

// requestCase is one request through the proxy under one allow-list.
type requestCase struct {
	name    string
	rules   func(port int) []corral.EgressRule
	method  string
	host    string // the URL's host; "localhost" when empty
	path    string
	hostHdr string // a Host header other than the URL's, when set
	header  http.Header

	status int    // 0: the proxy refuses the CONNECT (the client gets an error)
	denial string // a substring of the Denial's reason; "" for none
	// terminated: the client saw the proxy's certificate, not the
	// upstream's (HTTPS only).
	terminated bool
}

func localhost(ports ...int) func(int) []corral.EgressRule {
	return func(port int) []corral.EgressRule {
		if len(ports) == 0 {
			ports = []int{port}
		}
		return []corral.EgressRule{{Host: "localhost", Ports: ports}}
	}
}

func rules(rs ...corral.EgressRule) func(int) []corral.EgressRule {
	return func(port int) []corral.EgressRule {
		out := slices.Clone(rs)
		for i := range out {
			if out[i].Ports == nil {
				out[i].Ports = []int{port}
			}
		}
		return out
	}
}

func TestHTTPS(t *testing.T) {
	for _, tt := range []requestCase{
		{name: "allowed, tunnelled", rules: localhost(), path: "/hello", status: 200},
		{name: "a rule by IP address, no server name sent", rules: rules(corral.EgressRule{Host: "127.0.0.1"}), host: "127.0.0.1", path: "/hello", status: 200},
		{name: "another host", rules: rules(corral.EgressRule{Host: "example.test"}), path: "/hello",
			denial: "localhost:%d is not on this agent's allow-list"},
		{name: "another port", rules: localhost(1), path: "/hello", denial: "is not on this agent's allow-list"},
		{name: "no ports is 80 and 443 only", rules: rules(corral.EgressRule{Host: "localhost", Ports: []int{}}), path: "/hello",
			denial: "is not on this agent's allow-list"},
		{name: "the IP address of an allowed name", rules: localhost(), host: "127.0.0.1", path: "/hello",
			denial: "127.0.0.1:%d is not on this agent's allow-list"},
		{name: "an allowed method, terminated", rules: rules(corral.EgressRule{Host: "localhost", Methods: []string{"GET"}}),
			path: "/hello", status: 200, terminated: true},
		{name: "another method", rules: rules(corral.EgressRule{Host: "localhost", Methods: []string{"GET"}}),
			method: "POST", path: "/hello", status: 403, denial: "POST is not among the methods", terminated: true},
		{name: "under an allowed path", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a"}}),
			path: "/a/x", status: 200, terminated: true},
		{name: "another path", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a"}}),
			path: "/b", status: 403, denial: `"/b" is not under the paths`, terminated: true},
		{name: "a name that starts like the path", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a"}}),
			path: "/ab", status: 403, denial: "is not under the paths", terminated: true},
		{name: "out of the path by ..", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a"}}),
			path: "/a/../b", status: 403, denial: "is not under the paths", terminated: true},
		{name: "the Host of another site", rules: rules(corral.EgressRule{Host: "localhost", Methods: []string{"GET"}}),
			path: "/hello", hostHdr: "example.test", status: 403, denial: `Host "example.test" is not the host`, terminated: true},
		{name: "a switch to HTTP/2, past the rule", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a"}}),
			path: "/a", header: http.Header{"Connection": {"Upgrade, HTTP2-Settings"}, "Upgrade": {"h2c"}, "Http2-Settings": {"AAMAAABkAAQAoAAAAAIAAAAA"}}, status: 403, denial: `switching to "h2c" is not allowed`, terminated: true},
	} {
		t.Run(tt.name, func(t *testing.T) { runRequestCase(t, tt, true) })
	}
}

func TestPlainHTTP(t *testing.T) {
	for _, tt := range []requestCase{
		{name: "allowed", rules: localhost(), path: "/hello", status: 200},
		{name: "another host", rules: rules(corral.EgressRule{Host: "example.test"}), path: "/hello", status: 403,
			denial: "localhost:%d is not on this agent's allow-list"},
		{name: "another port", rules: localhost(1), path: "/hello", status: 403, denial: "is not on this agent's allow-list"},
		{name: "the IP address of an allowed name", rules: localhost(), host: "127.0.0.1", path: "/hello", status: 403,
			denial: "127.0.0.1:%d is not on this agent's allow-list"},
		{name: "an allowed method", rules: rules(corral.EgressRule{Host: "localhost", Methods: []string{"GET"}}), path: "/hello", status: 200},
		{name: "another method", rules: rules(corral.EgressRule{Host: "localhost", Methods: []string{"GET"}}),
			method: "DELETE", path: "/hello", status: 403, denial: "DELETE is not among the methods"},
		{name: "under an allowed path", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a/"}}), path: "/a/x", status: 200},
		{name: "another path", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a/"}}),
			path: "/b", status: 403, denial: "is not under the paths"},
		{name: "out of the path by ..", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a"}}),
			path: "/a/../b", status: 403, denial: "is not under the paths"},
		{name: "out of the path by an encoded ..", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a"}}),
			path: "/a/%2e%2e/b", status: 403, denial: "encoded"},
		{name: "a switch to HTTP/2, past the rule", rules: rules(corral.EgressRule{Host: "localhost", Paths: []string{"/a"}}),
			path: "/a", header: http.Header{"Connection": {"Upgrade, HTTP2-Settings"}, "Upgrade": {"h2c"}, "Http2-Settings": {"AAMAAABkAAQAoAAAAAIAAAAA"}}, status: 403, denial: `switching to "h2c" is not allowed`},
	} {
		t.Run(tt.name, func(t *testing.T) { runRequestCase(t, tt, false) })
	}
}

func runRequestCase(t *testing.T, tt requestCase, https bool) {
	up := newUpstream(t, https)
	f := newFixture(t)
	f.allow(tt.rules(up.port)...)
	host := tt.host
	if host == "" {
		host = "localhost"
	}
	method := tt.method
	if method == "" {
		method = "GET"
	}
	req, err := http.NewRequest(method, up.url(host, tt.path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tt.hostHdr != "" {
		req.Host = tt.hostHdr
	}
	for k, v := range tt.header {
		req.Header[k] = v
	}
	resp, err := f.client("run-1", false).Do(req)
	switch {
	case tt.status == 0 && err == nil:
		t.Fatalf("%s %s: %s, want the CONNECT refused", method, req.URL, resp.Status)
	case tt.status != 0 && err != nil:
		t.Fatalf("%s %s: %v, want %d", method, req.URL, err, tt.status)
	case tt.status != 0 && resp.StatusCode != tt.status:
		t.Fatalf("%s %s: %s (%s), want %d", method, req.URL, resp.Status, body(t, resp), tt.status)
	}
	if err == nil {
		b := body(t, resp)
		if tt.status == 200 && b != "hello "+strings.Split(tt.path, "?")[0] {
			t.Fatalf("body %q, want the upstream's", b)
		}
		if tt.denial != "" && !strings.HasPrefix(b, "corral egress: ") {
			t.Fatalf("a refusal's body %q does not say who refused", b)
		}
		if https {
			issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName
			if terminated := issuer == caName; terminated != tt.terminated {
				t.Fatalf("the client saw a certificate issued by %q: terminated %v, want %v", issuer, terminated, tt.terminated)
			}
		}
	}
	reqs, _ := up.seen()
	if tt.denial == "" {
		if len(reqs) != 1 {
			t.Fatalf("the upstream saw %d requests, want 1", len(reqs))
		}
		if denied, _, _ := f.ev.snapshot(); len(denied) != 0 {
			t.Fatalf("denials %+v of an allowed request", denied)
		}
		return
	}
	if len(reqs) != 0 {
		t.Fatalf("a refused request reached the upstream: %s", reqs[0].URL)
	}
	want := Denial{Host: host, Port: up.port, Reason: tt.denial}
	if strings.Contains(tt.denial, "%d") {
		want.Reason = fmt.Sprintf(tt.denial, up.port)
	}
	if tt.status == 403 && (tt.terminated || !https) {
		want.Method, want.Path = method, tt.path
		if strings.Contains(tt.path, "%") {
			want.Path = req.URL.EscapedPath()
		}
	}
	f.hasDenial(want)
}
