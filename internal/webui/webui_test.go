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
		// The machine interfaces' paths never get the page, whatever the
		// method: the API's JSON 404.
		{"GET", "/api/nothing-here", 404, `{"error":{"code":"not_found"`},
		{"GET", "/api", 404, `"not_found"`},
		{"GET", "/v1/models", 404, `"not_found"`},
		{"POST", "/v1/chat/completions", 404, `"not_found"`},
		{"DELETE", "/v1/messages", 404, `"not_found"`},
		{"GET", "/v1", 404, `"not_found"`},
		{"GET", "/agents/../v1/models", 404, `"not_found"`},
		{"GET", "/v1/../agents/agt_1", 200, "<html"},
		{"GET", "/v10/x", 200, "<html"},
		{"GET", "/apiary", 200, "<html"},
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
			if ct := rec.Header().Get("Content-Type"); tt.status == 404 && ct != "application/json" {
				t.Fatalf("%s %s: Content-Type %q, want application/json", tt.method, tt.path, ct)
			}
		})
	}
}
