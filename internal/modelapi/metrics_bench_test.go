package modelapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"corral/internal/abtest"
	"corral/internal/gateway"
	"corral/internal/metrics"
)

// BenchmarkMetricsGateway measures what the metrics add to an agent CLI's
// call through the gateway: a streamed Chat Completions call (authorized,
// capped, reserved, forwarded to a provider on loopback that answers at
// once, relayed, metered) served by the model API as the server mounts it
// (the metrics middleware around it, the metrics told of the call) and
// without metrics, in process. Each iteration makes one call of each, in
// alternating order; the medians are compared (abtest.Compare):
//
//	go test -run '^$' -bench MetricsGateway -benchtime 5000x -count 3 ./internal/modelapi/
//
// The figure to read is on/off (the goal is at most 1.05).
func BenchmarkMetricsGateway(b *testing.B) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"}}]}\n\n"+
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"+
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1,\"total_tokens\":11}}\n\ndata: [DONE]\n\n")
	}))
	b.Cleanup(provider.Close)
	m := metrics.New(metrics.Config{Models: []string{"test-model"}, Provider: metrics.ProviderName(provider.URL)})
	gw := func(obs *metrics.Metrics) *gateway.Gateway {
		cfg := gateway.Config{BaseURL: provider.URL + "/v1", APIKey: "sk-bench", Model: "m"}
		if obs != nil {
			cfg.Observer = obs
		}
		g, err := gateway.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	log := slog.New(slog.DiscardHandler)
	on := m.HTTP(Handler(runs{}, gw(m), m, log))
	off := Handler(runs{}, gw(nil), nil, log)
	ctx := context.WithValue(context.Background(), sessionKey{}, "run_a") // as a supervisor's connection carries it
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	serve := func(h http.Handler) time.Duration {
		req := httptest.NewRequestWithContext(ctx, "POST", "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer crt_a")
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		took := time.Since(start)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "hello") {
			b.Fatalf("the call answered %d %s", rec.Code, rec.Body)
		}
		return took
	}
	for range 100 { // warm both, and the provider's connections
		serve(on)
		serve(off)
	}
	abtest.Compare(b, "on", func() time.Duration { return serve(on) }, "off", func() time.Duration { return serve(off) })
}
