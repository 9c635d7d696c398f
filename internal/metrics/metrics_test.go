package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"corral"
)

// TestRouteLabel: a request counts under the pattern its mux matched,
// never its path; one the mux knows no pattern for, or that only the
// outer mux matched, counts as other; the code is the one sent, 200 for
// an answer that wrote nothing.
func TestRouteLabel(t *testing.T) {
	inner := http.NewServeMux()
	inner.HandleFunc("GET /api/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	inner.HandleFunc("GET /api/quiet", func(w http.ResponseWriter, r *http.Request) {})
	inner.HandleFunc("GET /api/flushed", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("x"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush through the middleware: %v", err)
		}
	})
	cases := []struct {
		name, path  string
		mount       bool // behind an outer mux, as the API is
		route, code string
	}{
		{"a pattern", "/api/things/thg_123", false, "GET /api/things/{id}", "201"},
		{"mounted", "/api/things/thg_456", true, "GET /api/things/{id}", "201"},
		{"nothing written", "/api/quiet", false, "GET /api/quiet", "200"},
		{"flushed", "/api/flushed", true, "GET /api/flushed", "200"},
		{"unknown", "/api/nothing/1", false, Other, "404"},
		{"unknown, mounted", "/api/nothing/2", true, Other, "404"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := New(Config{})
			var h http.Handler = m.HTTP(inner)
			if c.mount {
				outer := http.NewServeMux()
				outer.Handle("/api/", h)
				h = outer
			}
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", c.path, nil))
			if n := testutil.ToFloat64(m.requests.WithLabelValues(c.route, c.code)); n != 1 {
				t.Errorf("GET %s: counted %v under {route=%q, code=%q}, want 1", c.path, n, c.route, c.code)
			}
			if n := testutil.CollectAndCount(m.requests); n != 1 {
				t.Errorf("GET %s: %d series, want 1", c.path, n)
			}
		})
	}
}

// TestModelLabelsBounded: the model label is a configured model or
// other, the operation and the error kind come from closed sets, and a
// call without the provider's usage adds no tokens.
func TestModelLabelsBounded(t *testing.T) {
	cases := []struct {
		name                     string
		call                     corral.ModelCallStats
		op, model, failure       string
		inputs, outputs, seconds int
	}{
		{"configured", corral.ModelCallStats{Operation: corral.ModelChat, Model: "gpt-x", Reported: true, Usage: corral.Tokens{Input: 10, Output: 5}},
			"chat", "gpt-x", "", 1, 1, 1},
		{"another model", corral.ModelCallStats{Operation: corral.ModelChat, Model: "someone's-own-model", Reported: true},
			"chat", Other, "", 1, 1, 1},
		{"embeddings", corral.ModelCallStats{Operation: corral.ModelEmbeddings, Model: "embed-x", Reported: true, Usage: corral.Tokens{Input: 7}},
			"embeddings", "embed-x", "", 1, 0, 1},
		{"no usage", corral.ModelCallStats{Operation: corral.ModelChat, Model: "gpt-x", Failure: "503"},
			"chat", "gpt-x", "503", 0, 0, 1},
		{"odd failure", corral.ModelCallStats{Operation: corral.ModelChat, Model: "gpt-x", Failure: "run_123 went wrong"},
			"chat", "gpt-x", "_OTHER", 0, 0, 1},
		{"odd operation", corral.ModelCallStats{Operation: "run_123", Model: "gpt-x"},
			Other, "gpt-x", "", 0, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := New(Config{Models: []string{"gpt-x", "embed-x", ""}, Provider: "openai"})
			m.ModelCall(c.call)
			if n := testutil.CollectAndCount(m.modelSeconds); n != c.seconds {
				t.Errorf("%d duration series, want %d", n, c.seconds)
			}
			if n := testutil.CollectAndCount(m.tokens); n != c.inputs+c.outputs {
				t.Errorf("%d token series, want %d", n, c.inputs+c.outputs)
			}
			want := "gen_ai_operation_name=\"" + c.op + "\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"" + c.model + "\""
			if !strings.Contains(scrape(t, m), want) {
				t.Errorf("no series with %s in\n%s", want, scrape(t, m))
			}
		})
	}
}

// scrape is what the handler serves.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	return rec.Body.String()
}

