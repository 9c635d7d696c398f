package openapi

import (
	"encoding/json"
	"strings"
	"testing"
)

type ref struct {
	ID string `json:"id"`
}

type answer struct {
	Name     string            `json:"name"`
	Count    int64             `json:"count"`
	Left     *int64            `json:"left"`
	Note     string            `json:"note,omitempty"`
	Node     *string           `json:"node,omitempty"`
	Owner    ref               `json:"owner"`
	Author   *ref              `json:"author"`
	Tags     []string          `json:"tags"`
	Notes    map[string]string `json:"notes"`
	Inline   struct{ A bool }  `json:"inline"`
	Raw      json.RawMessage   `json:"raw"`
	Skipped  string            `json:"-"`
	internal string            //lint:ignore U1000 the schema must leave unexported fields out
}

type request struct {
	Name  string  `json:"name"`
	Ref   string  `json:"ref,omitempty"`
	Model *string `json:"model"`
	Inner *struct {
		FS *string `json:"fs"`
	} `json:"inner"`
}

type embedded struct {
	ref
	Extra bool `json:"extra"`
}

type keys map[string]bool

func (keys) OpenAPISchema() *Schema { return &Schema{Type: Types{"object"}, Description: "described"} }

func schemaJSON(t *testing.T, cs []Component, name string) string {
	t.Helper()
	s, err := NewSchemas(cs)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := s.Components().Get(name)
	b, err := marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSchemasRoles(t *testing.T) {
	cs := []Component{
		{Name: "Ref", Of: ref{}},
		{Name: "Answer", Of: answer{}, Doc: "An answer.", Fields: map[string]Schema{
			"name":     {Description: "Its name.", Enum: Enum("a", "b")},
			"left":     {Minimum: Int(0)},
			"author":   {Description: "Who."},
			"inline.A": {Description: "A flag."},
		}},
		{Name: "Request", Of: request{}, Request: true, Fields: map[string]Schema{"inner.fs": {Enum: Enum("ro")}}},
		{Name: "Embedded", Of: embedded{}},
		{Name: "Keys", Of: keys{}},
	}
	tests := []struct {
		name, component string
		want            []string // fragments of the schema's JSON
		not             []string
	}{
		{"answer: plain fields are required", "Answer", []string{`"required":["name","count","left","owner","author","tags","notes","inline","raw"]`}, nil},
		{"answer: int64 has its format", "Answer", []string{`"count":{"type":"integer","format":"int64"}`}, nil},
		{"answer: a pointer is nullable", "Answer", []string{`"left":{"type":["integer","null"],"format":"int64","minimum":0}`}, nil},
		{"answer: omitempty is optional, not null", "Answer", []string{`"node":{"type":"string"}`, `"note":{"type":"string"}`}, nil},
		{"answer: a component is a $ref", "Answer", []string{`"owner":{"$ref":"#/components/schemas/Ref"}`}, nil},
		{"answer: a nullable $ref keeps its description outside", "Answer", []string{`"author":{"description":"Who.","oneOf":[{"$ref":"#/components/schemas/Ref"},{"type":"null"}]}`}, nil},
		{"answer: annotations and enums", "Answer", []string{`"name":{"type":"string","description":"Its name.","enum":["a","b"]}`, `"description":"An answer."`}, nil},
		{"answer: arrays, maps, inline structs, raw JSON", "Answer", []string{`"tags":{"type":"array","items":{"type":"string"}}`, `"notes":{"type":"object","additionalProperties":{"type":"string"}}`, `"inline":{"type":"object","properties":{"A":{"type":"boolean","description":"A flag."}},"required":["A"]}`, `"raw":{}`}, nil},
		{"answer: skipped fields", "Answer", nil, []string{"Skipped", "internal", "additionalProperties\":false"}},
		{"request: pointers and omitempty are optional, nothing else allowed", "Request", []string{`"required":["name"]`, `"additionalProperties":false`, `"model":{"type":"string"}`, `"fs":{"type":"string","enum":["ro"]}`}, []string{"null"}},
		{"embedded component: allOf", "Embedded", []string{`"allOf":[{"$ref":"#/components/schemas/Ref"},{"type":"object","properties":{"extra"`}, nil},
		{"a type that describes itself", "Keys", []string{`{"type":"object","description":"described"}`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := schemaJSON(t, cs, tt.component)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s = %s\nwant it to hold %s", tt.component, got, w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("%s = %s\nwant no %s", tt.component, got, n)
				}
			}
		})
	}
}

func TestSchemasRefuse(t *testing.T) {
	tests := []struct {
		name string
		cs   []Component
		want string
	}{
		{"an annotation that names no field", []Component{{Name: "Ref", Of: ref{}, Fields: map[string]Schema{"nope": {}}}}, "annotations name no field: nope"},
		{"a required field that is not one", []Component{{Name: "Ref", Of: ref{}, Required: []string{"nope"}}}, "required field nope"},
		{"one type twice in a role", []Component{{Name: "A", Of: ref{}}, {Name: "B", Of: ref{}}}, "are both"},
		{"one name twice", []Component{{Name: "A", Of: ref{}}, {Name: "A", Of: answer{}}}, "two components named A"},
		{"a type reflection cannot describe", []Component{{Name: "C", Of: struct{ F func() }{}}}, "cannot describe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSchemas(tt.cs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewSchemas = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestMapKeepsOrder(t *testing.T) {
	m := &Map[int]{}
	m.Set("b", 1)
	m.Set("a", 2)
	m.Set("b", 3)
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"b":3,"a":2}`; got != want {
		t.Errorf("MarshalJSON = %s, want %s", got, want)
	}
}
