// Package shape rewrites agentmeter spans (docs/contract.md) into the attributes
// Langfuse's OTLP ingestion maps onto traces and observations
// (docs/langfuse.md#mapping). The contract keys come from genai;
// the Langfuse attribute names live here, because only this exporter speaks them.
package shape

// Langfuse span attributes read by its OTLP ingestion (OtelIngestionProcessor.ts). Each
// is the highest-precedence name for its field, so an emitter's lower-precedence
// attributes (session.id, gen_ai.conversation.id, …) never compete with ours.
const (
	AttrObservationType     = "langfuse.observation.type"
	AttrObservationModel    = "langfuse.observation.model.name"
	AttrObservationUsage    = "langfuse.observation.usage_details"
	AttrObservationCost     = "langfuse.observation.cost_details"
	AttrObservationMetadata = "langfuse.observation.metadata" // prefix of flattened metadata keys
	AttrTraceName           = "langfuse.trace.name"
	AttrTraceTags           = "langfuse.trace.tags"
	AttrSessionID           = "langfuse.session.id"
	AttrUserID              = "langfuse.user.id"
)

// Lower-precedence trace attributes an emitter may already carry; read, never written.
const (
	attrSemSessionID = "session.id"
	attrSemUserID    = "user.id"
	attrLegacyTags   = "langfuse.tags"
	attrDeployEnv    = "deployment.environment.name"
	attrDeployEnvOld = "deployment.environment"
	// other frameworks' attributes that change Langfuse's type or model inference
	attrOpenInferenceKind = "openinference.span.kind"
	attrAIModelID         = "ai.model.id"
)

// Observation types (langfuse.observation.type values).
const (
	TypeGeneration = "generation"
	TypeAgent      = "agent"
	TypeTool       = "tool"
	TypeSpan       = "span"
)

// Keys of langfuse.observation.usage_details: Langfuse's exclusive buckets, each priced on
// its own (docs/langfuse.md). One key per bucket, never a synonym next to it.
const (
	UsageInput         = "input"
	UsageCacheRead     = "input_cached_tokens"
	UsageCacheCreation = "input_cache_creation"
	UsageOutput        = "output"
	UsageReasoning     = "output_reasoning_tokens"
	UsageTotal         = "total"
)

// Flattened observation-metadata keys (langfuse.observation.metadata.<key>). Merged
// subagent usage goes here, never into usage_details, so Langfuse's trace totals count
// each token once.
const (
	MetaCaller                 = AttrObservationMetadata + ".caller"
	MetaMergeStatus            = AttrObservationMetadata + ".merge_status"
	MetaSubagentInput          = AttrObservationMetadata + ".subagent_input_tokens"
	MetaSubagentOutput         = AttrObservationMetadata + ".subagent_output_tokens"
	MetaSubagentTotal          = AttrObservationMetadata + ".subagent_total_tokens"
	MetaSubagentCacheRead      = AttrObservationMetadata + ".subagent_cache_read_input_tokens"
	MetaSubagentCacheCreation  = AttrObservationMetadata + ".subagent_cache_creation_input_tokens"
	MetaSubagentReasoning      = AttrObservationMetadata + ".subagent_reasoning_output_tokens"
	MetaSubagentDispatches     = AttrObservationMetadata + ".subagent_dispatches"
	MetaSubagentCost           = AttrObservationMetadata + ".subagent_cost_usd"
	MetaSubagentToolCallIDs    = AttrObservationMetadata + ".subagent_tool_call_ids"
	defaultUserID              = "default"    // DeerFlow: langfuse_user_id = user_id or "default"
	defaultLeadTraceName       = "lead-agent" // DeerFlow: langfuse_trace_name = assistant_id or "lead-agent"
	tagEnvPrefix, tagModelPref = "env:", "model:"
)
