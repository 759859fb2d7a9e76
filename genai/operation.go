package genai

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Model-call operation names besides OpChat that GenAI semconv defines for spans that
// carry gen_ai.usage.* (other instrumentations emit them; our runtime emits "chat").
const (
	OpGenerateContent = "generate_content"
	OpTextCompletion  = "text_completion"
)

// SpanOperation returns a span's gen_ai.operation.name, or, when an emitter left the
// attribute out, the operation taken from a semconv span name ("chat gpt-4o" → "chat").
// Only GenAI operation names are recognised from the span name; anything else yields "".
func SpanOperation(spanName string, attrs pcommon.Map) string {
	if v, ok := attrs.Get(AttrOperationName); ok {
		if op := v.AsString(); op != "" {
			return op
		}
	}
	return operationFromName(spanName)
}

// operationFromName is the GenAI operation a semconv span name starts with, or "".
func operationFromName(spanName string) string {
	head, _, _ := strings.Cut(spanName, " ")
	switch head {
	case OpChat, OpExecuteTool, OpInvokeAgent, OpGenerateContent, OpTextCompletion:
		return head
	}
	return ""
}

// IsModelCall reports whether op names a model call, the only kind of span whose own
// gen_ai.usage.* counts (docs/contract.md#usage).
func IsModelCall(op string) bool {
	return op == OpChat || op == OpGenerateContent || op == OpTextCompletion
}
