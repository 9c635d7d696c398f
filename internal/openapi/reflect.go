package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Component is a named schema: the Go type of a value the server encodes
// (an answer) or decodes (a request), what it is, and annotations of its
// fields.
//
// The roles read Go's types as encoding/json treats them. In an answer a
// pointer field without omitempty is always sent and may be null; a field
// with omitempty may be absent. In a request (decoded with unknown fields
// refused) a pointer or omitempty field may be absent, every other one is
// required, and no other property is allowed.
type Component struct {
	Name    string
	Of      any
	Request bool
	Doc     string
	// Fields annotates fields by JSON path: "policy" for a field,
	// "policy.fs" for a field of an inline object (also through an array's
	// items). Each must name a field.
	Fields map[string]Schema
	// Required lists fields the server requires although their type
	// leaves them optional (a pointer it checks for nil, say).
	Required []string
}

// Describer is a type that gives its own schema, such as a map whose keys
// are known.
type Describer interface{ OpenAPISchema() *Schema }

// Documented is a type that is not a component but says what it is (a
// generic list, say).
type Documented interface{ OpenAPIDescription() string }

// Schemas holds the components' schemas and makes the schemas of bodies.
type Schemas struct {
	names map[role]string
	built *Map[*Schema]
}

type role struct {
	t       reflect.Type
	request bool
}

// NewSchemas names each component's type in its role and builds its
// schema: wherever the type appears in that role, the schema refers to the
// component. It fails on a type named twice in one role, on what
// reflection cannot describe, and on an annotation that names no field.
func NewSchemas(cs []Component) (*Schemas, error) {
	s := &Schemas{names: map[role]string{}, built: &Map[*Schema]{}}
	for _, c := range cs {
		r := role{reflect.TypeOf(c.Of), c.Request}
		if prev, ok := s.names[r]; ok {
			return nil, fmt.Errorf("openapi: %s and %s are both %v", prev, c.Name, r.t)
		}
		if _, ok := s.built.Get(c.Name); ok {
			return nil, fmt.Errorf("openapi: two components named %s", c.Name)
		}
		s.names[r] = c.Name
		s.built.Set(c.Name, nil)
	}
	for _, c := range cs {
		w := &walk{s: s, request: c.Request, notes: c.Fields, used: map[string]bool{}}
		var sc *Schema
		var err error
		if d, ok := c.Of.(Describer); ok {
			sc = d.OpenAPISchema()
		} else {
			sc, err = w.object(reflect.TypeOf(c.Of), "", 0)
		}
		if err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", c.Name, err)
		}
		if c.Doc != "" {
			sc.Description = c.Doc
		}
		for _, f := range c.Required {
			if _, ok := sc.Properties.Get(f); !ok {
				return nil, fmt.Errorf("openapi: %s: required field %s is not a field", c.Name, f)
			}
			if !slices.Contains(sc.Required, f) {
				sc.Required = append(sc.Required, f)
			}
		}
		if unused := w.unused(); len(unused) > 0 {
			return nil, fmt.Errorf("openapi: %s: annotations name no field: %s", c.Name, strings.Join(unused, ", "))
		}
		s.built.Set(c.Name, sc)
	}
	return s, nil
}

// Components returns the components' schemas, in the order given.
func (s *Schemas) Components() *Map[*Schema] { return s.built }

// Body is the schema of a body of v's type: a $ref when the type is a
// component in that role, else the schema itself.
func (s *Schemas) Body(v any, request bool) (*Schema, error) {
	w := &walk{s: s, request: request}
	return w.typ(reflect.TypeOf(v), "", 0)
}

// walk builds one schema in one role.
type walk struct {
	s       *Schemas
	request bool
	notes   map[string]Schema
	used    map[string]bool
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

func (w *walk) typ(t reflect.Type, path string, depth int) (*Schema, error) {
	if depth > 16 {
		return nil, fmt.Errorf("%s: nested too deep (a recursive type?)", path)
	}
	if name, ok := w.s.names[role{t, w.request}]; ok {
		return Ref(name), nil
	}
	if d, ok := reflect.Zero(t).Interface().(Describer); ok {
		return d.OpenAPISchema(), nil
	}
	if t == rawMessage {
		return &Schema{}, nil // any JSON; an annotation says more
	}
	switch t.Kind() {
	case reflect.String:
		return Of("string"), nil
	case reflect.Bool:
		return Of("boolean"), nil
	case reflect.Int64, reflect.Uint64:
		return &Schema{Type: Types{"integer"}, Format: "int64"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return Of("integer"), nil
	case reflect.Float32, reflect.Float64:
		return Of("number"), nil
	case reflect.Pointer:
		return w.typ(t.Elem(), path, depth+1)
	case reflect.Slice, reflect.Array:
		items, err := w.typ(t.Elem(), path, depth+1)
		if err != nil {
			return nil, err
		}
		return &Schema{Type: Types{"array"}, Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings, not %v", path, t.Key())
		}
		v, err := w.typ(t.Elem(), path, depth+1)
		if err != nil {
			return nil, err
		}
		return &Schema{Type: Types{"object"}, AdditionalProperties: &Additional{Schema: v}}, nil
	case reflect.Interface:
		return &Schema{Type: Types{"object"}}, nil
	case reflect.Struct:
		return w.object(t, path, depth+1)
	}
	return nil, fmt.Errorf("%s: cannot describe %v", path, t)
}

// object is the schema of a struct; an embedded struct that is a
// component is one part of an allOf, any other is flattened.
func (w *walk) object(t reflect.Type, prefix string, depth int) (*Schema, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s: %v is not a struct", prefix, t)
	}
	obj := &Schema{Type: Types{"object"}, Properties: &Map[*Schema]{}}
	var parts []*Schema
	if err := w.fields(t, prefix, depth, obj, &parts); err != nil {
		return nil, err
	}
	if w.request {
		obj.AdditionalProperties = &Additional{Closed: true}
	}
	if d, ok := reflect.Zero(t).Interface().(Documented); ok {
		obj.Description = d.OpenAPIDescription()
	}
	if len(parts) > 0 {
		desc := obj.Description
		obj.Description = ""
		return &Schema{Description: desc, AllOf: append(parts, obj)}, nil
	}
	return obj, nil
}

func (w *walk) fields(t reflect.Type, prefix string, depth int, obj *Schema, parts *[]*Schema) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			if ref, ok := w.s.names[role{f.Type, w.request}]; ok {
				*parts = append(*parts, Ref(ref))
				continue
			}
			if err := w.fields(f.Type, prefix, depth, obj, parts); err != nil {
				return err
			}
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		ptr := f.Type.Kind() == reflect.Pointer
		fs, err := w.typ(f.Type, path, depth+1)
		if err != nil {
			return err
		}
		if note, ok := w.notes[path]; ok {
			fs.over(note)
			w.used[path] = true
		}
		omit := slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool { return o == "omitempty" || o == "omitzero" })
		if ptr && !omit && !w.request {
			fs = fs.nullable()
		}
		obj.Properties.Set(name, fs)
		if !omit && !(ptr && w.request) {
			obj.Required = append(obj.Required, name)
		}
	}
	return nil
}

func (w *walk) unused() []string {
	var out []string
	for p := range w.notes {
		if !w.used[p] {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
