package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"corral"
	"corral/internal/modeltest"
)

// TestObserverTold: each call Complete and Embed make is told once when
// it ends, its last try's outcome (the provider's usage when it reported
// it, its status when it failed), with the model asked for; a call whose
// reservation the budget refused is told as a refusal, and as no call.
func TestObserverTold(t *testing.T) {
	chat := func(g *Gateway, m corral.Meter) error {
		_, err := g.Complete(context.Background(), corral.ModelRequest{Model: "chat-x", Messages: hi}, m)
		return err
	}
	streamed := func(g *Gateway, m corral.Meter) error {
		_, err := g.Complete(context.Background(), corral.ModelRequest{Messages: hi, OnDelta: func(corral.ModelDelta) {}}, m)
		return err
	}
	embed := func(g *Gateway, m corral.Meter) error {
		_, _, err := g.Embed(context.Background(), embedModel, []string{"one two"}, m)
		return err
	}
	refused := corral.Errorf(corral.EADMISSION, "the agent's token budget cannot hold the next model call")
	cases := []struct {
		name    string
		reply   modeltest.Reply
		call    func(*Gateway, corral.Meter) error
		meter   *meter
		want    []corral.ModelCallStats
		refused int
	}{
		{"whole", modeltest.Text("hi"), chat, &meter{}, []corral.ModelCallStats{{Operation: "chat", Model: "chat-x",
			Usage: corral.Tokens{Input: modeltest.DefaultInputTokens, Output: modeltest.DefaultOutputTokens}, Reported: true}}, 0},
		{"streamed, the default model", modeltest.Text("hi"), streamed, &meter{}, []corral.ModelCallStats{{Operation: "chat", Model: "default-model",
			Usage: corral.Tokens{Input: modeltest.DefaultInputTokens, Output: modeltest.DefaultOutputTokens}, Reported: true}}, 0},
		{"no usage", modeltest.Reply{Content: "hi", NoUsage: true}, chat, &meter{},
			[]corral.ModelCallStats{{Operation: "chat", Model: "chat-x", Failure: "_OTHER"}}, 0},
		{"failed after its retries", modeltest.Reply{Status: http.StatusServiceUnavailable}, chat, &meter{},
			[]corral.ModelCallStats{{Operation: "chat", Model: "chat-x", Failure: "503"}}, 0},
		{"embeddings", modeltest.Text("unused"), embed, &meter{},
			[]corral.ModelCallStats{{Operation: "embeddings", Model: embedModel, Usage: corral.Tokens{Input: 2}, Reported: true}}, 0},
		{"budget refused", modeltest.Text("hi"), chat, &meter{checkErr: refused}, nil, 1},
		{"embedding refused", modeltest.Text("hi"), embed, &meter{checkErr: refused}, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := modeltest.New(func(modeltest.Request) modeltest.Reply { return c.reply })
			defer p.Close()
			o := &modeltest.Observer{}
			g, err := New(Config{BaseURL: p.URL(), APIKey: testKey, Model: "default-model", Sleep: (&waits{}).sleep, Observer: o})
			if err != nil {
				t.Fatal(err)
			}
			c.call(g, c.meter)
			calls, refused, timed := o.Calls()
			if !timed || len(calls) != len(c.want) || (len(c.want) > 0 && calls[0] != c.want[0]) || refused != c.refused {
				t.Errorf("observed %+v (timed %v) and %d refusals, want %+v and %d", calls, timed, refused, c.want, c.refused)
			}
		})
	}
}

// TestProbe: a provider that answers, even without a list of models, is
// ready; one that refuses the key, fails, or cannot be reached is not,
// and says so without its address or the key.
func TestProbe(t *testing.T) {
	cases := []struct {
		name   string
		status int // 0: nothing listens
		want   string
	}{
		{"lists its models", http.StatusOK, ""},
		{"lists none", http.StatusNotFound, ""},
		{"refuses the key", http.StatusUnauthorized, "refused the credentials (401)"},
		{"fails", http.StatusBadGateway, "answered 502 Bad Gateway"},
		{"unreachable", 0, "could not be reached"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer "+testKey {
					t.Errorf("probe asked %s with %q", r.URL.Path, r.Header.Get("Authorization"))
				}
				w.WriteHeader(c.status)
			}))
			url := srv.URL
			if c.status == 0 {
				srv.Close()
			} else {
				defer srv.Close()
			}
			g, err := New(Config{BaseURL: url + "/v1", APIKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			err = g.Probe(context.Background())
			if msg := corral.ErrorMessage(err); (c.want == "") != (err == nil) || !strings.Contains(msg, c.want) ||
				strings.Contains(msg, strings.TrimPrefix(url, "http://")) || strings.Contains(msg, testKey) {
				t.Errorf("Probe() = %v (%q), want %q", err, msg, c.want)
			}
		})
	}
}
