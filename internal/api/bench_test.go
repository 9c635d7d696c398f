package api_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"corral/internal/api"
)

// BenchmarkListAgents measures an authenticated GET /api/agents (session
// lookup, fresh access computation, JSON views) for a caller who sees 20
// agents, against a bare net/http handler that writes the same bytes, over
// real loopback TCP with 32 concurrent workers (the issue measured it with
// wrk and 32 connections), in the same run. Each iteration is one batch of
// each, interleaved, so machine noise falls on both alike. The figure to
// read is api/bare. Sub-benchmarks: the store in SQLite, and in PostgreSQL
// (a local server the benchmark starts, on loopback).
func BenchmarkListAgents(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		b.Run(engine, func(b *testing.B) { benchmarkListAgents(b, envOptions{postgres: engine == "postgres"}) })
	}
}

func benchmarkListAgents(b *testing.B, opt envOptions) {
	const (
		workers = 32
		batch   = 32 * 16
		agents  = 20 // the reader sees this many
	)
	e := newEnv(b, opt)
	owner := e.signup("owner@example.com", "Owner")
	reader := e.signup("reader@example.com", "Reader")
	other := e.signup("other@example.com", "Other")
	// The reader reaches its 20 agents by every path: 5 it owns, 10
	// granted at each level, 5 through share links. The owner has 25 more
	// the reader cannot see (some shared with someone else), so the query
	// has rows to leave out.
	levels := []string{"viewer", "runner", "editor"}
	for i := range 40 {
		id := owner.createAgent(fmt.Sprintf("agent-%d", i))
		switch {
		case i < 10:
			owner.grant(id, reader.user.ID, levels[i%3])
		case i < 15:
			link := owner.link(id, "viewer")
			reader.do("POST", "/api/links/"+link.Token+"/accept", nil).want(http.StatusOK)
		case i < 20:
			// the owner's alone
		default:
			owner.grant(id, other.user.ID, "viewer")
		}
	}
	for i := range 5 {
		reader.createAgent(fmt.Sprintf("own-%d", i))
	}
	var listed api.List[api.AgentView]
	res := reader.do("GET", "/api/agents", nil).want(http.StatusOK)
	res.decode(&listed)
	if len(listed.Items) != agents {
		b.Fatalf("reader sees %d agents, want %d", len(listed.Items), agents)
	}
	body := res.body

	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer bare.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}

	run := func(url, cookie string) (wall, cpu time.Duration) {
		start, cpu0 := time.Now(), processCPU()
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range batch / workers {
					req, _ := http.NewRequest("GET", url, nil)
					if cookie != "" {
						req.AddCookie(&http.Cookie{Name: api.CookieName, Value: cookie})
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
			})
		}
		wg.Wait()
		return time.Since(start), processCPU() - cpu0
	}
	run(bare.URL, "") // warm both connection pools
	run(e.srv.URL+"/api/agents", reader.cookie)

	var bareTime, apiTime, bareCPU, apiCPU time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wall, cpu := run(bare.URL, "")
		bareTime, bareCPU = bareTime+wall, bareCPU+cpu
		wall, cpu = run(e.srv.URL+"/api/agents", reader.cookie)
		apiTime, apiCPU = apiTime+wall, apiCPU+cpu
	}
	n := float64(b.N * batch)
	bareRPS, apiRPS := n/bareTime.Seconds(), n/apiTime.Seconds()
	b.ReportMetric(bareRPS, "bare-req/s")
	b.ReportMetric(apiRPS, "api-req/s")
	b.ReportMetric(apiRPS/bareRPS, "api/bare")
	// The same ratio by CPU time per request (server and client, which
	// share this process): steadier than throughput on a busy machine,
	// where other processes take the cores at random.
	b.ReportMetric(float64(bareCPU.Microseconds())/n, "bare-cpu-µs/req")
	b.ReportMetric(float64(apiCPU.Microseconds())/n, "api-cpu-µs/req")
	b.ReportMetric(float64(bareCPU)/float64(apiCPU), "api/bare-cpu")
}
