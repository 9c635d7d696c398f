// Package metrics is Corral's Prometheus families, in one place: what a
// server counts of its HTTP requests, its runs and its model calls, and
// the gauges it reads from the store when it is scraped.
//
// No label carries a run, a user, an agent or a path: a request is
// counted under its registered route pattern ("GET /api/agents/{id}"), or
// "other"; a model under its name only when the server is configured with
// it, else "other"; a status, a token type or an error kind from a closed
// set. So the number of series is bounded by the code and the
// configuration, never by what people do.
//
// The model families follow OpenTelemetry's GenAI semantic conventions
// (gen_ai.client.token.usage, gen_ai.client.operation.duration), their
// names and attributes with dots turned to underscores, and their
// buckets.
//
// The composition root (internal/app) makes one Metrics and hands it to
// what reports to it: the gateway and the model API as a
// corral.ModelObserver, the runner as its Finished hook; and it wraps the
// API's and the gateway's handlers in HTTP.
package metrics

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"corral"
)

// Other is the label value of whatever a closed set does not name: an
// unknown path's route, a model the server is not configured with.
const Other = "other"

// Config is what a Metrics labels with and reads at each scrape.
type Config struct {
	// Models are the model names the model label takes as they are (the
	// server's default and its embedding model); any other is Other.
	Models []string
	// Provider is the gen_ai_provider_name of every model call
	// (ProviderName).
	Provider string
	// Gauges are read at each scrape; a nil one's family is not exported
	// (a sandbox node has no store).
	Gauges Gauges
}

// Gauges read, at each scrape, what is rather counted where it is kept
// than kept in step by hand.
type Gauges struct {
	// Store counts what the store knows: runs not ended, change sets
	// waiting.
	Store func(context.Context) (StoreCounts, error)
	// Nodes counts the sandbox nodes by status (corral.NodeReady,
	// NodeDraining, NodeLost): a status it leaves out is 0.
	Nodes func(context.Context) (map[string]int, error)
	// Sessions counts the runs' sandbox sessions running now.
	Sessions func(context.Context) (int, error)
}

// StoreCounts is what Gauges.Store reads.
type StoreCounts struct {
	RunsActive        int // admitted, running or paused
	ChangeSetsPending int
}

// Metrics is one server's families and the registry that serves them.
// It is safe for concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	models   map[string]bool
	provider string

	runs           *prometheus.CounterVec
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	tokens         *prometheus.HistogramVec
	modelSeconds   *prometheus.HistogramVec
	budgetRefusals prometheus.Counter

	series *series // the hot paths' series, found once
}

// OpenTelemetry's advised buckets for gen_ai.client.token.usage and
// gen_ai.client.operation.duration.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// New makes the families and registers them, with the Go runtime's and
// the process's.
func New(c Config) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), models: map[string]bool{}, provider: c.Provider, series: newSeries()}
	for _, name := range c.Models {
		if name != "" {
			m.models[name] = true
		}
	}
	if m.provider == "" {
		m.provider = Other
	}
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_runs_total", Help: "Runs ended, by their final status.",
	}, []string{"status"})
	for _, s := range corral.AllRunStatuses {
		if !corral.RunActive(s) {
			m.runs.WithLabelValues(string(s)) // every final status is there from the start, at 0
		}
	}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_http_requests_total", Help: "HTTP requests answered, by route pattern and status code.",
	}, []string{"route", "code"})
	m.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "corral_http_request_duration_seconds", Help: "How long HTTP requests took to answer, by route pattern.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route"})
	m.tokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gen_ai_client_token_usage", Help: "Tokens a model call used, as the provider reported them (OpenTelemetry gen_ai.client.token.usage).",
		Buckets: tokenBuckets,
	}, []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_token_type"})
	m.modelSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gen_ai_client_operation_duration_seconds", Help: "How long model calls took (OpenTelemetry gen_ai.client.operation.duration).",
		Buckets: durationBuckets,
	}, []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "error_type"})
	m.budgetRefusals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "corral_budget_refusals_total", Help: "Model calls the gateway refused before sending them: the budget could not hold them.",
	})
	m.reg.MustRegister(m.runs, m.requests, m.requestSeconds, m.tokens, m.modelSeconds, m.budgetRefusals,
		newGauges(c.Gauges),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the families in Prometheus's text format. It asks for no
// credential: who may reach it is its mounter's decision.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is where the families are, for a test to gather.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// RunEnded counts a run that ended with status (the runner's Finished).
func (m *Metrics) RunEnded(status corral.RunStatus) {
	if !status.Valid() {
		status = corral.RunErrored // never a label value from outside the set
	}
	m.runs.WithLabelValues(string(status)).Inc()
}

// ModelCall counts one model call (corral.ModelObserver).
func (m *Metrics) ModelCall(c corral.ModelCallStats) {
	op := c.Operation
	if op != corral.ModelChat && op != corral.ModelEmbeddings {
		op = Other
	}
	model := m.model(c.Model)
	m.callSeries(callKey{op, model, failure(c.Failure)}).Observe(c.Took.Seconds())
	if !c.Reported {
		return
	}
	m.tokenSeries(tokenKey{op, model, "input"}).Observe(float64(c.Usage.Input))
	if op == corral.ModelChat { // an embedding has no output
		m.tokenSeries(tokenKey{op, model, "output"}).Observe(float64(c.Usage.Output))
	}
}

// BudgetRefused counts a call the budget refused (corral.ModelObserver).
func (m *Metrics) BudgetRefused() { m.budgetRefusals.Inc() }

// model is the model label's value for name.
func (m *Metrics) model(name string) string {
	if m.models[name] {
		return name
	}
	return Other
}

// failure keeps error_type to its closed set: "", an HTTP error status or
// "_OTHER".
func failure(f string) string {
	if f == "" || f == "_OTHER" {
		return f
	}
	if n, err := strconv.Atoi(f); err == nil && n >= 400 && n <= 599 {
		return f
	}
	return "_OTHER"
}

// ProviderName is gen_ai_provider_name for a provider at baseURL:
// OpenTelemetry's name of a provider it knows by its host, else
// "openai_compatible" (Corral speaks OpenAI's Chat Completions to it). It
// never tells the address itself.
func ProviderName(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return Other
	}
	switch h := u.Hostname(); {
	case h == "api.openai.com":
		return "openai"
	case h == "api.anthropic.com":
		return "anthropic"
	case strings.HasSuffix(h, ".openai.azure.com"):
		return "azure.ai.openai"
	}
	return "openai_compatible"
}

// scrapeTimeout bounds reading the gauges at a scrape.
const scrapeTimeout = 5 * time.Second
