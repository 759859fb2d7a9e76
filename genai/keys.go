package genai

// Operation names (gen_ai.operation.name) and the span-name prefixes derived from them.
const (
	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
)

// LeadAgentName is the agent name of the lead agent; its run span is "invoke_agent lead_agent".
const LeadAgentName = "lead_agent"

// TaskToolName is the tool that dispatches subagents.
const TaskToolName = "task"

// Semantic-convention attribute keys (GenAI semconv v1.41.1).
const (
	AttrOperationName   = "gen_ai.operation.name"
	AttrProviderName    = "gen_ai.provider.name"
	AttrRequestModel    = "gen_ai.request.model"
	AttrResponseModel   = "gen_ai.response.model"
	AttrResponseID      = "gen_ai.response.id"
	AttrFinishReasons   = "gen_ai.response.finish_reasons"
	AttrRequestStream   = "gen_ai.request.stream"
	AttrConversationID  = "gen_ai.conversation.id"
	AttrAgentName       = "gen_ai.agent.name"
	AttrAgentID         = "gen_ai.agent.id"
	AttrToolName        = "gen_ai.tool.name"
	AttrToolCallID      = "gen_ai.tool.call.id"
	AttrToolType        = "gen_ai.tool.type"
	AttrInputMessages   = "gen_ai.input.messages"
	AttrOutputMessages  = "gen_ai.output.messages"
	AttrToolCallResult  = "gen_ai.tool.call.result"
	AttrSystemInstr     = "gen_ai.system_instructions"
	AttrTokenType       = "gen_ai.token.type"
	AttrEndUserID       = "enduser.id"
	AttrErrorType       = "error.type"
	AttrServiceName     = "service.name"
	ToolTypeFunction    = "function"
	TokenTypeSemInput   = "input"
	TokenTypeSemOutput  = "output"
	AttrUsageInput      = "gen_ai.usage.input_tokens"
	AttrUsageOutput     = "gen_ai.usage.output_tokens"
	AttrUsageCacheRead  = "gen_ai.usage.cache_read.input_tokens"
	AttrUsageCacheCreat = "gen_ai.usage.cache_creation.input_tokens"
	// AttrUsageCacheWrite is the newer semconv name for cache creation; readers accept
	// both, writers emit AttrUsageCacheCreat only (docs/contract.md#usage).
	AttrUsageCacheWrite = "gen_ai.usage.cache_write.input_tokens"
	AttrUsageReasoning  = "gen_ai.usage.reasoning.output_tokens"
)

// agentmeter.* attribute keys for what the conventions do not cover.
const (
	AttrRunID               = "agentmeter.run.id"
	AttrCaller              = "agentmeter.caller"
	AttrResponseToolCallIDs = "agentmeter.response.tool_call_ids"
	AttrStepKind            = "agentmeter.step.kind"
	AttrSubagentStatus      = "agentmeter.subagent.status"
	AttrMergeStatus         = "agentmeter.merge.status"
	// AttrMergeRevision marks a span the merge passes on again, whole, under its span
	// id (an int that grows with each re-emission of the span); first emissions have none.
	AttrMergeRevision = "agentmeter.merge.revision"
	// AttrCallerPending (bool) marks the first emission of a model call that names no
	// caller while some ancestor of it has not arrived: the trace's shape may still make
	// it a subagent's. Counters wait for the re-emission marked AttrCallerSettled.
	AttrCallerPending = "agentmeter.merge.caller_pending"
	// AttrCallerSettled (bool) marks the one re-emission of such a call that carries its
	// settled caller: the version counters count.
	AttrCallerSettled       = "agentmeter.merge.caller_settled"
	AttrSubagentDispatches  = "agentmeter.subagent.dispatches"
	AttrSubagentToolCallIDs = "agentmeter.subagent.tool_call_ids"
	AttrSubagentInput       = "agentmeter.subagent.input_tokens"
	AttrSubagentOutput      = "agentmeter.subagent.output_tokens"
	AttrSubagentTotal       = "agentmeter.subagent.total_tokens"
	AttrSubagentCacheRead   = "agentmeter.subagent.cache_read.input_tokens"
	AttrSubagentCacheCreat  = "agentmeter.subagent.cache_creation.input_tokens"
	AttrSubagentReasoning   = "agentmeter.subagent.reasoning.output_tokens"
)

// Values of agentmeter.merge.status.
const (
	MergeMerged = "merged"
	MergeOrphan = "orphan"
	MergeLate   = "late"
	// MergeCorrected marks a dispatching model-call span re-emitted under its own span id
	// with corrected agentmeter.subagent.* after parts of its trace arrived late. Vendors
	// upsert it by id; the token metrics skip it, since its own usage was counted already.
	MergeCorrected = "corrected"
)

// Values of agentmeter.subagent.status (DeerFlow's terminal task statuses).
const (
	SubagentCompleted      = "completed"
	SubagentFailed         = "failed"
	SubagentCancelled      = "cancelled"
	SubagentTimedOut       = "timed_out"
	SubagentPollingTimeout = "polling_timed_out"
)

// Values of agentmeter.step.kind (DeerFlow's attribution step kinds).
const (
	StepTodoUpdate       = "todo_update"
	StepSubagentDispatch = "subagent_dispatch"
	StepToolBatch        = "tool_batch"
	StepFinalAnswer      = "final_answer"
	StepThinking         = "thinking"
)

// Token metrics (docs/contract.md#metrics).
const (
	MetricTokenUsage    = "gen_ai.client.token.usage"
	MetricTokens        = "agentmeter.tokens"
	MetricTokensProm    = "agentmeter_tokens_total"
	LabelTokenType      = "token_type"
	LabelCaller         = "caller"
	LabelAgent          = "agent"
	LabelModel          = "model"
	LabelProvider       = "provider"
	TokenTypeInput      = "input"
	TokenTypeOutput     = "output"
	TokenTypeCacheRead  = "cache_read"
	TokenTypeCacheCreat = "cache_creation"
	TokenTypeReasoning  = "reasoning"
)

// TokenUsageBuckets are the semconv explicit bucket boundaries of gen_ai.client.token.usage.
var TokenUsageBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}

// SpanName builds "<operation> <target>" span names: "chat gpt-4o", "execute_tool task",
// "invoke_agent lead_agent". An empty target gives the bare operation name, as semconv says.
func SpanName(operation, target string) string {
	if target == "" {
		return operation
	}
	return operation + " " + target
}