// TestGaugesAtScrape: the gauges are what their functions read at each
// scrape, every node status even at 0; one that fails leaves the others
// served; a role without one does not export its family.
func TestGaugesAtScrape(t *testing.T) {
	runs := 3
	m := New(Config{Gauges: Gauges{
		Store: func(context.Context) (StoreCounts, error) {
			return StoreCounts{RunsActive: runs, ChangeSetsPending: 2}, nil
		},
		Nodes:    func(context.Context) (map[string]int, error) { return map[string]int{corral.NodeReady: 1}, nil },
		Sessions: func(context.Context) (int, error) { return 0, errors.New("the sessions directory is gone") },
	}})
	for _, want := range []string{"corral_runs_active 3", "corral_change_sets_pending 2",
		`corral_nodes{status="ready"} 1`, `corral_nodes{status="draining"} 0`, `corral_nodes{status="lost"} 0`} {
		if got := scrape(t, m); !strings.Contains(got, want+"\n") {
			t.Errorf("no %q in the scrape", want)
		}
	}
	runs = 4
	if got := scrape(t, m); !strings.Contains(got, "corral_runs_active 4\n") || strings.Contains(got, "corral_sandbox_sessions") {
		t.Errorf("the second scrape does not read the store again, or serves the failed gauge:\n%s", got)
	}
	node := New(Config{Gauges: Gauges{Sessions: func(context.Context) (int, error) { return 2, nil }}})
	got := scrape(t, node)
	if !strings.Contains(got, "corral_sandbox_sessions 2\n") || strings.Contains(got, "corral_runs_active") || strings.Contains(got, "corral_nodes") {
		t.Errorf("a node's scrape:\n%s", got)
	}
}

// TestRunsCounted: every final status is served from the start at 0; a
// status outside the set counts as errored.
func TestRunsCounted(t *testing.T) {
	m := New(Config{})
	if n := testutil.CollectAndCount(m.runs); n != 5 {
		t.Fatalf("%d run status series before any run, want the 5 final statuses", n)
	}
	m.RunEnded(corral.RunCompleted)
	m.RunEnded("run_123")
	if testutil.ToFloat64(m.runs.WithLabelValues("completed")) != 1 || testutil.ToFloat64(m.runs.WithLabelValues("errored")) != 1 {
		t.Fatalf("runs:\n%s", scrape(t, m))
	}
	if n := testutil.CollectAndCount(m.runs); n != 5 {
		t.Fatalf("%d run status series, want 5", n)
	}
}

// TestProviderName: a provider OpenTelemetry names is named so; any other
// address is one value that tells nothing of it.
func TestProviderName(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"https://api.openai.com/v1", "openai"},
		{"https://api.anthropic.com/v1", "anthropic"},
		{"https://corp.openai.azure.com/openai", "azure.ai.openai"},
		{"http://10.0.0.7:11434/v1", "openai_compatible"},
		{"", Other},
	} {
		if got := ProviderName(c.url); got != c.want {
			t.Errorf("ProviderName(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}

// TestCodeText: a status outside HTTP's range is one value.
func TestCodeText(t *testing.T) {
	for _, c := range []struct {
		status int
		want   string
	}{{0, "200"}, {101, "101"}, {404, "404"}, {599, "599"}, {600, Other}, {-1, Other}} {
		if got := codeText(c.status); got != c.want {
			t.Errorf("codeText(%d) = %q, want %q", c.status, got, c.want)
		}
	}
}

// TestConcurrentRequests: requests and calls counted from many goroutines
// at once are all counted (run under -race).
func TestConcurrentRequests(t *testing.T) {
	m := New(Config{Models: []string{"m"}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /a/{id}", func(w http.ResponseWriter, r *http.Request) {})
	h := m.HTTP(mux)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 100 {
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/a/"+strconv.Itoa(i), nil))
				m.ModelCall(corral.ModelCallStats{Operation: corral.ModelChat, Model: "m", Reported: true})
			}
		})
	}
	wg.Wait()
	if n := testutil.ToFloat64(m.requests.WithLabelValues("GET /a/{id}", "200")); n != 800 {
		t.Errorf("counted %v requests, want 800", n)
	}
	if n := testutil.CollectAndCount(m.requests); n != 1 {
		t.Errorf("%d request series, want 1", n)
	}
}
