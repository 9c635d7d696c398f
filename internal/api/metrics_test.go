package api_test

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"corral"
	"corral/internal/api"
	"corral/internal/modeltest"
)

// families are the metric families the operations contract names: each
// must be served once the server has run an agent.
var families = []string{
	"corral_runs_total", "corral_runs_active", "corral_http_requests_total", "corral_http_request_duration_seconds",
	"gen_ai_client_token_usage", "gen_ai_client_operation_duration_seconds", "corral_sandbox_sessions", "corral_nodes",
	"corral_change_sets_pending", "corral_budget_refusals_total",
}

// parseMetrics reads a scrape in Prometheus's text format.
func parseMetrics(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	got, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the scrape does not parse: %v\n%s", err, body)
	}
	return got
}

// scrape reads /metrics on the main port as c.
func (c *client) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	return parseMetrics(t, c.do("GET", "/metrics", nil).want(http.StatusOK).body)
}

// labelValues lists every value label name takes in family f.
func labelValues(f *dto.MetricFamily, name string) []string {
	var out []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && !slices.Contains(out, l.GetValue()) {
				out = append(out, l.GetValue())
			}
		}
	}
	slices.Sort(out)
	return out
}

// sample finds the metric of f whose labels include want.
func sample(f *dto.MetricFamily, want map[string]string) *dto.Metric {
	for _, m := range f.GetMetric() {
		n := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				n++
			}
		}
		if n == len(want) {
			return m
		}
	}
	return nil
}

// TestMetricsAfterARun: once a run has completed (a tool call, a change
// set left pending) and another has paused on a call its budget refused,
// every family of the contract is served; the counts are the run's (the
// tokens as the provider reported them, under the configured model); no
// label value anywhere is an id the test made or a raw path, and a
// hundred distinct paths add one route value each for the known pattern
// and for "other"; /metrics on the main port answers an admin only, and
// on the metrics address anyone.
func TestMetricsAfterARun(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{metricsAddr: "127.0.0.1:0"})
	admin := e.signup("admin@example.com", "Admin")
	user := e.signup("user@example.com", "User")
	id := user.createAgent("maker")
	e.answer(modeltest.Sequence(
		modeltest.Calls(modeltest.WriteCall("c1", "made.txt", "made\n")),
		modeltest.Text("made.txt is made"),
	))
	done := user.waitRun(user.send(id, "make a file").ID, "completed", "errored")
	if done.Status != "completed" || done.ChangeSetID == nil {
		t.Fatalf("run = %+v, want completed with a change set", done)
	}
	poor := user.createAgent("poor")
	user.do("PATCH", "/api/agents/"+poor, map[string]any{"budget": map[string]int{"tokens": 100}}).want(http.StatusOK)
	paused := user.waitRun(user.send(poor, "anything").ID, "paused", "completed", "errored")
	if paused.Status != "paused" {
		t.Fatalf("the run on a budget of 100 tokens = %+v, want paused", paused)
	}

	// Every family, with the counts of what happened.
	got := admin.scrape(t)
	for _, name := range families {
		if got[name] == nil {
			t.Errorf("family %s is not served", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	gauge := func(name string) float64 { return got[name].GetMetric()[0].GetGauge().GetValue() }
	if n := sample(got["corral_runs_total"], map[string]string{"status": "completed"}).GetCounter().GetValue(); n != 1 {
		t.Errorf("corral_runs_total{status=completed} = %v, want 1", n)
	}
	if n := gauge("corral_runs_active"); n != 1 {
		t.Errorf("corral_runs_active = %v, want 1 (the paused run)", n)
	}
	if n := gauge("corral_change_sets_pending"); n != 1 {
		t.Errorf("corral_change_sets_pending = %v, want 1", n)
	}
	if n := got["corral_budget_refusals_total"].GetMetric()[0].GetCounter().GetValue(); n != 1 {
		t.Errorf("corral_budget_refusals_total = %v, want 1", n)
	}
	input := sample(got["gen_ai_client_token_usage"], map[string]string{"gen_ai_operation_name": "chat",
		"gen_ai_request_model": "test-model", "gen_ai_token_type": "input", "gen_ai_provider_name": "openai_compatible"})
	if h := input.GetHistogram(); h.GetSampleCount() != 2 || h.GetSampleSum() != 2*modeltest.DefaultInputTokens {
		t.Errorf("input tokens = %d calls, %v tokens; want the provider's figures of the run's 2 calls (%d)",
			h.GetSampleCount(), h.GetSampleSum(), 2*modeltest.DefaultInputTokens)
	}
	if m := sample(got["corral_http_requests_total"], map[string]string{"route": "POST /api/agents/{id}/messages", "code": "202"}); m.GetCounter().GetValue() != 2 {
		t.Errorf("POST /api/agents/{id}/messages 202 counted %v times, want 2", m.GetCounter().GetValue())
	}

	// A hundred paths the API knows the pattern of, a hundred it does not.
	routes := labelValues(got["corral_http_requests_total"], "route")
	anon := e.anon()
	for i := range 100 {
		user.do("GET", fmt.Sprintf("/api/agents/agt_%024d", i), nil).want(http.StatusNotFound)
		anon.do("GET", fmt.Sprintf("/api/nothing/%d/here", i), nil).want(http.StatusNotFound)
	}
	got = admin.scrape(t)
	added := slices.DeleteFunc(labelValues(got["corral_http_requests_total"], "route"), func(r string) bool { return slices.Contains(routes, r) })
	if want := []string{"GET /api/agents/{id}", "other"}; !slices.Equal(added, want) && !slices.Equal(added, want[1:]) {
		t.Errorf("200 distinct paths added the route values %q, want at most %q", added, want)
	}

	// No label value is an id or a path.
	ids := []string{admin.user.ID, user.user.ID, id, poor, done.ID, paused.ID, *done.ChangeSetID}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		for _, m := range got[name].GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				for _, bad := range ids {
					if strings.Contains(v, bad) {
						t.Errorf("%s{%s=%q} carries an id of the test", name, l.GetName(), v)
					}
				}
				if strings.Contains(v, "/") && !strings.Contains(v, " /") {
					t.Errorf("%s{%s=%q} looks like a raw path, not a route pattern", name, l.GetName(), v)
				}
				if strings.Contains(v, "agt_0") || strings.Contains(v, "/nothing/") {
					t.Errorf("%s{%s=%q} carries a path the test asked for", name, l.GetName(), v)
				}
			}
		}
	}

	// Who may read them: on the main port an admin, by session or token.
	anon.do("GET", "/metrics", nil).want(http.StatusUnauthorized)
	user.do("GET", "/metrics", nil).want(http.StatusForbidden)
	var tok api.TokenView
	admin.do("POST", "/api/tokens", map[string]string{"name": "prometheus"}).want(http.StatusCreated).decode(&tok)
	(&client{e: e, bearer: tok.Token}).scrape(t)
	// On the metrics address anyone: the operator chose who reaches it.
	for _, c := range []struct {
		path string
		want string
	}{
		{"/metrics", "corral_runs_total"},
		{"/healthz", `{"status":"ok"}`},
		{"/readyz", `"provider":"ok"`},
	} {
		res, err := http.Get("http://" + e.app.MetricsAddr() + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), c.want) {
			t.Errorf("GET %s on the metrics address = %d %.300s, want 200 with %s", c.path, res.StatusCode, body, c.want)
		}
	}
}

