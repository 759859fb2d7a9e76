package langfusefake

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/agentmeter/agentmeter/genai"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Observation is what Langfuse's OTLP ingestion would make of one span, reduced to the
// fields agentmeter cares about. The rules follow the server's OtelIngestionProcessor as
// described in docs/langfuse.md#mapping: first match wins.
type Observation struct {
	TraceID, ID, ParentID string // hex, as Langfuse stores them
	StartTime             pcommon.Timestamp
	Name                  string
	Type                  string // lower-case observation type
	Model                 string
	Usage                 map[string]int64   // usageDetails after the server's extraction
	UsageFromDetails      bool               // taken from langfuse.observation.usage_details
	Cost                  map[string]float64 // costDetails (USD) as ingested; nil: Langfuse prices it itself
	SessionID, UserID     string
	TraceName             string
	Tags                  []string
	Metadata              map[string]any // flattened langfuse.observation.metadata.<key>
	Level                 string
	Attributes            map[string]any // every span attribute, as plain values
}

// UsageTotal is the sum of every usage key except total: what Langfuse counts for the
// observation when it sums a trace.
func (o Observation) UsageTotal() int64 {
	var n int64
	for k, v := range o.Usage {
		if k != "total" {
			n += v
		}
	}
	return n
}

// Observe maps one span.
func Observe(sp ptrace.Span) Observation {
	attrs := sp.Attributes()
	o := Observation{
		TraceID:    hexTrace(sp.TraceID()),
		ID:         hexSpan(sp.SpanID()),
		StartTime:  sp.StartTimestamp(),
		Name:       genai.StringAttr(attrs, "gen_ai.tool.name"),
		Attributes: attrs.AsRaw(),
		Metadata:   map[string]any{},
		Level:      "DEFAULT",
	}
	if !sp.ParentSpanID().IsEmpty() {
		o.ParentID = hexSpan(sp.ParentSpanID())
	}
	if o.Name == "" {
		o.Name = sp.Name()
	}
	if sp.Status().Code() == ptrace.StatusCodeError {
		o.Level = "ERROR"
	}
	o.Type = observationType(attrs)
	o.Model = genai.FirstStringAttr(attrs, "langfuse.observation.model.name", "gen_ai.response.model", "gen_ai.request.model", "model")
	o.SessionID = genai.FirstStringAttr(attrs, "langfuse.session.id", "session.id", "gen_ai.conversation.id")
	o.UserID = genai.FirstStringAttr(attrs, "langfuse.user.id", "user.id")
	o.TraceName = genai.StringAttr(attrs, "langfuse.trace.name")
	o.Tags = tags(attrs)
	attrs.Range(func(k string, v pcommon.Value) bool {
		if rest, ok := strings.CutPrefix(k, "langfuse.observation.metadata."); ok {
			o.Metadata[rest] = v.AsRaw()
		}
		return true
	})
	o.Usage, o.UsageFromDetails = usage(attrs)
	if o.Usage != nil || o.Type == "generation" {
		o.Cost = cost(attrs)
	}
	return o
}

// CostTotal is the observation's total cost as Langfuse stores it: the ingested total,
// else the sum of the other keys.
func (o Observation) CostTotal() float64 {
	if t, ok := o.Cost["total"]; ok {
		return t
	}
	var n float64
	for _, v := range o.Cost {
		n += v
	}
	return n
}

// cost follows the server's costDetails extraction: langfuse.observation.cost_details
// (a JSON object string of non-negative numbers; others dropped), else gen_ai.usage.cost,
// else llm.cost.total, each as {total}.
func cost(attrs pcommon.Map) map[string]float64 {
	if v, ok := attrs.Get("langfuse.observation.cost_details"); ok {
		var raw map[string]any
		if v.Type() != pcommon.ValueTypeStr || json.Unmarshal([]byte(v.Str()), &raw) != nil {
			return nil
		}
		out := map[string]float64{}
		for k, x := range raw {
			if f, ok := x.(float64); ok && f >= 0 {
				out[k] = f
			}
		}
		return out
	}
	for _, k := range []string{"gen_ai.usage.cost", "llm.cost.total"} {
		if v, ok := attrs.Get(k); ok {
			switch v.Type() {
			case pcommon.ValueTypeDouble:
				return map[string]float64{"total": v.Double()}
			case pcommon.ValueTypeInt:
				return map[string]float64{"total": float64(v.Int())}
			}
		}
	}
	return nil
}

