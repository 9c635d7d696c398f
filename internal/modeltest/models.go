package modeltest

import (
	"encoding/json"
	"net/http"
)

// SetModels makes GET {URL}/models answer names, in OpenAI's list, from
// now on; nil (as a Provider starts) answers 404, as a provider that does
// not list its models.
func (p *Provider) SetModels(names ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.models = names
}

// serveModels answers GET /v1/models: {"object":"list","data":[{"id",...}]}.
func (p *Provider) serveModels(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	names := p.models
	p.mu.Unlock()
	if names == nil {
		writeError(w, http.StatusNotFound, "", "modeltest lists no models (SetModels)")
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	data := make([]model, len(names))
	for i, n := range names {
		data[i] = model{ID: n, Object: "model", OwnedBy: "modeltest"}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}
