package genai

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// IsToolCallSpan reports whether a span is one tool execution: an execute_tool span, or,
// when gen_ai.operation.name is absent, a span a foreign convention marks as a tool call
// (the AI SDK's ai.toolCall, OpenInference TOOL, OpenLLMetry traceloop.span.kind=tool).
// Like IsModelCallSpan it recognises foreign spans directly, so readers agree on spans
// that did not pass through genainormalize.
func IsToolCallSpan(name string, attrs pcommon.Map) bool {
	if op := SpanOperation(name, attrs); op != "" {
		return op == OpExecuteTool
	}
	return foreignKind(name, attrs) == kindTool
}

// AgentRunName reports whether a span is an agent's run and names the agent: an
// invoke_agent span (gen_ai.agent.name, else the span name's target), or, when
// gen_ai.operation.name is absent, an OpenInference AGENT span (agent.name), an
// OpenLLMetry agent span (traceloop.entity.name) or the AI SDK's outer
// ai.generateText/ai.streamText/ai.generateObject/ai.streamObject span (its
// ai.telemetry.functionId; the SDK's own OpenTelemetry integration names that span
// invoke_agent), else the span name.
func AgentRunName(name string, attrs pcommon.Map) (string, bool) {
	op := SpanOperation(name, attrs)
	if op == "" && foreignKind(name, attrs) != kindAgent {
		return "", false
	}
	return agentRunName(op, name, attrs)
}

// AgentRunNameOf is AgentRunName for a span already classified (Classify): nothing is
// derived again. A class whose Kind is not SpanAgentRun is not an agent's run.
func AgentRunNameOf(c SpanClass, name string, attrs pcommon.Map) (string, bool) {
	if c.Kind != SpanAgentRun {
		return "", false
	}
	return agentRunName(c.Operation, name, attrs)
}

// agentRunName names the agent of a span whose operation is op: an invoke_agent span, or,
// with no operation, a span a foreign convention already marked as an agent's run.
func agentRunName(op, name string, attrs pcommon.Map) (string, bool) {
	if op != "" {
		if op != OpInvokeAgent {
			return "", false
		}
		if n := StringAttr(attrs, AttrAgentName); n != "" {
			return n, true
		}
		_, target, _ := strings.Cut(name, " ")
		return target, true
	}
	if n := FirstStringAttr(attrs, AttrAgentName, AttrOIAgentName, AttrTraceloopEntityName, AttrAIFunctionID); n != "" {
		return n, true
	}
	return name, true
}

type spanKind uint8

const (
	kindOther spanKind = iota
	kindTool
	kindAgent
)

// foreignKind reads the tool/agent marks of the foreign conventions.
func foreignKind(name string, attrs pcommon.Map) spanKind {
	if v, ok := attrs.Get(AttrOpenInferenceSpanKind); ok {
		switch strings.ToUpper(v.AsString()) {
		case OpenInferenceKindTool:
			return kindTool
		case OpenInferenceKindAgent:
			return kindAgent
		}
		return kindOther
	}
	if v, ok := attrs.Get(AttrTraceloopSpanKind); ok {
		switch v.AsString() {
		case TraceloopKindTool:
			return kindTool
		case TraceloopKindAgent:
			return kindAgent
		}
		return kindOther
	}
	id := name
	if v, ok := attrs.Get(AttrAIOperationID); ok {
		id = v.AsString()
	}
	switch id {
	case AIOperationToolCall:
		return kindTool
	case "ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject":
		return kindAgent
	}
	return kindOther
}

// StringAttr is the attribute key of m as a string; "" when it is absent.
func StringAttr(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}

// FirstStringAttr is the first of keys that m holds as a non-empty string; "" when none.
func FirstStringAttr(m pcommon.Map, keys ...string) string {
	for _, k := range keys {
		if s := StringAttr(m, k); s != "" {
			return s
		}
	}
	return ""
}
