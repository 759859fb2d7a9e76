package runtree

import (
	"maps"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
)

// Metadata keys the exporter derives. Span attributes of the same name are not copied,
// so every key appears once.
const (
	keyOTelTraceID      = "otel.trace_id"
	keyOTelSpanID       = "otel.span_id"
	keyOTelParentSpanID = "otel.parent_span_id"
	keyOrphan           = "orphan"
	keyThreadID         = "thread_id"
	keySessionID        = "session_id"
	keyUserID           = "user_id"
	keyCaller           = "caller"
	keyCallerBucket     = "caller_bucket"
	keySubagentUsage    = "subagent_usage"
	keyLSProvider       = "ls_provider"
	keyLSModelName      = "ls_model_name"
	// never written: LangSmith reads extra.metadata.usage_metadata as usage
	keyUsageMetadata = "usage_metadata"
)

var derivedKeys = map[string]bool{
	keyOTelTraceID: true, keyOTelSpanID: true, keyOTelParentSpanID: true, keyOrphan: true,
	keyThreadID: true, keySessionID: true, keyUserID: true, keyCaller: true, keyCallerBucket: true,
	keySubagentUsage: true, keyLSProvider: true, keyLSModelName: true, keyUsageMetadata: true,
	genai.AttrServiceName: true,
}

// copiedAttr reports whether a span attribute is written into metadata as it is.
func copiedAttr(k string) bool { return !uncopiedAttrs[k] }

// uncopiedAttrs are movedAttrs and derivedKeys in one set: every attribute of every run
// is looked up in it.
var uncopiedAttrs = func() map[string]bool {
	m := maps.Clone(movedAttrs)
	maps.Copy(m, derivedKeys)
	return m
}()

// metadataKey maps a langsmith.metadata.<key> attribute (LangSmith's OTel convention for
// a run's metadata, which its SDKs in OTel mode write) onto metadata key <key>, as
// LangSmith's OTel ingestion does. ok is false when k has no such prefix (key is "") or
// when <key> is written anyway, by the exporter or as an attribute of that name (key is
// <key>): the attribute is then left out, so no key appears twice.
func metadataKey(k string, attrs pcommon.Map) (key string, ok bool) {
	key, found := strings.CutPrefix(k, genai.AttrLSMetadataPrefix)
	if !found || key == "" {
		return "", false
	}
	if derivedKeys[key] {
		return key, false
	}
	if _, plain := attrs.Get(key); plain {
		return key, false
	}
	return key, true
}

// movedAttrs are not copied into metadata verbatim: usage goes to usage_metadata /
// subagent_usage, content to inputs/outputs, and the rest under LangSmith's key names.
var movedAttrs = map[string]bool{
	genai.AttrUsageInput: true, genai.AttrUsageOutput: true, genai.AttrUsageCacheRead: true,
	genai.AttrUsageCacheCreat: true, genai.AttrUsageCacheWrite: true, genai.AttrUsageReasoning: true,
	genai.AttrSubagentInput: true, genai.AttrSubagentOutput: true, genai.AttrSubagentTotal: true,
	genai.AttrSubagentCacheRead: true, genai.AttrSubagentCacheCreat: true, genai.AttrSubagentReasoning: true,
	genai.AttrSubagentDispatches: true, genai.AttrSubagentToolCallIDs: true,
	genai.AttrInputMessages: true, genai.AttrOutputMessages: true, genai.AttrSystemInstr: true,
	// the run's own dotted_order and project
	genai.AttrLSDottedOrder: true, genai.AttrLSSessionName: true,
	// written under LangSmith's names instead (thread_id/session_id, user_id, caller)
	genai.AttrConversationID: true, genai.AttrEndUserID: true, genai.AttrCaller: true,
}

// RunType maps a span to a LangSmith run type by gen_ai.operation.name (falling back to
// the span name's first word): model calls are llm, tool calls tool, everything else
// (invoke_agent included) chain.
func RunType(operation string) string {
	switch operation {
	case genai.OpChat, otherSemconvLLMOpText, otherSemconvLLMOpGen:
		return TypeLLM
	case genai.OpExecuteTool:
		return TypeTool
	case otherSemconvEmbedOp:
		return TypeEmbedding
	}
	return TypeChain
}
