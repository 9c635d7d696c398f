package webui

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	h := Handler()
	tests := []struct {
		method, path string
		status       int
		body         string // a part of the answer
	}{
		{"GET", "/", 200, "<html"},
		{"GET", "/agents/agt_123", 200, "<html"}, // a client-side route gets the app
		{"GET", "/index.html", 200, "<html"},
		{"HEAD", "/login", 200, ""},
		{"POST", "/", 405, ""},
		{"GET", "/../../etc/passwd", 200, "<html"}, // cleaned, not found: the app
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tt.method, "/", nil)
			req.URL.Path = tt.path
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.body) {
				t.Fatalf("%s %s = %d %q", tt.method, tt.path, rec.Code, rec.Body.String())
			}
			if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Fatalf("CSP = %q", csp)
			}
			if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Fatal("no nosniff")
			}
		})
	}
}
