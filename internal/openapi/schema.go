package openapi

import "slices"

// Schema is a JSON Schema as OpenAPI 3.1 uses it: the keywords this API's
// document needs, in the order they are written. As an annotation (a
// Component's Fields) its set keywords are laid over what reflection found.
type Schema struct {
	Ref         string `json:"$ref,omitempty"`
	Type        Types  `json:"type,omitempty"`
	Format      string `json:"format,omitempty"`
	Description string `json:"description,omitempty"`
	// Enum lists the allowed values; Enum(...) makes one from strings.
	Enum                 []any         `json:"enum,omitempty"`
	Minimum              *int64        `json:"minimum,omitempty"`
	Maximum              *int64        `json:"maximum,omitempty"`
	MinLength            *int64        `json:"minLength,omitempty"`
	MaxLength            *int64        `json:"maxLength,omitempty"`
	Pattern              string        `json:"pattern,omitempty"`
	MinItems             *int64        `json:"minItems,omitempty"`
	MaxItems             *int64        `json:"maxItems,omitempty"`
	UniqueItems          bool          `json:"uniqueItems,omitempty"`
	WriteOnly            bool          `json:"writeOnly,omitempty"`
	Default              any           `json:"default,omitempty"`
	Items                *Schema       `json:"items,omitempty"`
	Properties           *Map[*Schema] `json:"properties,omitempty"`
	Required             []string      `json:"required,omitempty"`
	AdditionalProperties *Additional   `json:"additionalProperties,omitempty"`
	AllOf                []*Schema     `json:"allOf,omitempty"`
	OneOf                []*Schema     `json:"oneOf,omitempty"`
}

// Types is a schema's type: one name, or a name and "null".
type Types []string

// MarshalJSON writes one type as a string, more as an array.
func (t Types) MarshalJSON() ([]byte, error) {
	if len(t) == 1 {
		return marshal(t[0])
	}
	return marshal([]string(t))
}

// Additional is additionalProperties: false (Closed), or the schema of
// every other property.
type Additional struct {
	Closed bool
	Schema *Schema
}

// MarshalJSON writes false or the schema.
func (a *Additional) MarshalJSON() ([]byte, error) {
	if a.Closed {
		return []byte("false"), nil
	}
	return marshal(a.Schema)
}

// Enum is the values of a string enum.
func Enum[S ~string](values ...S) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// Int is a pointer to n, for the bounds.
func Int(n int64) *int64 { return &n }

// Ref is a schema that refers to the component name.
func Ref(name string) *Schema { return &Schema{Ref: "#/components/schemas/" + name} }

// Of is a schema of one type.
func Of(typ string) *Schema { return &Schema{Type: Types{typ}} }

// over lays the keywords set in note over s.
func (s *Schema) over(note Schema) {
	if note.Ref != "" {
		s.Ref = note.Ref
	}
	if note.Type != nil {
		s.Type = note.Type
	}
	if note.Format != "" {
		s.Format = note.Format
	}
	if note.Description != "" {
		s.Description = note.Description
	}
	if note.Enum != nil {
		s.Enum = note.Enum
	}
	for _, p := range []struct{ to, from **int64 }{
		{&s.Minimum, &note.Minimum}, {&s.Maximum, &note.Maximum},
		{&s.MinLength, &note.MinLength}, {&s.MaxLength, &note.MaxLength},
		{&s.MinItems, &note.MinItems}, {&s.MaxItems, &note.MaxItems},
	} {
		if *p.from != nil {
			*p.to = *p.from
		}
	}
	if note.Pattern != "" {
		s.Pattern = note.Pattern
	}
	if note.Default != nil {
		s.Default = note.Default
	}
	if note.UniqueItems {
		s.UniqueItems = true
	}
	if note.WriteOnly {
		s.WriteOnly = true
	}
	if note.Items != nil {
		if s.Items == nil {
			s.Items = &Schema{}
		}
		s.Items.over(*note.Items)
	}
	if note.Properties != nil {
		s.Properties = note.Properties
	}
	if note.Required != nil {
		s.Required = note.Required
	}
	if note.AdditionalProperties != nil {
		s.AdditionalProperties = note.AdditionalProperties
	}
	if note.AllOf != nil {
		s.AllOf = note.AllOf
	}
	if note.OneOf != nil {
		s.OneOf = note.OneOf
	}
}

// nullable lets s be null as well: a $ref becomes one of it or null (a
// description stays outside), a type gains "null", and so does an enum.
func (s *Schema) nullable() *Schema {
	if s.Ref != "" {
		return &Schema{OneOf: []*Schema{{Ref: s.Ref}, Of("null")}, Description: s.Description}
	}
	if len(s.Type) == 1 {
		s.Type = Types{s.Type[0], "null"}
	}
	if s.Enum != nil && !slices.Contains(s.Enum, nil) {
		s.Enum = append(slices.Clone(s.Enum), nil)
	}
	return s
}
