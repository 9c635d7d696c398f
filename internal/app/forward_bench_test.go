package app

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/pgtest"
	"corral/internal/secrets"
)

// BenchmarkForwarded: requests asked of a standby against the same asked
// of the serving control directly, in the same run; both controls on one
// PostgreSQL store, one client asking one request at a time. GET
// /api/nodes is forwarded by the standby; GET /api/agents (20 agents), a
// store read, is answered by the standby itself. Reported: each one's
// mean latency and the ratios forwarded/direct and (store read)
// standby/direct.
func BenchmarkForwarded(b *testing.B) {
	direct, via, do := twoControls(b)
	measure := func(base, path string, n int) time.Duration {
		start := time.Now()
		for range n {
			do(base, "GET", path, "", http.StatusOK)
		}
		return time.Since(start) / time.Duration(n)
	}
	for _, path := range []string{"/api/nodes", "/api/agents"} { // warm both connections
		measure(via, path, 20)
		measure(direct, path, 20)
	}
	b.ResetTimer()
	var sumDirect, sumVia, sumReadDirect, sumReadStandby time.Duration
	for range b.N {
		sumDirect += measure(direct, "/api/nodes", 50)
		sumVia += measure(via, "/api/nodes", 50)
		sumReadDirect += measure(direct, "/api/agents", 50)
		sumReadStandby += measure(via, "/api/agents", 50)
	}
	b.StopTimer()
	b.ReportMetric(float64(sumDirect.Microseconds())/float64(b.N), "direct-µs")
	b.ReportMetric(float64(sumVia.Microseconds())/float64(b.N), "forwarded-µs")
	b.ReportMetric(float64(sumVia)/float64(sumDirect), "forwarded/direct")
	b.ReportMetric(float64(sumReadDirect.Microseconds())/float64(b.N), "read-direct-µs")
	b.ReportMetric(float64(sumReadStandby.Microseconds())/float64(b.N), "read-standby-µs")
	b.ReportMetric(float64(sumReadStandby)/float64(sumReadDirect), "read-standby/direct")
}

// twoControls starts a serving control and a standby on one PostgreSQL
// store, signs a client up as the first account and makes it 20 agents.
// do asks a request of either with that client's session and fails the
// benchmark on an answer other than want.
func twoControls(b *testing.B) (direct, via string, do func(base, method, path, body string, want int)) {
	ctx := b.Context() // done before the cleanups: the standby gives up first
	db := pgtest.NewDatabase(b)
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, secrets.KeySize))
	cfg := func() Config {
		return Config{Role: "control", Data: b.TempDir(), Addr: "127.0.0.1:0", Database: db, SecretKey: key, FailoverAfter: 3 * time.Second}
	}
	a, err := New(ctx, cfg())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Close)
	ready := make(chan string, 1)
	go a.Run(ctx, ready)
	direct = "http://" + <-ready

	via = standBy(b, ctx, cfg())

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	do = func(base, method, path, body string, want int) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			b.Fatalf("%s %s%s = %d, want %d", method, base, path, res.StatusCode, want)
		}
	}
	do(direct, "POST", "/api/auth/signup", `{"email":"a@example.com","name":"A","password":"correct horse battery"}`, http.StatusCreated)
	for i := range 20 {
		do(direct, "POST", "/api/agents", fmt.Sprintf(`{"name":"agent-%d"}`, i), http.StatusCreated)
	}
	return direct, via, do
}

// BenchmarkStoreReadsSpread: 32 clients asking GET /api/agents (20
// agents) at once, all of the serving control, against the same spread
// over it and a standby (which answers it itself), in the same run.
// Reported: requests a second each way and their ratio: what a second
// control adds to read capacity (on this machine both controls, the
// database and the clients share its cores).
func BenchmarkStoreReadsSpread(b *testing.B) {
	direct, via, do := twoControls(b)
	const workers, each = 32, 16
	burst := func(bases ...string) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for i := range workers {
			base := bases[i%len(bases)]
			wg.Go(func() {
				for range each {
					do(base, "GET", "/api/agents", "", http.StatusOK)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	burst(direct, via) // warm both
	b.ResetTimer()
	var one, two time.Duration
	for range b.N {
		one += burst(direct)
		two += burst(direct, via)
	}
	b.StopTimer()
	n := float64(b.N * workers * each)
	oneRPS, twoRPS := n/one.Seconds(), n/two.Seconds()
	b.ReportMetric(oneRPS, "one-req/s")
	b.ReportMetric(twoRPS, "two-req/s")
	b.ReportMetric(twoRPS/oneRPS, "two/one")
}
