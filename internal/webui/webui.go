// Package webui serves the browser app at "/". The app is built by Vite
// from web/ into dist/ and embedded into the binary when it is built with
// the "ui" tag (make build and make run do that); without the tag, a
// one-page stub says how to get the app, so `go test ./...` and `go build`
// need no Node.
//
// Every path that is not a file of the app answers the app's index.html,
// so its client-side routes survive a reload, except the paths of the
// machine interfaces, /api/ and /v1/ (the model gateway's, which only
// sandboxes reach): there a client expects JSON, and an unknown path
// answers the API's JSON 404 for any method, never the page. Answers carry
// a strict Content Security Policy: the app loads nothing from anywhere
// else.
package webui

import (
	"bytes"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// csp allows the app's own scripts, styles and API calls, and nothing else.
const csp = "default-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"style-src 'self' 'unsafe-inline'; script-src 'self'; object-src 'none'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Built reports whether the real app is embedded (else the stub is).
func Built() bool { return built }

// Handler serves the app.
func Handler() http.Handler {
	index, err := fs.ReadFile(dist, "index.html")
	if err != nil {
		panic("webui: the embedded app has no index.html: " + err.Error())
	}
	files := http.FileServerFS(dist)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		clean := path.Clean("/" + r.URL.Path)
		if machinePath(clean) {
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusNotFound)
			w.Write(notFound)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(clean, "/")
		if name != "" && name != "index.html" {
			if st, err := fs.Stat(dist, name); err == nil && !st.IsDir() {
				// Vite names assets by content hash: they never change.
				if strings.HasPrefix(name, "assets/") {
					h.Set("Cache-Control", "public, max-age=31536000, immutable")
				}
				files.ServeHTTP(w, r)
				return
			}
		}
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(index))
	})
}

// notFound is the API's error shape (internal/api's writeError) for an
// unknown endpoint.
var notFound = []byte(`{"error":{"code":"not_found","message":"no such endpoint"}}` + "\n")

// machinePath reports whether a cleaned path belongs to a machine
// interface rather than to the app.
func machinePath(p string) bool {
	for _, prefix := range []string{"/api", "/v1"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}