func observationType(attrs pcommon.Map) string {
	if t := strings.ToLower(genai.StringAttr(attrs, "langfuse.observation.type")); t != "" {
		switch t {
		case "span", "generation", "event", "embedding", "agent", "tool", "chain", "retriever", "guardrail", "evaluator":
			return t
		}
	}
	switch genai.StringAttr(attrs, "gen_ai.operation.name") {
	case "chat", "completion", "text_completion", "generate_content", "generate":
		return "generation"
	case "embeddings":
		return "embedding"
	case "invoke_agent", "create_agent":
		return "agent"
	case "execute_tool":
		return "tool"
	}
	if genai.FirstStringAttr(attrs, "gen_ai.tool.name", "gen_ai.tool.call.id") != "" {
		return "tool"
	}
	if genai.FirstStringAttr(attrs, "langfuse.observation.model.name", "gen_ai.request.model", "gen_ai.response.model", "model") != "" {
		return "generation"
	}
	return "span"
}

// usage follows extractUsageDetails: usage_details JSON first (a flat map of
// non-negative integers is kept as is), else the generic gen_ai.usage.* normalisation.
// Agent operations carry no usage (isAiSdkAgentOperation).
func usage(attrs pcommon.Map) (map[string]int64, bool) {
	if op := genai.StringAttr(attrs, "gen_ai.operation.name"); op == "invoke_agent" || op == "agent_step" {
		return nil, false
	}
	if v, ok := attrs.Get("langfuse.observation.usage_details"); ok {
		if v.Type() != pcommon.ValueTypeStr {
			return map[string]int64{}, true // a non-string is an empty object and suppresses the fallback
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(v.Str()), &raw); err == nil {
			out := map[string]int64{}
			for k, x := range raw {
				if f, ok := x.(float64); ok && f >= 0 && f == float64(int64(f)) {
					out[k] = int64(f)
				}
			}
			return out, true
		}
	}
	var in, out, total, cacheRead, cacheWrite, reasoning int64
	var hasIn, hasOut, hasTotal bool
	rest := map[string]int64{}
	attrs.Range(func(k string, v pcommon.Value) bool {
		key, ok := strings.CutPrefix(k, "gen_ai.usage.")
		if !ok || key == "cost" {
			return true
		}
		n, ok := intOf(v)
		if !ok {
			return true
		}
		switch key {
		case "prompt_tokens", "input_tokens", "prompt":
			in, hasIn = n, true
		case "completion_tokens", "output_tokens", "completion":
			out, hasOut = n, true
		case "total_tokens", "total":
			total, hasTotal = n, true
		case "cache_read.input_tokens", "cache_read_input_tokens", "cache_read_tokens", "input_cached_tokens":
			cacheRead = n
		case "cache_creation.input_tokens", "cache_creation_input_tokens", "cache_write_tokens", "input_cache_creation":
			cacheWrite = n
		case "reasoning.output_tokens":
			reasoning = n
		default:
			rest[strings.TrimPrefix(key, "details.")] = n
		}
		return true
	})
	if !hasIn && !hasOut && !hasTotal && cacheRead == 0 && cacheWrite == 0 && reasoning == 0 && len(rest) == 0 {
		return nil, false
	}
	res := rest
	if hasIn {
		res["input"] = max(in-cacheRead-cacheWrite, 0)
	}
	if hasOut {
		res["output"] = max(out-reasoning, 0)
	}
	if hasTotal {
		res["total"] = total
	}
	if cacheRead != 0 {
		res["input_cached_tokens"] = cacheRead
	}
	if cacheWrite != 0 {
		res["input_cache_creation"] = cacheWrite
	}
	if reasoning != 0 {
		res["output_reasoning_tokens"] = reasoning
	}
	return res, false
}

func intOf(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		return int64(v.Double()), true
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// tags reads langfuse.trace.tags / langfuse.tags: a string array, a JSON-array string,
// a comma-separated string or a single string.
func tags(attrs pcommon.Map) []string {
	for _, k := range []string{"langfuse.trace.tags", "langfuse.tags"} {
		v, ok := attrs.Get(k)
		if !ok {
			continue
		}
		if v.Type() == pcommon.ValueTypeSlice {
			var out []string
			for i := 0; i < v.Slice().Len(); i++ {
				out = append(out, v.Slice().At(i).AsString())
			}
			return out
		}
		s := strings.TrimSpace(v.AsString())
		var arr []string
		if strings.HasPrefix(s, "[") && json.Unmarshal([]byte(s), &arr) == nil {
			return arr
		}
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	return nil
}

func hexTrace(id pcommon.TraceID) string { return id.String() }
func hexSpan(id pcommon.SpanID) string   { return id.String() }
