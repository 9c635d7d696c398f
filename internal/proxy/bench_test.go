package proxy

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"corral"
)

// The benchmarks measure the proxy against the same requests made
// directly, in the same run and interleaved, and report ratios: a loaded
// machine slows both alike. Run them with
//
//	GOTOOLCHAIN=go1.27.3 go test -run '^$' -bench . -benchtime 2000x ./internal/proxy
//
// (Download100MB runs far fewer iterations than 2000 in the time the
// others take; give it -benchtime 5x on its own.)

// benchPair is an upstream and two clients of it: one direct, one
// through the proxy.
func benchPair(b *testing.B, keepAlive bool, rule corral.EgressRule) (up *upstream, direct, proxied *http.Client) {
	up = newUpstream(b, true)
	f := newFixture(b, func(c *Config) { c.Log = nil; c.MaxBytes = 1 << 50; c.MaxConns = 1 << 40 })
	rule.Ports = []int{up.port}
	f.allow(rule)
	_, pool := upstreamCert()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: !keepAlive}
	b.Cleanup(tr.CloseIdleConnections)
	return up, &http.Client{Transport: tr}, f.client("bench", keepAlive)
}

func timedGet(b *testing.B, c *http.Client, url string) time.Duration {
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	return time.Since(start)
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkHTTPSLatency: sequential GETs of a small body. "newconn" makes
// a new connection (TCP, CONNECT, TLS) for every request; "keepalive"
// reuses one tunnel; "terminated-keepalive" is a rule with methods, which
// the proxy terminates and forwards on its own TLS connection.
func BenchmarkHTTPSLatency(b *testing.B) {
	for _, bc := range []struct {
		name      string
		keepAlive bool
		rule      corral.EgressRule
	}{
		{"newconn", false, corral.EgressRule{Host: "localhost"}},
		{"keepalive", true, corral.EgressRule{Host: "localhost"}},
		{"terminated-keepalive", true, corral.EgressRule{Host: "localhost", Methods: []string{"GET"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			up, direct, proxied := benchPair(b, bc.keepAlive, bc.rule)
			url := up.url("localhost", "/small")
			timedGet(b, direct, url) // warm both: the first request of a keep-alive client connects
			timedGet(b, proxied, url)
			d, p := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Alternate which goes first, so neither always finds the
				// machine warmer.
				if i%2 == 0 {
					d = append(d, timedGet(b, direct, url))
					p = append(p, timedGet(b, proxied, url))
				} else {
					p = append(p, timedGet(b, proxied, url))
					d = append(d, timedGet(b, direct, url))
				}
			}
			b.StopTimer()
			for _, q := range []struct {
				name string
				p    float64
			}{{"p50", 0.50}, {"p99", 0.99}} {
				dq, pq := percentile(d, q.p), percentile(p, q.p)
				b.ReportMetric(float64(dq.Nanoseconds())/1e3, q.name+"-direct-µs")
				b.ReportMetric(float64(pq.Nanoseconds())/1e3, q.name+"-proxy-µs")
				b.ReportMetric(float64(pq)/float64(dq), q.name+"-ratio")
			}
		})
	}
}

// BenchmarkDownload100MB: one 100 MB body through a tunnel and directly;
// the ratio is the proxy's throughput over the direct one.
func BenchmarkDownload100MB(b *testing.B) {
	const size = 100 << 20
	up, direct, proxied := benchPair(b, true, corral.EgressRule{Host: "localhost"})
	url := up.url("localhost", fmt.Sprintf("/big?n=%d", size))
	timedGet(b, direct, up.url("localhost", "/warm"))
	timedGet(b, proxied, up.url("localhost", "/warm"))
	var d, p time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			d += timedGet(b, direct, url)
			p += timedGet(b, proxied, url)
		} else {
			p += timedGet(b, proxied, url)
			d += timedGet(b, direct, url)
		}
	}
	b.StopTimer()
	mbps := func(t time.Duration) float64 { return float64(size) * float64(b.N) / t.Seconds() / (1 << 20) }
	b.ReportMetric(mbps(d), "direct-MB/s")
	b.ReportMetric(mbps(p), "proxy-MB/s")
	b.ReportMetric(float64(d)/float64(p), "throughput-ratio")
}
