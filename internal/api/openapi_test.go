package api

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes keeps /api/openapi.json in step with the route
// table: every route is documented, nothing undocumented is served, and
// every documented operation says which statuses it answers.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
			var op struct {
				OperationID string                     `json:"operationId"`
				Responses   map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Errorf("%s %s: %v", method, path, err)
			}
			if op.OperationID == "" || len(op.Responses) == 0 {
				t.Errorf("%s %s: needs an operationId and its responses", method, path)
			}
		}
	}
	served := map[string]bool{}
	for _, rt := range (&Server{}).routes() {
		served[rt.method+" "+rt.path] = true
	}
	var missing, extra []string
	for k := range served {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !served[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("routes missing from openapi.json: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("openapi.json documents routes the server does not serve: %v", extra)
	}
}

// TestOpenAPISchemasMatchViews keeps the documented fields of the views in
// step with the structs that encode them: every JSON field of a view is a
// property of its schema (allOf parts and $refs included), and the other
// way round.
func TestOpenAPISchemasMatchViews(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	views := map[string]any{
		"User":             userView{},
		"ListedUser":       listedUserView{},
		"UserRef":          userRefView{},
		"Contact":          contactView{},
		"Policy":           policyView{},
		"Limits":           limitsView{},
		"Budget":           budgetView{},
		"Agent":            agentView{},
		"Grant":            grantView{},
		"Link":             linkView{},
		"Token":            tokenView{},
		"Credential":       credentialView{},
		"Repository":       repositoryView{},
		"Commit":           commitView{},
		"PushResult":       pushView{},
		"Import":           importView{},
		"Document":         documentView{},
		"Passage":          passageView{},
		"Retrieval":        retrievalView{},
		"Source":           sourceView{},
		"Message":          messageView{},
		"Node":             nodeView{},
		"WaitingChangeSet": waitingView{},
		"Setup":            setupView{},
		"Models":           modelsView{},
		"LimitDefaults":    limitsFields{},
		"LimitsInfo":       limitsAnswer{},
	}
	for name, v := range views {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("openapi.json has no schema %s", name)
			continue
		}
		documented := s.properties(doc.Components.Schemas, 0)
		encoded := jsonFields(reflect.TypeOf(v))
		var missing, extra []string
		for f := range encoded {
			if !documented[f] {
				missing = append(missing, f)
			}
		}
		for f := range documented {
			if !encoded[f] {
				extra = append(extra, f)
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		if len(missing)+len(extra) > 0 {
			t.Errorf("schema %s: fields the server sends but openapi.json omits: %v; documented but never sent: %v", name, missing, extra)
		}
	}
}

type schema struct {
	Ref        string                     `json:"$ref"`
	AllOf      []schema                   `json:"allOf"`
	Properties map[string]json.RawMessage `json:"properties"`
}

// properties returns the property names of s, following $refs and allOf.
func (s schema) properties(all map[string]schema, depth int) map[string]bool {
	out := map[string]bool{}
	if depth > 8 {
		return out
	}
	if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
		return all[name].properties(all, depth+1)
	}
	for p := range s.Properties {
		out[p] = true
	}
	for _, part := range s.AllOf {
		for p := range part.properties(all, depth+1) {
			out[p] = true
		}
	}
	return out
}

// jsonFields returns the JSON names of t's fields, embedded structs'
// included.
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			for n := range jsonFields(f.Type) {
				out[n] = true
			}
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = true
	}
	return out
}
