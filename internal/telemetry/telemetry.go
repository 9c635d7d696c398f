// Package telemetry sends OpenTelemetry traces of agent runs to the
// operator's collector over OTLP/HTTP, in the GenAI semantic conventions:
// an invoke_agent span for each run, and under it a chat span for each
// model call and an execute_tool span for each tool call.
//
// It is the one package of the server that imports OpenTelemetry (the
// import rules say so): the runner and the gateway speak to it in its own
// few words (Run, Chat, Tool, Env), so the SDK stays behind this package.
//
// Tracing is off unless an endpoint is configured. Then New gives a Tracer
// over OpenTelemetry's no-op provider, and every Start returns at once: no
// span, no exporter, no goroutine, nothing allocated. With an endpoint,
// ended spans go through the SDK's batch span processor to the exporter;
// Close flushes them.
//
// No span carries content. The conventions make capturing prompts,
// answers, tool arguments and results opt-in; Corral does not offer it.
// Spans hold names, ids, models, token counts, statuses and low-
// cardinality error kinds only: never a message, a tool's arguments or
// output, a file, a token or a key.
package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"corral"
)

// scope is the instrumentation scope the spans are made under.
const scope = "corral"

// Config says where spans go.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP URL: its base
	// (http://collector:4318), to which /v1/traces is added, or the whole
	// URL of its traces. "" turns tracing off.
	Endpoint string
	// Version is the server's, for the spans' resource (service.version).
	Version string
}

// Tracer makes the spans of runs. A nil *Tracer, like one made without an
// endpoint, makes none. It is safe for concurrent use.
type Tracer struct {
	sdk    *sdktrace.TracerProvider // nil: tracing is off
	tracer trace.Tracer
}

// New returns a Tracer that exports to c.Endpoint, or, without one, a
// Tracer over the no-op provider. Nothing is sent until a span ends: a
// collector that is down costs dropped spans, never a run.
//
// The SDK also reads the standard OTEL_* variables that the options here
// leave open: OTEL_EXPORTER_OTLP_HEADERS (a collector's credentials),
// OTEL_TRACES_SAMPLER, OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME and the
// batch processor's OTEL_BSP_*. None of them turns tracing on.
func New(ctx context.Context, c Config) (*Tracer, error) {
	if c.Endpoint == "" {
		return &Tracer{tracer: noop.NewTracerProvider().Tracer(scope)}, nil
	}
	endpoint, err := EndpointURL(c.Endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("the OTLP exporter: %w", err)
	}
	// The operator's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES come
	// after Corral's own, and win.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "corral"), attribute.String("service.version", c.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("the spans' resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(treeIDs{}),
	)
	return &Tracer{sdk: sdk, tracer: sdk.Tracer(scope)}, nil
}

// EndpointURL is the URL spans are posted to for the endpoint as an
// operator names it: an http or https URL with a host and no credentials
// (those go in OTEL_EXPORTER_OTLP_HEADERS, out of the process listing);
// /v1/traces is added to one without a path. Code EINVALID.
func EndpointURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "", corral.Errorf(corral.EINVALID, "the OTLP endpoint must be an http or https URL, such as http://127.0.0.1:4318")
	case u.User != nil:
		return "", corral.Errorf(corral.EINVALID, "the OTLP endpoint must not carry credentials: put them in OTEL_EXPORTER_OTLP_HEADERS")
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// On reports whether spans are made and exported.
func (t *Tracer) On() bool { return t != nil && t.sdk != nil }

// Close exports the spans that ended and are still waiting, then stops
// the exporter; ctx bounds how long it may take (a collector that does
// not answer). Spans that end after it are dropped.
func (t *Tracer) Close(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// Env is the W3C trace context of the span ctx carries, as a session's
// environment: TRACEPARENT and, when there is one, TRACESTATE. An agent
// CLI that makes spans of its own (and is told where to send them) joins
// the run's trace with them. Nil when ctx carries no span: tracing is off.
func Env(ctx context.Context) []string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	env := []string{"TRACEPARENT=" + c.Get("traceparent")}
	if s := c.Get("tracestate"); s != "" {
		env = append(env, "TRACESTATE="+s)
	}
	return env
}

// treeKey holds, in a context, the trace id a span started without a
// parent takes (see StartRun).
type treeKey struct{}

// TraceID is the trace of every span of the delegation tree whose root
// run is root, as hex: the first 16 bytes of root's SHA-256, so that a run
// that paused and resumed, or was re-attached by the next process, and the
// runs it delegated to, are one trace.
func TraceID(root string) string { return treeTraceID(root).String() }

func treeTraceID(root string) trace.TraceID {
	sum := sha256.Sum256([]byte("corral trace " + root))
	var id trace.TraceID
	copy(id[:], sum[:16])
	return id
}

// treeIDs is the SDK's ID generator: a span started without a parent takes
// the trace id the context names (its run's tree's), else a random one.
// Span ids are random.
type treeIDs struct{}

func (treeIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, ok := ctx.Value(treeKey{}).(trace.TraceID)
	for !ok || !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
		ok = true
	}
	return tid, newSpanID()
}

func (treeIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
