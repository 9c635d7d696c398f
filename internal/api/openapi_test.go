package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestOpenAPIUpToDate keeps the checked-in openapi.json (which the server
// serves and the web app's types are generated from) the document the
// code generates: the route table, the views by reflection and the
// contract tables.
func TestOpenAPIUpToDate(t *testing.T) {
	want, err := OpenAPI()
	if err != nil {
		t.Fatalf("generating the OpenAPI document: %v", err)
	}
	if !bytes.Equal(openAPI, want) {
		t.Fatalf("internal/api/openapi.json is not what the code generates: run `make openapi` (or go generate ./internal/api) and commit the result\nfirst difference: %s", firstDiff(openAPI, want))
	}
}

// firstDiff shows the line of got and of want where they first differ.
func firstDiff(got, want []byte) string {
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	start := bytes.LastIndexByte(got[:n], '\n') + 1
	lineOf := func(b []byte) string {
		rest := b[min(start, len(b)):]
		if end := bytes.IndexByte(rest, '\n'); end >= 0 {
			rest = rest[:end]
		}
		return string(rest)
	}
	return fmt.Sprintf("line %d:\n  checked in: %s\n  generated:  %s", bytes.Count(got[:n], []byte("\n"))+1, lineOf(got), lineOf(want))
}

// TestOpenAPIValid checks what the generator does not guarantee by
// construction: the document is OpenAPI 3.x, every $ref names a
// component that exists, operationIds are unique, and every operation
// says which statuses it answers.
func TestOpenAPIValid(t *testing.T) {
	raw, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Errorf("openapi = %q, want 3.x", v)
	}
	var refs []string
	collectRefs(doc, &refs)
	if len(refs) == 0 {
		t.Fatal("no $ref at all: the walk is broken")
	}
	for _, ref := range refs {
		if !resolves(doc, ref) {
			t.Errorf("$ref %s names nothing", ref)
		}
	}
	ids := map[string]string{}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			o := op.(map[string]any)
			id, _ := o["operationId"].(string)
			where := strings.ToUpper(method) + " " + path
			if id == "" {
				t.Errorf("%s has no operationId", where)
			} else if prev, dup := ids[id]; dup {
				t.Errorf("operationId %s is both %s and %s", id, prev, where)
			}
			ids[id] = where
			if rs, _ := o["responses"].(map[string]any); len(rs) == 0 {
				t.Errorf("%s documents no responses", where)
			}
		}
	}
	if served := len((&Server{}).routes()); len(ids) != served {
		t.Errorf("%d operations documented, %d routes served", len(ids), served)
	}
}

func collectRefs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" {
				*out = append(*out, s)
			}
			collectRefs(e, out)
		}
	case []any:
		for _, e := range x {
			collectRefs(e, out)
		}
	}
}

// resolves follows a local JSON pointer ("#/components/schemas/User").
func resolves(doc map[string]any, ref string) bool {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var cur any = doc
	for _, part := range strings.Split(p, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}
