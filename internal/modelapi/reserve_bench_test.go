package modelapi

// BenchmarkReservation compares a streamed call through the gateway whose
// grant reserves its ceiling in a real SQLite store before it is sent and
// settles it after (what a run's grant does: the agent read, the
// reservation, the settlement) with the same call under a grant that
// meters nothing, interleaved in one run:
//
//	go test -run '^$' -bench BenchmarkReservation -benchtime 200x ./internal/modelapi/
//
// Read total-ratio (reserving ÷ metering nothing), per protocol: it bounds
// what the reservation costs, since the baseline has no metering at all.
// The provider is BenchmarkGateway's (its answer in about 60 ms); a real
// model's calls take seconds, and the ratio is smaller still.

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/gateway"
	"corral/internal/store"
)

// storeGrant reserves and settles on a real store, as runner.Grant does.
type storeGrant struct {
	grant
	db      *store.DB
	agentID string
	resID   string
	ceiling int64
}

func (g *storeGrant) Reserve(ctx context.Context, ceiling int64) error {
	if _, err := g.db.Agent(ctx, g.agentID, ""); err != nil {
		return err
	}
	res, err := g.db.Reserve(ctx, corral.Hold{AgentID: g.agentID, Tokens: ceiling})
	if err != nil {
		return err
	}
	g.resID, g.ceiling = res.ID, ceiling
	return nil
}

func (g *storeGrant) Record(ctx context.Context, u corral.Tokens, reported bool, _ corral.CLICall) error {
	t, _ := corral.Charge(u, reported, g.ceiling)
	_, err := g.db.Settle(ctx, g.resID, t, time.Time{})
	return err
}

type grantRuns struct{ g corral.CLIGrant }

func (r grantRuns) Authorize(context.Context, string) (corral.CLIGrant, error) { return r.g, nil }

func BenchmarkReservation(b *testing.B) {
	ctx := context.Background()
	provider := benchProvider(b)
	gw, err := gateway.New(gateway.Config{BaseURL: provider.URL + "/v1", APIKey: "sk-bench", Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "corral.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	u, err := db.CreateUser(ctx, corral.NewUser{Email: "bench@example.com", Name: "bench", PasswordHash: "$argon2id$fake"})
	if err != nil {
		b.Fatal(err)
	}
	agent := corral.Agent{ID: corral.NewID("agt"), Name: "bench", Owner: corral.UserRef{ID: u.ID},
		Policy: corral.Policy{FS: corral.DefaultFS, Changes: corral.DefaultChanges, Network: corral.NetworkNone},
		State:  corral.StateActive, Budget: corral.Budget{Tokens: 1 << 50}}
	if err := db.CreateAgent(ctx, agent); err != nil {
		b.Fatal(err)
	}
	client := func(g corral.CLIGrant) *http.Client {
		sock := filepath.Join(b.TempDir(), "gw.sock")
		ln, err := Listen(sock)
		if err != nil {
			b.Fatal(err)
		}
		srv := Serve(ln, Handler(grantRuns{g}, gw, nil, slog.New(slog.DiscardHandler)))
		b.Cleanup(func() { srv.Close() })
		return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := net.Dial("unix", sock)
			if err == nil {
				_, err = io.WriteString(c, corral.GatewayPreamble("run_a"))
			}
			return c, err
		}}}
	}
	reserving := client(&storeGrant{db: db, agentID: agent.ID})
	bare := client(grant{})
	bodies := []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`},
		{"responses", "/v1/responses", `{"model":"m","stream":true,"input":"hello"}`},
		{"messages", "/v1/messages", `{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`},
	}
	for _, bb := range bodies {
		b.Run(bb.name, func(b *testing.B) {
			call := func(c *http.Client) func() (*http.Response, error) {
				return func() (*http.Response, error) {
					req, _ := http.NewRequest("POST", "http://gateway"+bb.path, strings.NewReader(bb.body))
					req.Header.Set("Authorization", "Bearer crt_a")
					req.Header.Set("Content-Type", "application/json")
					return c.Do(req)
				}
			}
			var bareTotal, resTotal int64
			for range b.N {
				_, t := timed(b, call(bare))
				bareTotal += int64(t)
				_, t = timed(b, call(reserving))
				resTotal += int64(t)
			}
			b.ReportMetric(float64(resTotal)/float64(bareTotal), "total-ratio")
			b.ReportMetric(float64(resTotal-bareTotal)/float64(b.N)/1e3, "reserve-us/call")
		})
	}
	a, err := db.Agent(ctx, agent.ID, "")
	if err != nil || a.Budget.Reserved != 0 || a.Budget.Used == 0 {
		b.Fatalf("after the benchmark: %+v, %v; want every call settled", a.Budget, err)
	}
}
