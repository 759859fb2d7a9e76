package telemetry

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
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
// is in another process (a gateway run under its caller's trace) is placed under the
// caller's run when the caller sent its placement (LangSmithTraceHeader, as LangSmith's
// SDKs do for distributed tracing; ContextWithCallerPlacement); without it, it gets none,
// and neither do its children: the ancestors' start times are not known here, and the
// collector places such runs once their trace is complete. Nor does a span whose
// placement would be longer than the SDK's attribute value limit
// (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT): cut short, it would name no run.
type placer struct {
	maxLen int // the SDK's attribute value length limit; < 0: none
}

var _ sdktrace.SpanProcessor = placer{}

// Placer returns the span processor that places spans for LangSmith, as the runtime's
// provider (Setup) does: register it on a TracerProvider built by hand.
func Placer() sdktrace.SpanProcessor {
	return placer{maxLen: sdktrace.NewSpanLimits().AttributeValueLengthLimit}
}

// set places s at dotted, in project, with the run metadata it inherits (LangSmith's
// SDKs give a child run its parent's metadata, its own keys winning).
func (pl placer) set(s sdktrace.ReadWriteSpan, dotted, project string, metadata []attribute.KeyValue) {
	if dotted == "" || (pl.maxLen >= 0 && len(dotted) > pl.maxLen) {
		return
	}
	s.SetAttributes(attribute.String(genai.AttrLSDottedOrder, dotted))
	if project != "" {
		s.SetAttributes(attribute.String(genai.AttrLSSessionName, project))
	}
	if len(metadata) == 0 {
		return
	}
	own := s.Attributes()
	for _, kv := range metadata {
		if !slices.ContainsFunc(own, func(o attribute.KeyValue) bool { return o.Key == kv.Key }) {
			s.SetAttributes(kv)
		}
	}
}

func (pl placer) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	sc := s.SpanContext()
	start := s.StartTime().UnixMicro()
	p := trace.SpanFromContext(parent)
	psc := p.SpanContext()
	caller, _ := parent.Value(callerPlacementKey{}).(callerPlacement)
	switch {
	case caller.dotted != "" && psc.Equal(caller.parent) && (!psc.IsValid() || sc.TraceID() == psc.TraceID()):
		// the caller's own span, or none at all: a run the caller started
		pl.set(s, dottedorder.Child(caller.dotted, start, sc.SpanID()), caller.project, caller.metadata)
		return
	case !psc.IsValid() || psc.TraceID() != sc.TraceID():
		pl.set(s, dottedorder.Root(start, sc.TraceID()), "", nil)
		return
	}
	ro, ok := p.(sdktrace.ReadOnlySpan)
	if psc.IsRemote() || !ok {
		return
	}
	var dotted, project string
	var metadata []attribute.KeyValue
	for _, kv := range ro.Attributes() {
		switch {
		case kv.Key == genai.AttrLSDottedOrder:
			dotted = kv.Value.AsString()
		case kv.Key == genai.AttrLSSessionName:
			project = kv.Value.AsString()
		case strings.HasPrefix(string(kv.Key), genai.AttrLSMetadataPrefix):
			metadata = append(metadata, kv)
		}
	}
	if dotted != "" {
		pl.set(s, dottedorder.Child(dotted, start, sc.SpanID()), project, metadata)
	}
}

func (placer) OnEnd(sdktrace.ReadOnlySpan)      {}
func (placer) Shutdown(context.Context) error   { return nil }
func (placer) ForceFlush(context.Context) error { return nil }

// LangSmithTraceHeader is the request header in which LangSmith's SDKs send the
// placement (dotted_order) of the run that makes a call, for distributed tracing
// (RunTree.toHeaders, tracing_context(parent=headers)). Runs started under it are placed
// in LangSmith as that run's children.
const LangSmithTraceHeader = "langsmith-trace"

// maxCallerPlacement bounds the caller placement taken: some 140 ancestors, what fits
// in the 8 KiB that proxies allow a header line. Every span of the run repeats it.
const maxCallerPlacement = 8 << 10

type callerPlacementKey struct{}

// callerPlacement is the caller's run placement with the span context it came with (the
// caller's remote span, or none) and the caller's LangSmith project, if its baggage
// named one.
type callerPlacement struct {
	dotted, project string
	metadata        []attribute.KeyValue // genai.AttrLSMetadataPrefix + key
	parent          trace.SpanContext
}

// LangSmithProjectBaggage is the baggage member in which LangSmith's SDKs send the
// caller's project with LangSmithTraceHeader: a run placed under the caller's run goes
// to that project (genai.AttrLSSessionName), as the SDKs keep a distributed trace in it.
const LangSmithProjectBaggage = "langsmith-project"

// LangSmithMetadataBaggage is the baggage member in which LangSmith's SDKs send the
// caller's run metadata, a JSON object, with LangSmithTraceHeader. The SDKs give every
// run under the caller's those keys (its own keys winning); the runtime puts them on the
// run's spans as genai.AttrLSMetadataPrefix + key, which the LangSmith exporter sends
// as metadata. A value that is not a JSON object is ignored.
const LangSmithMetadataBaggage = "langsmith-metadata"

// callerMetadata maps the caller's run metadata (LangSmithMetadataBaggage) onto span
// attributes, in key order: strings, booleans and numbers as they are, anything else as
// its JSON; null is left out.
func callerMetadata(v string) []attribute.KeyValue {
	if v == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || dec.More() {
		return nil
	}
	out := make([]attribute.KeyValue, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		key := attribute.Key(genai.AttrLSMetadataPrefix + k)
		switch x := m[k].(type) {
		case nil:
		case string:
			out = append(out, key.String(x))
		case bool:
			out = append(out, key.Bool(x))
		case json.Number:
			if i, err := x.Int64(); err == nil {
				out = append(out, key.Int64(i))
			} else if f, err := x.Float64(); err == nil {
				out = append(out, key.Float64(f))
			} else {
				out = append(out, key.String(x.String()))
			}
		default:
			b, err := json.Marshal(x)
			if err == nil {
				out = append(out, key.String(string(b)))
			}
		}
	}
	return out
}

// CallerPlacement returns v, a caller's LangSmithTraceHeader, with its run ids in lower
// case (as LangSmith writes them) if it is a well-formed dotted_order no longer than a
// header line; else "" (ignored, as an invalid traceparent is).
func CallerPlacement(v string) string {
	if len(v) > maxCallerPlacement {
		return ""
	}
	if _, _, _, ok := dottedorder.Ends(v); !ok {
		return ""
	}
	return dottedorder.Lower(v)
}

// ContextWithCallerPlacement returns ctx carrying the placement of the caller's run in
// another process (CallerPlacement), for the span context ctx holds now: the caller's
// remote span, or none. A span started under exactly that parent is placed as the
// caller's run's child, and its descendants under it, in the project ctx's baggage
// names (LangSmithProjectBaggage) and with the caller's run metadata
// (LangSmithMetadataBaggage); a span under any other is placed as before. An invalid
// placement leaves ctx as it is.
func ContextWithCallerPlacement(ctx context.Context, dotted string) context.Context {
	if dotted = CallerPlacement(dotted); dotted == "" {
		return ctx
	}
	bag := baggage.FromContext(ctx)
	return context.WithValue(ctx, callerPlacementKey{}, callerPlacement{dotted: dotted,
		project:  bag.Member(LangSmithProjectBaggage).Value(),
		metadata: callerMetadata(bag.Member(LangSmithMetadataBaggage).Value()),
		parent:   trace.SpanContextFromContext(ctx)})
}
