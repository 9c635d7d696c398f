package api

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// BenchmarkListAgents measures an authenticated GET /api/agents (session
// lookup, fresh access computation, JSON views) against a bare net/http
// handler that writes the same bytes, over real loopback TCP, in the same
// run. Each iteration is one batch of each, interleaved, so machine noise
// falls on both alike. The figure to read is api/bare.
func BenchmarkListAgents(b *testing.B) {
	const (
		workers = 8
		batch   = 256
	)
	e := newEnv(b, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	reader := e.signup("reader@example.com", "Reader")
	for i := 0; i < 10; i++ {
		id := owner.createAgent(fmt.Sprintf("agent-%d", i))
		if i%2 == 0 {
			owner.grant(id, reader.user.ID, "viewer")
		}
	}
	reader.createAgent("own")
	body := reader.do("GET", "/api/agents", nil).want(http.StatusOK).body

	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer bare.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}

	run := func(url, cookie string) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < batch/workers; i++ {
					req, _ := http.NewRequest("GET", url, nil)
					if cookie != "" {
						req.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
					}
					res, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Errorf("GET %s = %d", url, res.StatusCode)
						return
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	run(bare.URL, "") // warm both connection pools
	run(e.srv.URL+"/api/agents", reader.cookie)

	var bareTime, apiTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bareTime += run(bare.URL, "")
		apiTime += run(e.srv.URL+"/api/agents", reader.cookie)
	}
	n := float64(b.N * batch)
	bareRPS, apiRPS := n/bareTime.Seconds(), n/apiTime.Seconds()
	b.ReportMetric(bareRPS, "bare-req/s")
	b.ReportMetric(apiRPS, "api-req/s")
	b.ReportMetric(apiRPS/bareRPS, "api/bare")
}
