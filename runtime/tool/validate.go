package tool

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// ValidateArgs checks args against the JSON Schema subset the built-in tools use:
// type object with properties (type string/integer/number/boolean/array/object, enum,
// items for arrays) and required. Unknown properties are rejected when the schema sets
// additionalProperties false. The first problem is returned as *ArgError naming the field.
func ValidateArgs(spec Spec, args map[string]any) error {
	schema := spec.Parameters
	if schema == nil {
		return nil
	}
	props, _ := schema["properties"].(map[string]any)
	for _, req := range requiredOf(schema) {
		v, ok := args[req]
		if !ok || v == nil {
			return &ArgError{Tool: spec.Name, Field: req, Reason: "is required"}
		}
	}
	if ap, ok := schema["additionalProperties"].(bool); ok && !ap {
		keys := slices.Sorted(maps.Keys(args))
		for _, k := range keys {
			if _, known := props[k]; !known {
				return &ArgError{Tool: spec.Name, Field: k, Reason: "is not a known argument"}
			}
		}
	}
	keys := slices.Sorted(maps.Keys(props))
	for _, k := range keys {
		v, ok := args[k]
		if !ok || v == nil {
			continue
		}
		ps, _ := props[k].(map[string]any)
		if reason := checkValue(ps, v); reason != "" {
			return &ArgError{Tool: spec.Name, Field: k, Reason: reason}
		}
	}
	return nil
}

func requiredOf(schema map[string]any) []string {
	switch r := schema["required"].(type) {
	case []string:
		return r
	case []any:
		out := make([]string, 0, len(r))
		for _, x := range r {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func checkValue(schema map[string]any, v any) string {
	if schema == nil {
		return ""
	}
	typ, _ := schema["type"].(string)
	switch typ {
	case "string":
		s, ok := v.(string)
		if !ok {
			return fmt.Sprintf("must be a string, got %s", jsonType(v))
		}
		if enum := enumOf(schema); len(enum) > 0 && !slices.Contains(enum, s) {
			return fmt.Sprintf("must be one of %v, got %q", enum, s)
		}
	case "integer":
		f, ok := v.(float64)
		if i, isInt := v.(int); isInt {
			f, ok = float64(i), true
		}
		if !ok || f != math.Trunc(f) {
			return fmt.Sprintf("must be an integer, got %s", jsonType(v))
		}
		if min, ok := schema["minimum"].(float64); ok && f < min {
			return fmt.Sprintf("must be at least %v", min)
		}
	case "number":
		if _, ok := v.(float64); !ok {
			if _, isInt := v.(int); !isInt {
				return fmt.Sprintf("must be a number, got %s", jsonType(v))
			}
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Sprintf("must be a boolean, got %s", jsonType(v))
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return fmt.Sprintf("must be an array, got %s", jsonType(v))
		}
		items, _ := schema["items"].(map[string]any)
		for i, it := range arr {
			if reason := checkValue(items, it); reason != "" {
				return fmt.Sprintf("item %d %s", i, reason)
			}
		}
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Sprintf("must be an object, got %s", jsonType(v))
		}
		if props, ok := schema["properties"].(map[string]any); ok {
			for _, req := range requiredOf(schema) {
				if _, has := obj[req]; !has {
					return fmt.Sprintf("is missing %q", req)
				}
			}
			for k, sub := range props {
				if x, has := obj[k]; has && x != nil {
					if reason := checkValue(sub.(map[string]any), x); reason != "" {
						return fmt.Sprintf("%s %s", k, reason)
					}
				}
			}
		}
	}
	return ""
}

func enumOf(schema map[string]any) []string {
	switch e := schema["enum"].(type) {
	case []string:
		return e
	case []any:
		out := make([]string, 0, len(e))
		for _, x := range e {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64, int, int64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
