package genainormalize

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// FuzzNormalize feeds arbitrary text to every attribute the normalisation parses (JSON
// details, tool calls, metadata, recorded tool io, counts) on model-call, tool and agent
// spans: it must never panic, and a count of arbitrary text is written, if at all, as an
// integer.
func FuzzNormalize(f *testing.F) {
	f.Add(`{"cache_read":5}`, `[{"toolCallId":"c"}]`, `{"args":[],"kwargs":{"id":"c","type":"function","function":{}}}`, "12")
	f.Add(`{`, `[`, `null`, "-3")
	f.Add(`{"cache_read":"x","reasoning":-1}`, `[{"toolCallId":5}]`, `[[[[[]]]]]`, "1e99")
	n := normalizer{convs: createDefaultConfig().mask()}
	f.Fuzz(func(t *testing.T, details, toolCalls, io, count string) {
		for _, shape := range spanShapes {
			fx := newFixture(1, "svc", "", "")
			kv := append([]any{}, shape.kv...)
			kv = append(kv, "gen_ai.usage.input_token_details", details, "gen_ai.usage.output_token_details", details,
				"ai.response.toolCalls", toolCalls, "metadata", details,
				"traceloop.entity.input", io, "traceloop.entity.output", io, "input.value", io, "output.value", io)
			fx.span(root, shape.name, client, kv...)
			n.traces(fx.td)
			// and the same span with a count of arbitrary text
			fx2 := newFixture(2, "svc", "", "")
			fx2.span(root, shape.name, client, append(append([]any{}, shape.kv...), "llm.token_count.prompt", count)...)
			n.traces(fx2.td)
			attrs := fx2.spans.At(0).Attributes()
			if v, ok := attrs.Get("gen_ai.usage.input_tokens"); ok && v.Type() != pcommon.ValueTypeInt {
				t.Fatalf("input written as %s", v.Type())
			}
		}
		for _, kind := range []string{"TOOL", "AGENT"} {
			fx := newFixture(3, "svc", "", "")
			fx.span(root, "x", internal, "openinference.span.kind", kind, "input.value", io, "output.value", io)
			n.traces(fx.td)
		}
	})
}
