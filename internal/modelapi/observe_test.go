package modelapi

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"corral"
	"corral/internal/gateway"
	"corral/internal/modeltest"
)

// poorGrant is a grant whose budget holds no call.
type poorGrant struct{ grant }

func (poorGrant) Reserve(context.Context, int64) error {
	return corral.Errorf(corral.EADMISSION, "the agent's token budget cannot hold the next model call")
}

type poorRuns struct{}

func (poorRuns) Authorize(context.Context, string) (corral.CLIGrant, error) { return poorGrant{}, nil }

// TestObserved: each agent CLI's call is told to the observer once, with
// the agent's model, the provider's own usage (none when the provider
// reported none and the tokens were estimated: a failure, as the gateway
// counts it), and its failure as the provider's status; a call the budget refused is told as a refusal, and
// as no call.
func TestObserved(t *testing.T) {
	cases := []struct {
		name    string
		runs    Runs
		reply   modeltest.Reply
		status  int
		want    []corral.ModelCallStats // Took left out
		refused int
	}{
		{"answered", runs{}, modeltest.Text("hi"), http.StatusOK, []corral.ModelCallStats{{Operation: "chat", Model: "test-model",
			Usage: corral.Tokens{Input: modeltest.DefaultInputTokens, Output: modeltest.DefaultOutputTokens}, Reported: true}}, 0},
		{"no usage reported", runs{}, modeltest.Reply{Content: "hi", NoUsage: true}, http.StatusOK,
			[]corral.ModelCallStats{{Operation: "chat", Model: "test-model", Failure: "_OTHER"}}, 0},
		{"provider failed", runs{}, modeltest.Reply{Status: http.StatusServiceUnavailable}, http.StatusServiceUnavailable,
			[]corral.ModelCallStats{{Operation: "chat", Model: "test-model", Failure: "503"}}, 0},
		{"budget refused", poorRuns{}, modeltest.Text("hi"), http.StatusPaymentRequired, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			provider := modeltest.New(func(modeltest.Request) modeltest.Reply { return c.reply })
			defer provider.Close()
			gw, err := gateway.New(gateway.Config{BaseURL: provider.URL(), APIKey: "sk-observed", Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			obs := &modeltest.Observer{}
			dial := serveHandler(t, Handler(c.runs, gw, obs, slog.New(slog.DiscardHandler)))
			status, body := doBody(t, dial(corral.GatewayPreamble("run_a")), "POST", "/v1/chat/completions",
				`{"model":"any","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Authorization": "Bearer crt_a"})
			if status != c.status {
				t.Fatalf("status %d %s, want %d", status, body, c.status)
			}
			calls, refused, timed := obs.Calls()
			if !timed || len(calls) != len(c.want) || (len(c.want) > 0 && calls[0] != c.want[0]) || refused != c.refused {
				t.Errorf("observed %+v (timed %v) and %d refusals, want %+v and %d", calls, timed, refused, c.want, c.refused)
			}
		})
	}
}
