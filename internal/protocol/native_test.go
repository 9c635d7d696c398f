package protocol

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const (
	responsesStream = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt-x\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt-x\",\"usage\":{\"input_tokens\":12,\"output_tokens\":7,\"total_tokens\":19}}}\n\n"
	messagesStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":20,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

// TestRelayNative: an answer in the client's own protocol passes through
// byte for byte, and its usage is read on the way, whatever its shape;
// none is an estimate, never 0; an error passes as the provider sent it.
func TestRelayNative(t *testing.T) {
	tests := []struct {
		name        string
		p           Protocol
		status      int
		contentType string
		body        string
		want        Usage
		model       string
	}{
		{"responses, streamed", Responses, 200, "text/event-stream", responsesStream, Usage{Input: 12, Output: 7}, "gpt-x"},
		{"messages, streamed", Messages, 200, "text/event-stream", messagesStream, Usage{Input: 25, Output: 9}, "claude-x"},
		{"responses, whole", Responses, 200, "application/json", `{"id":"r","model":"gpt-x","usage":{"input_tokens":3,"output_tokens":4}}`, Usage{Input: 3, Output: 4}, "gpt-x"},
		{"messages, whole", Messages, 200, "application/json", `{"type":"message","model":"claude-x","usage":{"input_tokens":5,"output_tokens":6}}`, Usage{Input: 5, Output: 6}, "claude-x"},
		{"no usage", Responses, 200, "text/event-stream", "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n", Usage{Input: 25, Output: 15, Estimated: true}, ""},
		{"an error", Messages, 429, "application/json", `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, Usage{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &http.Response{StatusCode: tt.status, Header: http.Header{"Content-Type": {tt.contentType}, "Retry-After": {"3"}},
				Body: io.NopCloser(strings.NewReader(tt.body))}
			w := httptest.NewRecorder()
			res := RelayNative(context.Background(), w, up, tt.p, 100)
			if w.Code != tt.status || w.Body.String() != tt.body {
				t.Errorf("client got %d %q, want %d and the provider's bytes", w.Code, w.Body.String(), tt.status)
			}
			if res.Usage != tt.want || res.Model != tt.model {
				t.Errorf("usage %+v model %q, want %+v %q", res.Usage, res.Model, tt.want, tt.model)
			}
			if tt.status == 429 && w.Header().Get("Retry-After") != "3" {
				t.Errorf("Retry-After not passed on")
			}
		})
	}
}

// TestRelayNativeClientGone: a client that goes away mid-stream still has
// its call metered from the provider's last event.
func TestRelayNativeClientGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // gone before the first event
	up := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader(messagesStream))}
	res := RelayNative(ctx, httptest.NewRecorder(), up, Messages, 100)
	if !res.ClientGone || res.Usage != (Usage{Input: 25, Output: 9}) {
		t.Fatalf("result = %+v, want the client gone and the provider's usage", res)
	}
}
