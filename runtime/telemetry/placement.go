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
// each run to LangSmith as soon as its span arrives, so a long run shows while it goes
// on (docs/subagentmerge.md).
//
// The ids are the ones the collector's LangSmith exporter gives spans: a root's run id is
// its trace id, any other run's its span id (internal/dottedorder). A span whose parent
// is in another process (a gateway run under its caller's trace) gets none, and neither
// do its children: the ancestors' start times are not known here, and the collector
// places such runs once their trace is complete, as before.
type placer struct{}

var _ sdktrace.SpanProcessor = placer{}

func (placer) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	sc := s.SpanContext()
	start := s.StartTime().UnixMicro()
	p := trace.SpanFromContext(parent)
	psc := p.SpanContext()
	if !psc.IsValid() || psc.TraceID() != sc.TraceID() {
		s.SetAttributes(attribute.String(genai.AttrLSDottedOrder,
			string(dottedorder.AppendSegment(nil, start, dottedorder.TraceUUID(sc.TraceID())))))
		return
	}
	ro, ok := p.(sdktrace.ReadOnlySpan)
	if psc.IsRemote() || !ok {
		return
	}
	for _, kv := range ro.Attributes() {
		if kv.Key == genai.AttrLSDottedOrder {
			if d := dottedorder.Child(kv.Value.AsString(), start, dottedorder.SpanUUID(sc.SpanID())); d != "" {
				s.SetAttributes(attribute.String(genai.AttrLSDottedOrder, d))
			}
			return
		}
	}
}

func (placer) OnEnd(sdktrace.ReadOnlySpan)      {}
func (placer) Shutdown(context.Context) error   { return nil }
func (placer) ForceFlush(context.Context) error { return nil }
