package genai

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Foreign conventions that mark a span as one model call when gen_ai.operation.name is
// absent. The normalisation step maps them onto the contract; this rule also recognises
// them directly so every reader (merge, token metrics, cost) agrees even on spans that
// did not pass through it.
const (
	// OpenInference: openinference.span.kind = "LLM" is one model call; AGENT, CHAIN,
	// TOOL and the rest are not.
	AttrOpenInferenceSpanKind = "openinference.span.kind"
	OpenInferenceKindLLM      = "LLM"
	// OpenLLMetry (Traceloop) before it emitted gen_ai.operation.name.
	AttrLLMRequestType = "llm.request.type"
	// Vercel AI SDK legacy telemetry: the provider call is the ai.*.doGenerate /
	// ai.*.doStream span; its parent ai.generateText / ai.streamText repeats the usage
	// summed over steps and must not count.
	AttrAIOperationID = "ai.operationId"
)

// IsModelCallSpan is the one rule for which spans' own gen_ai.usage.* counts: model-call
// spans only. Agent, step, workflow and chain spans may carry usage sums (GenAI semconv
// allows them on invoke_agent; LangSmith parents and Langfuse parents aggregate their
// children; the AI SDK repeats step sums on its outer span); those are kept as sent and
// never counted again. The merge, the token metrics and the cost step all call this.
func IsModelCallSpan(name string, attrs pcommon.Map) bool {
	if op := SpanOperation(name, attrs); op != "" {
		return IsModelCall(op)
	}
	return isForeignModelCall(name, attrs)
}

// isForeignModelCall is IsModelCallSpan for a span without a GenAI operation.
func isForeignModelCall(name string, attrs pcommon.Map) bool {
	if v, ok := attrs.Get(AttrOpenInferenceSpanKind); ok {
		return strings.EqualFold(v.AsString(), OpenInferenceKindLLM)
	}
	if v, ok := attrs.Get(AttrAIOperationID); ok {
		return isAISDKProviderCall(v.AsString())
	}
	if isAISDKProviderCall(name) {
		return true
	}
	if v, ok := attrs.Get(AttrLLMRequestType); ok {
		switch v.AsString() {
		case "chat", "completion":
			return true
		}
	}
	return false
}

// isAISDKProviderCall matches the AI SDK's provider-call span names and operation ids:
// "ai.generateText.doGenerate", "ai.streamText.doStream", "ai.generateObject.doGenerate",
// "ai.streamObject.doStream".
func isAISDKProviderCall(s string) bool {
	return strings.HasPrefix(s, "ai.") && (strings.HasSuffix(s, ".doGenerate") || strings.HasSuffix(s, ".doStream"))
}
