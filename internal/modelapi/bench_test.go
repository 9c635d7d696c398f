package modelapi

// BenchmarkGateway compares a streamed call through the gateway (a CLI's
// connection as a supervisor joins it, the translation, the provider's
// key, metering) with the same call made straight to the same fake
// provider, interleaved in one run:
//
//	go test -run '^$' -bench BenchmarkGateway -benchtime 200x ./internal/modelapi/
//
// Read ttfb-ratio (time to the first streamed byte) and total-ratio,
// through ÷ direct, per protocol. The provider answers like a real one,
// only faster: its first chunk after 20 ms, then 40 chunks 1 ms apart.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/gateway"
)

func benchProvider(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		time.Sleep(20 * time.Millisecond)
		for i := range 40 {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"}}]}\n\n", i)
			f.Flush()
			time.Sleep(time.Millisecond)
		}
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":40,\"total_tokens\":50}}\n\ndata: [DONE]\n\n")
		f.Flush()
	}))
	b.Cleanup(srv.Close)
	return srv
}

// timed makes one call and returns the time to its first body byte and to
// its end.
func timed(b *testing.B, do func() (*http.Response, error)) (time.Duration, time.Duration) {
	start := time.Now()
	resp, err := do()
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadByte(); err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	if resp.StatusCode != 200 {
		rest, _ := io.ReadAll(br)
		b.Fatalf("status %d: %s", resp.StatusCode, rest)
	}
	io.Copy(io.Discard, br)
	return first, time.Since(start)
}

func BenchmarkGateway(b *testing.B) {
	provider := benchProvider(b)
	gw, err := gateway.New(gateway.Config{BaseURL: provider.URL + "/v1", APIKey: "sk-bench", Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "gw.sock")
	ln, err := Listen(sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := Serve(ln, Handler(runs{}, gw, nil, slog.New(slog.DiscardHandler)))
	b.Cleanup(func() { srv.Close() })
	// What a CLI's connection is once a supervisor has joined it.
	through := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := net.Dial("unix", sock)
		if err == nil {
			_, err = io.WriteString(c, corral.GatewayPreamble("run_a"))
		}
		return c, err
	}}}
	direct := &http.Client{}
	chat := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	bodies := []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", chat},
		{"responses", "/v1/responses", `{"model":"m","stream":true,"input":"hello"}`},
		{"messages", "/v1/messages", `{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`},
	}
	for _, bb := range bodies {
		b.Run(bb.name, func(b *testing.B) {
			var dFirst, dTotal, tFirst, tTotal time.Duration
			for range b.N {
				f, t := timed(b, func() (*http.Response, error) {
					return direct.Post(provider.URL+"/v1/chat/completions", "application/json", strings.NewReader(chat))
				})
				dFirst, dTotal = dFirst+f, dTotal+t
				f, t = timed(b, func() (*http.Response, error) {
					req, _ := http.NewRequest("POST", "http://gateway"+bb.path, strings.NewReader(bb.body))
					req.Header.Set("Authorization", "Bearer crt_a")
					req.Header.Set("Content-Type", "application/json")
					return through.Do(req)
				})
				tFirst, tTotal = tFirst+f, tTotal+t
			}
			n := float64(b.N)
			b.ReportMetric(float64(tFirst)/float64(dFirst), "ttfb-ratio")
			b.ReportMetric(float64(tTotal)/float64(dTotal), "total-ratio")
			b.ReportMetric(float64(dFirst)/n/1e6, "direct-ttfb-ms")
			b.ReportMetric(float64(tFirst)/n/1e6, "gateway-ttfb-ms")
		})
	}
}
