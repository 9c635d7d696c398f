// Package openapi writes an OpenAPI 3.1 document from Go: the schemas by
// reflection over the types a server encodes and decodes, the rest from
// tables the server keeps beside its routes. What reflection cannot see
// (descriptions, formats, bounds, enums) is given as annotations, which
// must each name a field that exists. The output is deterministic, so a
// checked-in copy can be compared with a fresh one.
package openapi

import (
	"bytes"
	"encoding/json"
)

// Document is an OpenAPI document: the parts this project's API uses, in
// the order they are written.
type Document struct {
	OpenAPI    string                `json:"openapi"`
	Info       Info                  `json:"info"`
	Servers    []Server              `json:"servers,omitempty"`
	Security   []SecurityRequirement `json:"security,omitempty"`
	Tags       []Tag                 `json:"tags,omitempty"`
	Paths      *Map[*PathItem]       `json:"paths"`
	Components Components            `json:"components"`
}

// Info names the API.
type Info struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// Server is where the API is served.
type Server struct {
	URL string `json:"url"`
}

// SecurityRequirement names the schemes a request may authenticate with.
type SecurityRequirement map[string][]string

// Tag groups operations.
type Tag struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// PathItem is the operations on one path.
type PathItem struct {
	Parameters []*Parameter `json:"parameters,omitempty"`
	Get        *Operation   `json:"get,omitempty"`
	Put        *Operation   `json:"put,omitempty"`
	Post       *Operation   `json:"post,omitempty"`
	Delete     *Operation   `json:"delete,omitempty"`
	Patch      *Operation   `json:"patch,omitempty"`
}

// Operation is one method on one path.
type Operation struct {
	OperationID string                 `json:"operationId"`
	Summary     string                 `json:"summary,omitempty"`
	Description string                 `json:"description,omitempty"`
	Tags        []string               `json:"tags,omitempty"`
	Security    *[]SecurityRequirement `json:"security,omitempty"`
	Parameters  []*Parameter           `json:"parameters,omitempty"`
	RequestBody *RequestBody           `json:"requestBody,omitempty"`
	Responses   *Map[*Response]        `json:"responses"`
}

// Parameter is a path or query parameter, or a $ref to one.
type Parameter struct {
	Ref         string  `json:"$ref,omitempty"`
	Name        string  `json:"name,omitempty"`
	In          string  `json:"in,omitempty"`
	Required    bool    `json:"required,omitempty"`
	Description string  `json:"description,omitempty"`
	Schema      *Schema `json:"schema,omitempty"`
}

// RequestBody is what a request carries, by media type.
type RequestBody struct {
	Description string           `json:"description,omitempty"`
	Required    bool             `json:"required"`
	Content     *Map[*MediaType] `json:"content"`
}

// Response is one status's answer, or a $ref to a shared one.
type Response struct {
	Ref         string           `json:"$ref,omitempty"`
	Description string           `json:"description,omitempty"`
	Headers     *Map[*Header]    `json:"headers,omitempty"`
	Content     *Map[*MediaType] `json:"content,omitempty"`
}

// Header is a response header.
type Header struct {
	Description string  `json:"description,omitempty"`
	Schema      *Schema `json:"schema"`
}

// MediaType is a body's schema.
type MediaType struct {
	Schema *Schema `json:"schema"`
}

// Components are what the document names once and refers to.
type Components struct {
	SecuritySchemes *Map[*SecurityScheme] `json:"securitySchemes,omitempty"`
	Parameters      *Map[*Parameter]      `json:"parameters,omitempty"`
	Schemas         *Map[*Schema]         `json:"schemas,omitempty"`
	Responses       *Map[*Response]       `json:"responses,omitempty"`
}

// SecurityScheme is a way to authenticate.
type SecurityScheme struct {
	Type        string `json:"type"`
	In          string `json:"in,omitempty"`
	Name        string `json:"name,omitempty"`
	Scheme      string `json:"scheme,omitempty"`
	Description string `json:"description,omitempty"`
}

// Map is a JSON object whose keys keep the order they were set in.
type Map[V any] struct {
	keys []string
	vals map[string]V
}

// Set adds or replaces key; a new key goes last.
func (m *Map[V]) Set(key string, v V) {
	if m.vals == nil {
		m.vals = map[string]V{}
	}
	if _, ok := m.vals[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.vals[key] = v
}

// Get returns the value of key.
func (m *Map[V]) Get(key string) (V, bool) {
	v, ok := m.vals[key]
	return v, ok
}

// Keys returns the keys in order.
func (m *Map[V]) Keys() []string { return m.keys }

// Len is the number of keys.
func (m *Map[V]) Len() int { return len(m.keys) }

// MarshalJSON writes the keys in order.
func (m *Map[V]) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := marshal(m.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without escaping <, > and &.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Encode writes d as indented JSON ending in a newline, without escaping
// <, > and & (the document is served as JSON, never into HTML).
func Encode(d *Document) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
