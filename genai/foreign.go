package genai

// Attribute names of the conventions other instrumentations use today, which the
// genainormalize processor maps onto the contract keys (docs/genainormalize.md has the
// table of what each becomes). They are only ever read; agentmeter never writes them.

// Older GenAI semantic conventions (before v1.37) and the names OpenLLMetry emitted
// alongside them.
const (
	// AttrSystem is the deprecated predecessor of gen_ai.provider.name. The Vercel AI SDK
	// writes its provider id here ("openai.chat").
	AttrSystem          = "gen_ai.system"
	AttrUsagePrompt     = "gen_ai.usage.prompt_tokens"
	AttrUsageCompletion = "gen_ai.usage.completion_tokens"
	// AttrUsageTotal is written by OpenLLMetry; the contract has no total (input + output).
	AttrUsageTotal = "gen_ai.usage.total_tokens"
)

// OpenLLMetry (Traceloop) names that never were semantic conventions.
const (
	AttrLLMUsagePrompt         = "llm.usage.prompt_tokens"
	AttrLLMUsageCompletion     = "llm.usage.completion_tokens"
	AttrUsageCacheReadFlat     = "gen_ai.usage.cache_read_input_tokens"
	AttrUsageCacheCreationFlat = "gen_ai.usage.cache_creation_input_tokens"
	AttrUsageReasoningFlat     = "gen_ai.usage.reasoning_tokens"
	AttrTraceloopSpanKind      = "traceloop.span.kind"
	AttrTraceloopEntityName    = "traceloop.entity.name"
	AttrTraceloopEntityInput   = "traceloop.entity.input"
	AttrTraceloopEntityOutput  = "traceloop.entity.output"
	TraceloopKindTool          = "tool"
	TraceloopKindAgent         = "agent"
	// TraceloopAnthropicScope is the instrumentation scope of OpenLLMetry-JS for the
	// Anthropic SDK; up to 0.27.0 it reported gen_ai.usage.input_tokens without cache tokens.
	TraceloopAnthropicScope = "@traceloop/instrumentation-anthropic"
)

// OpenInference (Arize) names. openinference.span.kind itself is in modelcall.go.
const (
	AttrOIPromptTokens       = "llm.token_count.prompt"
	AttrOICompletionTokens   = "llm.token_count.completion"
	AttrOICacheRead          = "llm.token_count.prompt_details.cache_read"
	AttrOICacheWrite         = "llm.token_count.prompt_details.cache_write"
	AttrOIReasoning          = "llm.token_count.completion_details.reasoning"
	AttrOIModelName          = "llm.model_name"
	AttrOIRequestModelName   = "llm.request.model_name"
	AttrOIResponseModelName  = "llm.response.model_name"
	AttrOIProvider           = "llm.provider"
	AttrOISystem             = "llm.system"
	AttrOIToolName           = "tool.name"
	AttrOIToolID             = "tool.id"
	AttrOIToolCallID         = "tool_call.id"
	AttrOIAgentName          = "agent.name"
	AttrOIMetadata           = "metadata"
	AttrOIInputValue         = "input.value"
	AttrOIOutputValue        = "output.value"
	AttrOIOutputMessagesRoot = "llm.output_messages."
	// OpenInference flattens tool calls of output messages into
	// llm.output_messages.<i>.message.tool_calls.<j>.tool_call.id.
	OIToolCallIDSuffix     = ".tool_call.id"
	OpenInferenceKindTool  = "TOOL"
	OpenInferenceKindAgent = "AGENT"
)

