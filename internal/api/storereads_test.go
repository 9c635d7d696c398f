package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"corral/internal/api"
)

// TestStoreReadsHandOnTheRest: StoreReads answers only its routes, and
// only for their method; everything else goes to the handler behind it.
func TestStoreReadsHandOnTheRest(t *testing.T) {
	srv := api.New(api.Config{}, api.Services{})
	for _, tc := range []struct {
		method, path string
		local        bool
	}{
		{"GET", "/api/agents", true},
		{"HEAD", "/api/agents", true},
		{"GET", "/api/agents/agt_1/grants", true},
		{"GET", "/api/openapi.json", true},
		{"POST", "/api/agents", false},
		{"DELETE", "/api/agents/agt_1", false},
		{"GET", "/api/agents/agt_1/files", false},
		{"GET", "/api/runs/run_1/events", true},
		{"GET", "/api/runs/run_1/terminal", false},
		{"GET", "/api/nodes", false},
		{"GET", "/api/changes/chg_1", false},
		{"GET", "/api/changes", true},
		{"POST", "/api/auth/login", false},
		{"GET", "/relay", false},
		{"GET", "/api/nosuch", false},
	} {
		rest := false
		h := srv.StoreReads(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rest = true
			w.WriteHeader(http.StatusTeapot)
		}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rest == tc.local {
			t.Errorf("%s %s: handed on = %v (status %d), want answered here = %v", tc.method, tc.path, rest, rec.Code, tc.local)
		}
	}
	for _, p := range api.StoreReadRoutes() {
		if p[:4] != "GET " {
			t.Errorf("store read %q is not a GET", p)
		}
	}
}
