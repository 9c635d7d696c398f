package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"corral/internal/pgtest"
	"corral/internal/poll"
	"corral/internal/secrets"
)

// BenchmarkForwarded: GET /api/agents (20 agents) asked of a standby,
// which forwards it to the serving control, against the same request
// asked of the serving control directly, in the same run; both controls
// on one PostgreSQL store, one client asking one request at a time.
// Reported: each one's mean latency and their ratio.
func BenchmarkForwarded(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := pgtest.NewDatabase(b)
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, secrets.KeySize))
	cfg := func() Config {
		return Config{Role: "control", Data: b.TempDir(), Addr: "127.0.0.1:0", Database: db, SecretKey: key, FailoverAfter: 3 * time.Second}
	}
	a, err := New(ctx, cfg())
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ready := make(chan string, 1)
	go a.Run(ctx, ready)
	direct := "http://" + <-ready

	// The standby on a port found free a moment ago.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	standby := cfg()
	standby.Addr = ln.Addr().String()
	ln.Close()
	standbyDone := make(chan struct{})
	go func() {
		defer close(standbyDone)
		if s, err := New(ctx, standby); err == nil {
			s.Close()
		}
	}()
	defer func() { cancel(); <-standbyDone }()
	via := "http://" + standby.Addr
	poll.Until(b, "the second control to stand by, forwarding", func() bool {
		res, err := http.Get(via + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	do := func(base, method, path, body string, want int) {
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
	measure := func(base string, n int) time.Duration {
		start := time.Now()
		for range n {
			do(base, "GET", "/api/agents", "", http.StatusOK)
		}
		return time.Since(start) / time.Duration(n)
	}
	measure(via, 20) // warm both connections
	measure(direct, 20)
	b.ResetTimer()
	var sumDirect, sumVia time.Duration
	for range b.N {
		sumDirect += measure(direct, 50)
		sumVia += measure(via, 50)
	}
	b.StopTimer()
	b.ReportMetric(float64(sumDirect.Microseconds())/float64(b.N), "direct-µs")
	b.ReportMetric(float64(sumVia.Microseconds())/float64(b.N), "forwarded-µs")
	b.ReportMetric(float64(sumVia)/float64(sumDirect), "forwarded/direct")
}
