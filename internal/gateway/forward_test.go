package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"corral"
)

// TestForward: a forwarded call reaches the provider with the key and the
// agent's model whatever the client named, and the provider's answer comes
// back as it was, but an error answer never carries the key.
func TestForward(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		status     int
		answer     string
		wantStream bool
		wantBody   string
	}{
		{"whole", `{"model":"gpt-x","messages":[]}`, 200, `{"ok":true}`, false, `{"ok":true}`},
		{"streamed", `{"model":"gpt-x","stream":true,"messages":[]}`, 200, "data: {}\n\ndata: [DONE]\n\n", true, "data: {}\n\ndata: [DONE]\n\n"},
		{"an error naming the key", `{"messages":[]}`, 401,
			`{"error":{"message":"Incorrect API key provided: ` + testKey + `.","type":"invalid_request_error"}}`, false,
			`{"error":{"message":"Incorrect API key provided: [redacted].","type":"invalid_request_error"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got map[string]any
			var auth, accept, path string
			p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				auth, accept, path = r.Header.Get("Authorization"), r.Header.Get("Accept"), r.URL.Path
				json.NewDecoder(r.Body).Decode(&got)
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.answer)
			}))
			defer p.Close()
			g, err := New(Config{BaseURL: p.URL + "/v1/", APIKey: testKey, Model: "default-model"})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := g.Forward(context.Background(), "agent-model", []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || string(b) != tt.wantBody {
				t.Errorf("answer = %d %q, want %d %q", resp.StatusCode, b, tt.status, tt.wantBody)
			}
			if path != "/v1/chat/completions" || auth != "Bearer "+testKey || got["model"] != "agent-model" {
				t.Errorf("provider saw %s, Authorization %q, model %v", path, auth, got["model"])
			}
			if (accept == "text/event-stream") != tt.wantStream {
				t.Errorf("Accept = %q, stream %v", accept, tt.wantStream)
			}
		})
	}
}

func TestForwardRefuses(t *testing.T) {
	unconfigured, _ := New(Config{})
	g, _ := New(Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m"})
	tests := []struct {
		name string
		g    *Gateway
		body string
		code string
	}{
		{"no provider", unconfigured, `{}`, corral.EUNAVAIL},
		{"not an object", g, `[1]`, corral.EINVALID},
		{"not JSON", g, `{`, corral.EINVALID},
		{"provider unreachable", g, `{}`, corral.EUNAVAIL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.g.Forward(context.Background(), "", []byte(tt.body))
			if corral.ErrorCode(err) != tt.code || strings.Contains(corral.ErrorMessage(err), testKey) {
				t.Fatalf("Forward = %v, want %s", err, tt.code)
			}
		})
	}
}

// TestNativeConfig: only the protocols Corral can pass through are taken.
func TestNativeConfig(t *testing.T) {
	for _, tt := range []struct {
		native []string
		ok     bool
	}{{nil, true}, {[]string{NativeResponses, NativeMessages}, true}, {[]string{"chat"}, false}, {[]string{""}, false}} {
		g, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", Native: tt.native})
		if (err == nil) != tt.ok || (err == nil && len(tt.native) > 0 && !g.Native(tt.native[0])) {
			t.Errorf("Native %q: %v", tt.native, err)
		}
	}
	g, _ := New(Config{BaseURL: "http://127.0.0.1:1/v1"})
	if _, err := g.ForwardNative(context.Background(), NativeResponses, "m", http.Header{}, []byte(`{}`)); corral.ErrorCode(err) != corral.EINVALID {
		t.Errorf("ForwardNative without Native = %v, want EINVALID", err)
	}
}
