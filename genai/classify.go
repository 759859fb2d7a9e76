package genai

import "go.opentelemetry.io/collector/pdata/pcommon"

// SpanClass is what a span is to the read path, decided once: its operation and whether
// it is a model call, a tool call or an agent's run. Each of IsModelCallSpan,
// IsToolCallSpan and AgentRunName derives the operation again (a search of the span's
// attributes); a step that asks more than one of them classifies the span instead.
type SpanClass struct {
	// Operation is SpanOperation: gen_ai.operation.name, else a GenAI operation in the
	// span name, else "" (a foreign convention's span, or not a GenAI span at all).
	Operation string
	Kind      SpanKind
}

// SpanKind is the role of a span in an agent run.
type SpanKind uint8

const (
	SpanOther     SpanKind = iota
	SpanModelCall          // IsModelCallSpan
	SpanToolCall           // IsToolCallSpan (and not a model call)
	SpanAgentRun           // AgentRunName's ok (and neither of the above)
)

// Classify applies IsModelCallSpan, IsToolCallSpan and AgentRunName's rules in that
// order, reading the operation once; a span that matches more than one is the first.
func Classify(name string, attrs pcommon.Map) SpanClass {
	return classify(SpanOperation(name, attrs), name, attrs)
}

// ClassifyRead is Classify for a reader that has already read gen_ai.operation.name in
// its own pass over the attributes (opAttr, "" when absent or empty).
func ClassifyRead(opAttr, name string, attrs pcommon.Map) SpanClass {
	op := opAttr
	if op == "" {
		op = operationFromName(name)
	}
	return classify(op, name, attrs)
}

func classify(op, name string, attrs pcommon.Map) SpanClass {
	c := SpanClass{Operation: op}
	switch {
	case op != "":
		switch {
		case IsModelCall(op):
			c.Kind = SpanModelCall
		case op == OpExecuteTool:
			c.Kind = SpanToolCall
		case op == OpInvokeAgent:
			c.Kind = SpanAgentRun
		}
	case isForeignModelCall(name, attrs):
		c.Kind = SpanModelCall
	default:
		switch foreignKind(name, attrs) {
		case kindTool:
			c.Kind = SpanToolCall
		case kindAgent:
			c.Kind = SpanAgentRun
		}
	}
	return c
}
