// Package egresstest is the outside world for tests of Corral's egress
// proxy: a DNS resolver that knows only the names a test gives it, an npm
// registry over TLS and a Go module proxy, each serving one tiny package.
//
// A sandboxed run has no DNS and no route out; its npm and go reach
// upstreams only through the proxy, which resolves names itself. npm and
// the go command never send localhost or loopback literals through a
// proxy, so the upstreams here answer to names (registry.corral.test,
// proxy.corral.test) that the test's Resolver maps to 127.0.0.1. A real
// `npm install` or `go mod download` against them is what proves a proxy
// change works end to end.
package egresstest

import (
	"net/http"
	"sync"
)

// T is what the fixtures need of their caller (a *testing.T, or any
// stand-in with the same methods, as gittest.T allows).
type T interface {
	Helper()
	TempDir() string
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Works is what the tiny npm package exports and the tiny Go module's
// Works constant holds: a test that runs the installed code expects it.
const Works = "tiny works"

// Request is one request an upstream received.
type Request struct {
	Method string
	Host   string // the Host header: the name the client asked for
	Path   string
	// Header is a copy of the request's headers, so a test can check
	// that a secret the proxy injects arrived (and that nothing else
	// leaked through).
	Header http.Header
	// Authorized is whether the request carried the header the upstream
	// demands; true when it demands none.
	Authorized bool
}

// requestLog is the record an upstream keeps; handlers run concurrently.
type requestLog struct {
	mu   sync.Mutex
	list []Request
}

func (l *requestLog) add(r *http.Request, authorized bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, Request{
		Method:     r.Method,
		Host:       r.Host,
		Path:       r.URL.Path,
		Header:     r.Header.Clone(),
		Authorized: authorized,
	})
}

func (l *requestLog) all() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.list...)
}
