package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"corral/internal/abtest"
	"corral/internal/api"
)

// BenchmarkMetricsAPI measures what the metrics add to an API request: an
// authenticated GET /api/agents/{id} (session lookup, access, the JSON
// view) served by the API as the server mounts it (the app's metrics
// middleware around it) and by the bare API, in process so that nothing
// but the handlers is timed. Each iteration makes one request of each,
// in alternating order, so machine noise falls on both alike; the medians
// are compared (abtest.Compare):
//
//	go test -run '^$' -bench MetricsAPI -benchtime 20000x -count 3 ./internal/api/
//
// The figure to read is on/off (the goal is at most 1.05).
func BenchmarkMetricsAPI(b *testing.B) {
	e := newEnv(b, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("measured")
	on, off := e.app.Metrics.HTTP(e.api), http.Handler(e.api)
	serve := func(h http.Handler) time.Duration {
		req := httptest.NewRequest("GET", "/api/agents/"+id, nil)
		req.AddCookie(&http.Cookie{Name: api.CookieName, Value: owner.cookie})
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		took := time.Since(start)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /api/agents/%s = %d %s", id, rec.Code, rec.Body)
		}
		return took
	}
	for range 200 { // warm both
		serve(on)
		serve(off)
	}
	abtest.Compare(b, "on", func() time.Duration { return serve(on) }, "off", func() time.Duration { return serve(off) })
}