// TestMetricsOfAnAgentCLI: an agent CLI's calls to the gateway from its
// sandbox count under the gateway's route pattern, and their tokens as
// the provider reported them, under the configured model.
func TestMetricsOfAnAgentCLI(t *testing.T) {
	needTools(t, corral.DriverCodex)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("cli")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": corral.DriverCodex}).want(http.StatusOK)
	e.answer(func(modeltest.Request) modeltest.Reply { return modeltest.Text("done") })
	done := owner.waitRun(owner.send(id, "say done").ID, "completed", "errored", "killed", "cancelled", "paused")
	if done.Status != "completed" {
		t.Fatalf("run = %+v", done)
	}
	calls := len(e.model.Requests())
	got := owner.scrape(t)
	if m := sample(got["corral_http_requests_total"], map[string]string{"route": "POST /v1/responses", "code": "200"}); m.GetCounter().GetValue() != float64(calls) {
		t.Errorf("POST /v1/responses 200 counted %v times for %d provider calls; routes %q", m.GetCounter().GetValue(), calls,
			labelValues(got["corral_http_requests_total"], "route"))
	}
	input := sample(got["gen_ai_client_token_usage"], map[string]string{"gen_ai_request_model": "test-model", "gen_ai_token_type": "input"})
	if h := input.GetHistogram(); h.GetSampleCount() != uint64(calls) || h.GetSampleSum() != float64(calls*modeltest.DefaultInputTokens) {
		t.Errorf("input tokens = %d calls, %v tokens; want the provider's figures of %d calls", h.GetSampleCount(), h.GetSampleSum(), calls)
	}
}
