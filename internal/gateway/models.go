package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"unicode"

	"corral"
)

// Bounds on a provider's list of models: a list is a few kilobytes, and a
// picker of more names than this helps nobody.
const (
	maxModelsBody = 4 << 20
	maxModels     = 500
	maxModelName  = 200
)

// ListModels asks the provider which models it serves (GET {base}/models,
// OpenAI's list, which Ollama, vLLM and most gateways answer too): the
// names, sorted, without duplicates, empty names, names holding control
// characters or longer than maxModelName, at most maxModels of them. The
// key goes in the header as for a call; an error says nothing of it.
func (g *Gateway) ListModels(ctx context.Context) ([]string, error) {
	if err := g.Configured(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.baseURL+"/models", nil)
	if err != nil {
		return nil, corral.Internal("gateway", err)
	}
	req.Header.Set("Accept", "application/json")
	g.authorize(req)
	resp, err := g.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body) // bounded and redacted by send
		return nil, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "the model provider did not list its models",
			Err:     fmt.Errorf("GET models: %s: %s", resp.Status, tidy(string(b)))}
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelsBody)).Decode(&list); err != nil {
		return nil, &corral.Error{Code: corral.EUNAVAIL, Op: "gateway",
			Message: "the model provider's list of models could not be read",
			Err:     fmt.Errorf("GET models: %s", g.redact(err.Error()))}
	}
	seen := map[string]bool{}
	names := []string{}
	for _, m := range list.Data {
		if !modelName(m.ID) || seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		names = append(names, m.ID)
	}
	sort.Strings(names)
	if len(names) > maxModels {
		names = names[:maxModels]
	}
	return names, nil
}

// modelName reports whether s may be offered as a model's name: printable,
// one line, not too long.
func modelName(s string) bool {
	if s == "" || len(s) > maxModelName || strings.TrimSpace(s) != s {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Probe asks whether the provider answers, for the server's readiness:
// GET {base}/models with the key. Any answer but a server error or a
// refusal of the key will do (a provider that lists no models still
// takes calls). Its error says what was wrong in words for an operator,
// never the provider's address or its key.
func (g *Gateway) Probe(ctx context.Context) error {
	if err := g.Configured(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.baseURL+"/models", nil)
	if err != nil {
		return corral.Internal("gateway", err)
	}
	g.authorize(req)
	resp, err := g.client.Do(req)
	if err != nil {
		return &corral.Error{Code: corral.EUNAVAIL, Op: "gateway", Message: "the model provider could not be reached",
			Err: fmt.Errorf("probe: %s", g.redact(err.Error()))}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxModelsBody))
	resp.Body.Close()
	switch s := resp.StatusCode; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return corral.Errorf(corral.EUNAVAIL, "the model provider refused the credentials (%d): check CORRAL_MODEL_API_KEY", s)
	case s >= 500:
		return corral.Errorf(corral.EUNAVAIL, "the model provider answered %s", statusLine(s))
	}
	return nil
}
