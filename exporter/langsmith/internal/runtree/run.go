package runtree

import (
	"encoding/json"

	"github.com/agentmeter/agentmeter/genai"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
)

// Run types LangSmith accepts (there is no "agent" type: agents are chains).
const (
	TypeChain     = "chain"
	TypeLLM       = "llm"
	TypeTool      = "tool"
	TypeEmbedding = "embedding"
)

// Run statuses.
const (
	StatusSuccess = "success"
	StatusError   = "error"
)

// Run is one LangSmith run. Every OTel span is complete when exported, so a run is
// sent as a "post" carrying end_time, outputs and error together; a re-emission of the
// span (Version.Rev ≥ 1) is sent whole again as a "patch" of the same run.
type Run struct {
	Head    Head
	Inputs  Inputs
	Outputs Outputs
	Extra   Extra
	Error   string
	// Source locates the span (resource, scope, span index) so a partly sent batch can
	// be rebuilt from the spans that still need sending.
	Source SpanRef
	// Version is the span's key and merge revision (0: a first emission).
	Version vendorhttp.Version
}

// SpanRef is the position of a span inside the ptrace.Traces it was read from.
type SpanRef = vendorhttp.SpanRef

// Head is the run object without the fields multipart ingestion sends as their own parts
// (inputs, outputs, extra, error, events, serialized).
type Head struct {
	ID          string   `json:"id"`
	TraceID     string   `json:"trace_id"`
	DottedOrder string   `json:"dotted_order"`
	ParentRunID string   `json:"parent_run_id,omitempty"`
	Name        string   `json:"name"`
	RunType     string   `json:"run_type"`
	StartTime   string   `json:"start_time"`
	EndTime     string   `json:"end_time,omitempty"`
	SessionName string   `json:"session_name"`
	Status      string   `json:"status"`
	Tags        []string `json:"tags,omitempty"`
	// Unplaced is an update whose place in its trace the exporter does not know (a
	// correction of a run posted before a restart, or whose trace the chain cache
	// forgot): it is written without trace_id, dotted_order and parent_run_id and sent
	// by itself to PATCH /runs/{id}, where LangSmith keeps the run where it is.
	Unplaced bool `json:"-"`
}

// Inputs carries opt-in content only (docs/contract.md#attributes: off by default).
type Inputs struct {
	Messages           json.RawMessage `json:"messages,omitempty"`
	SystemInstructions json.RawMessage `json:"system_instructions,omitempty"`
}

// Outputs carries usage_metadata on llm runs, and opt-in output content.
type Outputs struct {
	Messages      json.RawMessage `json:"messages,omitempty"`
	UsageMetadata *UsageMetadata  `json:"usage_metadata,omitempty"`
}

// UsageMetadata is LangSmith's inclusive usage shape (docs/langsmith.md): input_tokens
// includes the cache details, output_tokens includes reasoning; details are subsets.
type UsageMetadata struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
	// the details LangSmith prices on their own, written when non-zero:
	// input_token_details.cache_read, .cache_creation, output_token_details.reasoning
	CacheRead, CacheCreation, Reasoning int64
	// Cost is the call's own cost (agentmeter.cost.*), sent as input_cost, output_cost,
	// total_cost and their details so LangSmith shows our figure instead of pricing the
	// call with its own table; nil when the span has none.
	Cost *genai.Cost `json:"-"`
}

// Extra is the run's extra object: metadata (the span's attributes, then ls_provider,
// ls_model_name, thread ids, merged subagent usage and the other derived entries) and
// invocation_params.
type Extra struct {
	// Attrs are the span attributes written into metadata as they are, less those moved
	// elsewhere or derived (see Mapper); written straight from the span, never copied.
	Attrs    pcommon.Map
	HasAttrs bool
	// Metadata are the derived entries, written after the attributes.
	Metadata         Metadata
	InvocationParams Metadata
}

// Metadata is a JSON object kept as ordered key/values with unique keys.
type Metadata []KV

// StrKV is a string metadata entry.
func StrKV(key, value string) KV { return KV{Key: key, Str: value, IsStr: true} }

// KV is one metadata entry. Value is a string, int64, bool, []string, *UsageMetadata or
// *SubagentUsage; strings are kept in Str instead (IsStr), which spares boxing them.
type KV struct {
	Key   string
	Value any
	Str   string
	IsStr bool
}

// Get returns the value of key among the derived entries.
func (m Metadata) Get(key string) (any, bool) {
	for i := range m {
		if m[i].Key == key {
			if m[i].IsStr {
				return m[i].Str, true
			}
			return m[i].Value, true
		}
	}
	return nil, false
}

// SubagentUsage is the merged usage of the subagents a model call dispatched
// (docs/contract.md#merge), written to extra.metadata.subagent_usage.
type SubagentUsage struct {
	Usage         *UsageMetadata
	Cost          *genai.Cost // merged subagent cost, written as cost_usd; nil when none
	Dispatches    pcommon.Value
	HasDispatches bool
	ToolCallIDs   []string
}
