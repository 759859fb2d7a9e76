package langfusefake

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// specYAML is langfuse/langfuse web/public/generated/api/openapi.yml, verbatim
// (commit a7fa476e7537254b02efca84de6a67cc528b0e89, 2026-08-22; sha256 896774f9…b233).
//
//go:embed langfuse-openapi.yml
var specYAML []byte

// Spec is the Langfuse OpenAPI document, loaded leniently: the subset of JSON Schema it
// uses on the paths we touch (type, properties, required, items, additionalProperties,
// nullable, enum, oneOf, allOf, $ref).
type Spec struct {
	doc     map[string]any
	schemas map[string]any
}

var (
	specOnce sync.Once
	spec     *Spec
	specErr  error
)

// LoadSpec parses the embedded document once.
func LoadSpec() (*Spec, error) {
	specOnce.Do(func() {
		var doc map[string]any
		if err := yaml.Unmarshal(specYAML, &doc); err != nil {
			specErr = fmt.Errorf("parse langfuse-openapi.yml: %w", err)
			return
		}
		comps, _ := doc["components"].(map[string]any)
		schemas, _ := comps["schemas"].(map[string]any)
		if schemas == nil {
			specErr = fmt.Errorf("langfuse-openapi.yml has no components.schemas")
			return
		}
		spec = &Spec{doc: doc, schemas: schemas}
	})
	return spec, specErr
}

// Schema returns a named component schema.
func (s *Spec) Schema(name string) (map[string]any, bool) {
	m, ok := s.schemas[name].(map[string]any)
	return m, ok
}

// RequestSchema returns the application/json request body schema of an operation.
func (s *Spec) RequestSchema(path, method string) (map[string]any, bool) {
	paths, _ := s.doc["paths"].(map[string]any)
	op, _ := dig(paths, path, method).(map[string]any)
	m, ok := dig(op, "requestBody", "content", "application/json", "schema").(map[string]any)
	return m, ok
}

// ResponseSchema returns the application/json response schema of an operation and status.
func (s *Spec) ResponseSchema(path, method, status string) (map[string]any, bool) {
	paths, _ := s.doc["paths"].(map[string]any)
	op, _ := dig(paths, path, method).(map[string]any)
	m, ok := dig(op, "responses", status, "content", "application/json", "schema").(map[string]any)
	return m, ok
}

func dig(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

// ValidateJSON decodes raw and validates it against schema; it returns every problem.
func (s *Spec) ValidateJSON(schema map[string]any, raw []byte) []string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	var probs []string
	s.validate(schema, v, "$", &probs)
	return probs
}

// Validate validates an already decoded JSON value.
func (s *Spec) Validate(schema map[string]any, v any) []string {
	var probs []string
	s.validate(schema, v, "$", &probs)
	return probs
}

func (s *Spec) resolve(schema map[string]any) map[string]any {
	for i := 0; i < 16; i++ {
		ref, ok := schema["$ref"].(string)
		if !ok {
			return schema
		}
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		next, ok := s.schemas[name].(map[string]any)
		if !ok {
			return map[string]any{}
		}
		// sibling keywords of a $ref (nullable, description) apply too
		merged := make(map[string]any, len(next)+1)
		for k, v := range next {
			merged[k] = v
		}
		if n, ok := schema["nullable"]; ok {
			merged["nullable"] = n
		}
		schema = merged
	}
	return schema
}

func (s *Spec) validate(schema map[string]any, v any, path string, probs *[]string) {
	schema = s.resolve(schema)
	if v == nil {
		if nullable, _ := schema["nullable"].(bool); nullable {
			return
		}
		if _, typed := schema["type"]; typed {
			*probs = append(*probs, path+": null where "+fmt.Sprint(schema["type"])+" is required")
		}
		return
	}
	if all, ok := schema["allOf"].([]any); ok {
		for _, sub := range all {
			if m, ok := sub.(map[string]any); ok {
				s.validate(m, v, path, probs)
			}
		}
	}
	if alts, ok := schema["oneOf"].([]any); ok {
		// lenient: at least one alternative (several of the spec's oneOfs overlap, so exactly-one would reject valid bodies)
		matched := false
		for _, sub := range alts {
			if m, ok := sub.(map[string]any); ok {
				var p []string
				s.validate(m, v, path, &p)
				if len(p) == 0 {
					matched = true
					break
				}
			}
		}
		if !matched {
			*probs = append(*probs, path+": matches no oneOf alternative")
		}
	}
	if enum, ok := schema["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			*probs = append(*probs, fmt.Sprintf("%s: %v not in enum %v", path, v, enum))
		}
	}
	switch t, _ := schema["type"].(string); t {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			*probs = append(*probs, fmt.Sprintf("%s: want object, got %T", path, v))
			return
		}
		for _, r := range asList(schema["required"]) {
			if _, ok := obj[r]; !ok {
				*probs = append(*probs, path+": missing required property "+r)
			}
		}
		props, _ := schema["properties"].(map[string]any)
		keys := slices.Sorted(maps.Keys(obj))
		for _, k := range keys {
			if p, ok := props[k].(map[string]any); ok {
				s.validate(p, obj[k], path+"."+k, probs)
				continue
			}
			switch ap := schema["additionalProperties"].(type) {
			case map[string]any:
				s.validate(ap, obj[k], path+"."+k, probs)
			case bool:
				if !ap {
					*probs = append(*probs, path+": unexpected property "+k)
				}
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			*probs = append(*probs, fmt.Sprintf("%s: want array, got %T", path, v))
			return
		}
		if items, ok := schema["items"].(map[string]any); ok {
			for i, it := range arr {
				s.validate(items, it, fmt.Sprintf("%s[%d]", path, i), probs)
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			*probs = append(*probs, fmt.Sprintf("%s: want string, got %T", path, v))
		}
	case "integer":
		switch n := v.(type) {
		case float64:
			if n != math.Trunc(n) {
				*probs = append(*probs, fmt.Sprintf("%s: want integer, got %v", path, n))
			}
		case string:
			// OTLP/JSON writes int64 as a decimal string; Langfuse accepts it.
			if _, err := strconv.ParseInt(n, 10, 64); err != nil || !lenientInt64(path) {
				*probs = append(*probs, fmt.Sprintf("%s: want integer, got string %q", path, n))
			}
		default:
			*probs = append(*probs, fmt.Sprintf("%s: want integer, got %T", path, v))
		}
	case "number":
		if _, ok := v.(float64); !ok {
			*probs = append(*probs, fmt.Sprintf("%s: want number, got %T", path, v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			*probs = append(*probs, fmt.Sprintf("%s: want boolean, got %T", path, v))
		}
	}
}

// lenientInt64 limits the int64-as-string allowance to OTLP attribute values.
func lenientInt64(path string) bool { return strings.HasSuffix(path, ".intValue") }

func asList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