// Vercel AI SDK legacy telemetry (ai.* spans). ai.operationId is in modelcall.go.
const (
	AttrAIInputTokens       = "ai.usage.inputTokens"
	AttrAIOutputTokens      = "ai.usage.outputTokens"
	AttrAIPromptTokens      = "ai.usage.promptTokens"
	AttrAICompletionTokens  = "ai.usage.completionTokens"
	AttrAICachedInputTokens = "ai.usage.cachedInputTokens"
	AttrAICacheReadTokens   = "ai.usage.inputTokenDetails.cacheReadTokens"
	AttrAICacheWriteTokens  = "ai.usage.inputTokenDetails.cacheWriteTokens"
	AttrAIReasoningTokens   = "ai.usage.reasoningTokens"
	AttrAIOutputReasoning   = "ai.usage.outputTokenDetails.reasoningTokens"
	AttrAIModelID           = "ai.model.id"
	AttrAIModelProvider     = "ai.model.provider"
	AttrAIResponseModel     = "ai.response.model"
	AttrAIResponseToolCalls = "ai.response.toolCalls"
	AttrAIToolCallID        = "ai.toolCall.id"
	AttrAIToolCallName      = "ai.toolCall.name"
	AttrAIFunctionID        = "ai.telemetry.functionId"
	AIOperationToolCall     = "ai.toolCall"
)

// AttrLSDottedOrder is LangSmith's own placement of a span's run: the dotted_order of
// its ancestor chain, root first (internal/dottedorder). LangSmith's SDKs and the
// agentmeter runtime set it when a span starts, so a run can be placed in its tree
// before its parents have ended; the LangSmith exporter then takes the run's id,
// trace_id, parent and dotted_order from it.
const AttrLSDottedOrder = "langsmith.span.dotted_order"

// AttrLSSessionName is the LangSmith project (session) a span's run goes to, as
// LangSmith's own OTel ingestion routes by it; the LangSmith exporter's project when
// absent. The agentmeter runtime sets it on a run placed under a caller's LangSmith run
// in another process, to the caller's project (LangSmith's SDKs keep a distributed
// trace in the caller's project).
const AttrLSSessionName = "langsmith.trace.session_name"

// AttrLSMetadataPrefix starts LangSmith's OTel attributes for a run's metadata:
// langsmith.metadata.<key> is metadata key <key>. LangSmith's SDKs in OTel mode write
// them; the agentmeter runtime writes the metadata a caller's LangSmith SDK sent in
// baggage (langsmith-metadata).
const AttrLSMetadataPrefix = "langsmith.metadata."

// LangChain run metadata (ls_provider, ls_model_name), as it reaches a span: bare, under
// LangSmith's or Langfuse's metadata prefix, or inside OpenInference's metadata JSON.
const (
	AttrLSProvider          = "ls_provider"
	AttrLSModelName         = "ls_model_name"
	AttrLSProviderMeta      = "metadata.ls_provider"
	AttrLSModelNameMeta     = "metadata.ls_model_name"
	AttrLSProviderLangSmith = "langsmith.metadata.ls_provider"
	AttrLSModelLangSmith    = "langsmith.metadata.ls_model_name"
	AttrLSProviderLangfuse  = "langfuse.observation.metadata.ls_provider"
	AttrLSModelLangfuse     = "langfuse.observation.metadata.ls_model_name"
	// LangSmith's OpenTelemetry export writes LangChain's usage_metadata details as JSON
	// objects: input {"cache_read","cache_creation","ephemeral_1h_input_tokens",...},
	// output {"reasoning",...}. Its gen_ai.system defaults to "langchain", no provider.
	AttrUsageInputDetails  = "gen_ai.usage.input_token_details"
	AttrUsageOutputDetails = "gen_ai.usage.output_token_details"
	LangChainSystem        = "langchain"
)

// Written by the normalisation when it made a reported count inclusive (an emitter that
// reported input without its cache tokens, or output without its reasoning tokens): the
// count as the emitter sent it. Its presence also means "already adjusted", so a second
// collector in a row leaves the count alone.
const (
	AttrUsageReportedInput  = "agentmeter.usage.reported_input_tokens"
	AttrUsageReportedOutput = "agentmeter.usage.reported_output_tokens"
)
