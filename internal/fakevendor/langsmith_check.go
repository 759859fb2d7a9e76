package fakevendor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var (
	segmentRE = regexp.MustCompile(`^([0-9]{8}T[0-9]{6})([0-9]{6})Z([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)
	runTypes  = map[string]bool{"tool": true, "chain": true, "llm": true, "retriever": true, "embedding": true, "prompt": true, "parser": true}
)

// CheckLangSmithRun checks one run against the derived OpenAPI schema and the server-side
// rules no schema expresses (docs/langsmith.md): required fields, dotted_order format,
// its first/last/penultimate UUIDs, root id == trace_id, non-decreasing segment times,
// timestamps, and usage_metadata's allowed keys and inclusive arithmetic.
func CheckLangSmithRun(run map[string]any) []string {
	var v []string
	runSchema, usageSchema, err := langSmithSchemas()
	if err != nil {
		return []string{"schema: " + err.Error()}
	}
	inst, err := toInstance(run)
	if err != nil {
		return []string{err.Error()}
	}
	if err := runSchema.Validate(inst); err != nil {
		v = append(v, "schema RunIngest: "+err.Error())
	}
	for _, k := range []string{"id", "trace_id", "dotted_order", "name", "run_type", "start_time", "end_time", "session_name"} {
		if s, _ := run[k].(string); s == "" {
			v = append(v, "missing "+k)
		}
	}
	for _, k := range []string{"inputs", "outputs", "extra"} {
		if _, ok := run[k].(map[string]any); !ok {
			v = append(v, k+" must be an object")
		}
	}
	id, _ := run["id"].(string)
	traceID, _ := run["trace_id"].(string)
	parent, _ := run["parent_run_id"].(string)
	if rt, _ := run["run_type"].(string); !runTypes[rt] {
		v = append(v, fmt.Sprintf("run_type %q", rt))
	}
	dotted, _ := run["dotted_order"].(string)
	segs := strings.Split(dotted, ".")
	var ids []string
	prev := ""
	for _, s := range segs {
		m := segmentRE.FindStringSubmatch(s)
		if m == nil {
			v = append(v, fmt.Sprintf("dotted_order segment %q is not YYYYMMDDTHHMMSSffffffZ<uuid>", s))
			continue
		}
		if _, err := time.Parse("20060102T150405", m[1]); err != nil {
			v = append(v, fmt.Sprintf("dotted_order segment %q: bad time", s))
		}
		if ts := m[1] + m[2]; ts < prev {
			v = append(v, fmt.Sprintf("dotted_order segment %q goes back in time", s))
		} else {
			prev = ts
		}
		ids = append(ids, m[3])
	}
	if len(ids) == len(segs) && len(ids) > 0 {
		if ids[len(ids)-1] != id {
			v = append(v, "dotted_order does not end with the run id")
		}
		if ids[0] != traceID {
			v = append(v, "dotted_order does not start with trace_id")
		}
		switch {
		case parent == "" && len(ids) != 1:
			v = append(v, "dotted_order must contain a single part for root runs")
		case parent != "" && (len(ids) < 2 || ids[len(ids)-2] != parent):
			v = append(v, "penultimate dotted_order UUID is not parent_run_id")
		}
	}
	if parent == "" && id != traceID {
		v = append(v, "root run id != trace_id")
	}
	for _, k := range []string{"start_time", "end_time"} {
		if s, _ := run[k].(string); s != "" {
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				v = append(v, fmt.Sprintf("%s %q is not RFC 3339", k, s))
			}
		}
	}
	if run["status"] == "error" {
		if e, _ := run["error"].(string); e == "" {
			v = append(v, "status error without error text")
		}
	}
	if outputs, ok := run["outputs"].(map[string]any); ok {
		if um, ok := outputs["usage_metadata"].(map[string]any); ok {
			if run["run_type"] != "llm" {
				v = append(v, "usage_metadata on a non-llm run")
			}
			uinst, err := toInstance(um)
			if err == nil {
				if err := usageSchema.Validate(uinst); err != nil {
					v = append(v, "schema UsageMetadata: "+err.Error())
				}
			}
			in, out, total := num(um["input_tokens"]), num(um["output_tokens"]), num(um["total_tokens"])
			if total != in+out {
				v = append(v, fmt.Sprintf("total_tokens %v != input %v + output %v", total, in, out))
			}
			if d, ok := um["input_token_details"].(map[string]any); ok && num(d["cache_read"])+num(d["cache_creation"]) > in {
				v = append(v, "input_token_details exceed input_tokens (usage must be inclusive)")
			}
			if d, ok := um["output_token_details"].(map[string]any); ok && num(d["reasoning"]) > out {
				v = append(v, "output_token_details exceed output_tokens (usage must be inclusive)")
			}
			// costs are inclusive like the counts: input_cost + output_cost = total_cost
			// when both are sent, and the details are parts of their side
			ic, hasIC := um["input_cost"]
			oc, hasOC := um["output_cost"]
			tc := num(um["total_cost"])
			if hasIC && hasOC && math.Abs(num(ic)+num(oc)-tc) > 1e-9*math.Max(1, tc) {
				v = append(v, fmt.Sprintf("total_cost %v != input_cost %v + output_cost %v", tc, ic, oc))
			}
			if (hasIC || hasOC) && um["total_cost"] == nil {
				v = append(v, "input_cost/output_cost without total_cost")
			}
			if d, ok := um["input_cost_details"].(map[string]any); ok && num(d["cache_read"])+num(d["cache_creation"]) > num(ic)+1e-12 {
				v = append(v, "input_cost_details exceed input_cost (cost must be inclusive)")
			}
			if d, ok := um["output_cost_details"].(map[string]any); ok && num(d["reasoning"]) > num(oc)+1e-12 {
				v = append(v, "output_cost_details exceed output_cost (cost must be inclusive)")
			}
		}
	}
	if extra, ok := run["extra"].(map[string]any); ok {
		if md, ok := extra["metadata"].(map[string]any); ok {
			if _, bad := md["usage_metadata"]; bad {
				v = append(v, "extra.metadata.usage_metadata would be read as usage")
			}
		}
	}
	return v
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func toInstance(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("re-encode run: %w", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}
