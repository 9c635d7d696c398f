package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"corral"
)

// Forward sends one Chat Completions request, as the body an agent CLI's
// call became (see internal/protocol), to the provider with the key, the
// model replaced by model: an agent uses the model it is set to, whatever
// its CLI names. It returns the provider's answer for the caller to relay:
// a stream or a whole answer as it comes. An error answer (not 2xx) is
// read whole, bounded, and has the key taken out of it before anybody
// reads it; the provider's own words are kept, since clients recover by
// them. Forward makes one try: the CLIs retry on their own, by the
// provider's answer.
func (g *Gateway) Forward(ctx context.Context, model string, body []byte) (*http.Response, error) {
	if err := g.Configured(); err != nil {
		return nil, err
	}
	if model == "" {
		model = g.model
	}
	if model == "" {
		return nil, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "no model is named: set CORRAL_MODEL or the agent's model"}
	}
	body, stream, err := withModel(body, model)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.baseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, corral.Internal("gateway", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	g.authorize(req)
	return g.send(req)
}

// send makes a forwarded request. An error answer (not 2xx) is read whole,
// bounded, and has the key taken out before anybody reads it.
func (g *Gateway) send(req *http.Request) (*http.Response, error) {
	resp, err := g.client.Do(req)
	if err != nil {
		// The error names the URL, never the key (it is in a header).
		return nil, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "the model provider could not be reached", Err: fmt.Errorf("forward: %s", g.redact(err.Error()))}
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(g.redact(string(b))))
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

// withModel returns body with its model set, and whether it streams.
func withModel(body []byte, model string) ([]byte, bool, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, false, corral.Errorf(corral.EINVALID, "the request body is not a JSON object")
	}
	m, _ := json.Marshal(model)
	fields["model"] = m
	var stream bool
	if raw, ok := fields["stream"]; ok {
		json.Unmarshal(raw, &stream)
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, false, corral.Internal("gateway", err)
	}
	return out, stream, nil
}

// ModelName is the model a call of an agent set to model is made with:
// model, or the server's default when it names none.
func (g *Gateway) ModelName(model string) string {
	if model == "" {
		return g.model
	}
	return model
}

// Native protocols a provider may speak besides Chat Completions: a call
// an agent CLI makes in one of them is passed through (ForwardNative)
// rather than translated.
const (
	NativeResponses = "responses" // POST {base}/responses, OpenAI's
	NativeMessages  = "messages"  // POST {base}/messages, Anthropic's
)

// Native reports whether the provider takes calls in protocol as they are
// (Config.Native).
func (g *Gateway) Native(protocol string) bool { return g.native[protocol] }

// ForwardNative sends a call in a protocol the provider speaks itself to
// {base}/responses or {base}/messages, the model replaced by the agent's,
// with the key (as a bearer token, and for Messages also as x-api-key)
// and the client's anthropic-version and anthropic-beta headers, nothing
// else of its. An error answer has the key taken out, as Forward's.
func (g *Gateway) ForwardNative(ctx context.Context, protocol, model string, header http.Header, body []byte) (*http.Response, error) {
	if err := g.Configured(); err != nil {
		return nil, err
	}
	if !g.native[protocol] {
		return nil, corral.Errorf(corral.EINVALID, "the model provider does not take %s calls as they are", protocol)
	}
	if model == "" {
		model = g.model
	}
	body, stream, err := withModel(body, model)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.baseURL+"/"+protocol, bytes.NewReader(body))
	if err != nil {
		return nil, corral.Internal("gateway", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	if protocol == NativeMessages {
		v := header.Get("anthropic-version")
		if v == "" {
			v = "2023-06-01"
		}
		req.Header.Set("anthropic-version", v)
		if b := header.Get("anthropic-beta"); b != "" {
			req.Header.Set("anthropic-beta", b)
		}
	}
	g.authorize(req)
	if protocol == NativeMessages {
		g.authorizeAnthropic(req)
	}
	return g.send(req)
}
