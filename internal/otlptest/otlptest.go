// Package otlptest is an OpenTelemetry collector for tests: an OTLP/HTTP
// receiver on loopback that decodes each ExportTraceServiceRequest
// (protobuf, as the SDK's exporter posts it) and keeps its spans, for a
// test to look at.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one span as the receiver got it.
type Span struct {
	TraceID, SpanID, ParentSpanID string // hex; ParentSpanID "" for a root
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Attrs                         map[string]any // string, int64, float64, bool or []any
	Events                        []Event
	Error                         bool   // the status is Error
	StatusMessage                 string // the status's description
	Resource                      map[string]any
}

// Event is one event of a span.
type Event struct {
	Name  string
	Attrs map[string]any
}

// Receiver is an OTLP/HTTP receiver of traces.
type Receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
}

// New starts a receiver on loopback; Close stops it.
func New() *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.export))
	return r
}

// URL is the receiver's base URL, as an operator names a collector's
// OTLP/HTTP endpoint: the SDK posts to URL()+"/v1/traces".
func (r *Receiver) URL() string { return r.srv.URL }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests counts the exports received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "otlptest: POST /v1/traces only", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &ex); err != nil {
		http.Error(w, "otlptest: not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range ex.ResourceSpans {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{
					TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentSpanID: hex.EncodeToString(s.ParentSpanId),
					Name:         s.Name, Kind: s.Kind, Attrs: attrs(s.Attributes), Resource: res,
					Error:         s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					StatusMessage: s.GetStatus().GetMessage(),
				}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, Event{Name: e.Name, Attrs: attrs(e.Attributes)})
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.requests++
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = value(kv.Value)
	}
	return out
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return attrs(x.KvlistValue.Values)
	}
	return nil
}
