package telemetry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
)

func placements(spans tracetest.SpanStubs) map[string]string {
	out := map[string]string{}
	for _, s := range spans {
		out[s.Name] = ""
		for _, kv := range s.Attributes {
			if kv.Key == genai.AttrLSDottedOrder {
				out[s.Name] = kv.Value.AsString()
			}
		}
	}
	return out
}

// localChain starts and ends root > agent > chat, children first, as a run does.
func localChain(tr trace.Tracer) {
	ctx, root := tr.Start(context.Background(), "root")
	cctx, agent := tr.Start(ctx, "agent")
	_, chat := tr.Start(cctx, "chat")
	chat.End()
	agent.End()
	root.End()
}

// Every span of a local chain carries its LangSmith placement from its start: the
// chain of its ancestors' start times and run ids, with the ids the collector's
// LangSmith exporter derives (the root's is the trace id).
func TestSpansCarryTheirPlacementFromTheStart(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	p, err := Setup(context.Background(), Options{Enabled: true, Exporter: mem})
	require.NoError(t, err)
	tr := p.TracerProvider().Tracer("t")

	localChain(tr)

	// a span under a parent from another process (a gateway run under its caller's
	// trace), and its child: their ancestors' start times are not known here
	remote := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{7}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled, Remote: true}))
	rctx, run := tr.Start(remote, "remote-run")
	_, rchat := tr.Start(rctx, "remote-chat")
	rchat.End()
	run.End()
	require.NoError(t, p.ForceFlush(context.Background()))
	defer p.Shutdown(context.Background())

	got := placements(mem.GetSpans())
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range mem.GetSpans().Snapshots() {
		byName[s.Name()] = s
	}
	segs, ok := dottedorder.Parse(got["chat"])
	require.True(t, ok, got["chat"])
	require.Len(t, segs, 3)
	assert.Equal(t, dottedorder.TraceUUID(byName["root"].SpanContext().TraceID()), segs[0].RunID)
	assert.Equal(t, dottedorder.SpanUUID(byName["agent"].SpanContext().SpanID()), segs[1].RunID)
	assert.Equal(t, dottedorder.SpanUUID(byName["chat"].SpanContext().SpanID()), segs[2].RunID)
	assert.Equal(t, byName["root"].StartTime().UnixMicro(), segs[0].Micros)
	assert.Equal(t, byName["chat"].StartTime().UnixMicro(), segs[2].Micros)
	assert.Equal(t, got["root"]+"."+got["agent"][len(got["root"])+1:], got["agent"])
	assert.Equal(t, got["agent"], got["chat"][:len(got["agent"])])
	assert.Empty(t, got["remote-run"])
	assert.Empty(t, got["remote-chat"])
}

// A placement the SDK would cut to its attribute value limit is not set: cut, it would
// name no run. The span and its descendants are then placed by the collector once their
// trace is complete.
func TestPlacementLongerThanTheAttributeLimitIsNotSet(t *testing.T) {
	t.Setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "100") // room for one segment (58), not two (117)
	mem := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	p, err := Setup(context.Background(), Options{Enabled: true, Exporter: mem})
	require.NoError(t, err)
	defer p.Shutdown(context.Background())
	tr := p.TracerProvider().Tracer("t")
	localChain(tr)
	require.NoError(t, p.ForceFlush(context.Background()))
	got := placements(mem.GetSpans())
	_, ok := dottedorder.Parse(got["root"])
	assert.True(t, ok, got["root"])
	assert.Empty(t, got["agent"])
	assert.Empty(t, got["chat"])
}
