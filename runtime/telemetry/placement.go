package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
)

// placer puts LangSmith's placement of its run (genai.AttrLSDottedOrder) on every span
// as it starts. Spans are exported as they end, children before their parents, and
// LangSmith places a run by the start times and ids of all its ancestors, which a
// collector otherwise learns only when the root ends. With it, the collector can send
// each run to LangSmith as soon as its span arrives, so a long run's finished steps show
// while it goes on (docs/subagentmerge.md).
//
// The ids are the ones the collector's LangSmith exporter gives spans: a root's run id is
// its trace id, any other run's its span id (internal/dottedorder). A span whose parent
// is in another process (a gateway run under its caller's trace) gets none, and neither
// do its children: the ancestors' start times are not known here, and the collector
// places such runs once their trace is complete, as before. Nor does a span whose
// placement would be longer than the SDK's attribute value limit
// (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT): cut short, it would name no run.
type placer struct {
	maxLen int // the SDK's attribute value length limit; < 0: none
}

var _ sdktrace.SpanProcessor = placer{}

func newPlacer() placer { return placer{maxLen: sdktrace.NewSpanLimits().AttributeValueLengthLimit} }

func (pl placer) set(s sdktrace.ReadWriteSpan, dotted string) {
	if dotted != "" && (pl.maxLen < 0 || len(dotted) <= pl.maxLen) {
		s.SetAttributes(attribute.String(genai.AttrLSDottedOrder, dotted))
	}
}

func (pl placer) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	sc := s.SpanContext()
	start := s.StartTime().UnixMicro()
	p := trace.SpanFromContext(parent)
	psc := p.SpanContext()
	if !psc.IsValid() || psc.TraceID() != sc.TraceID() {
		pl.set(s, dottedorder.Root(start, sc.TraceID()))
		return
	}
	ro, ok := p.(sdktrace.ReadOnlySpan)
	if psc.IsRemote() || !ok {
		return
	}
	for _, kv := range ro.Attributes() {
		if kv.Key == genai.AttrLSDottedOrder {
			pl.set(s, dottedorder.Child(kv.Value.AsString(), start, sc.SpanID()))
			return
		}
	}
}

func (placer) OnEnd(sdktrace.ReadOnlySpan)      {}
func (placer) Shutdown(context.Context) error   { return nil }
func (placer) ForceFlush(context.Context) error { return nil }
