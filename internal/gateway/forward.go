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
