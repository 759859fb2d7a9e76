package telemetry

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
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

// placementProvider is the runtime's provider (Setup) exporting into memory, restored
// and shut down when the test ends.
func placementProvider(t *testing.T) (*Provider, *tracetest.InMemoryExporter) {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	p, err := Setup(context.Background(), Options{Enabled: true, Exporter: mem})
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p, mem
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
	p, mem := placementProvider(t)
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
	p, mem := placementProvider(t)
	tr := p.TracerProvider().Tracer("t")
	localChain(tr)
	require.NoError(t, p.ForceFlush(context.Background()))
	got := placements(mem.GetSpans())
	_, ok := dottedorder.Parse(got["root"])
	assert.True(t, ok, got["root"])
	assert.Empty(t, got["agent"])
	assert.Empty(t, got["chat"])
}

// A run whose caller sent its LangSmith placement (langsmith-trace, as LangSmith's SDKs
// send it) is placed under the caller's run: under the caller's remote span, or with no
// parent at all (a caller that propagates no W3C context). Its descendants chain under
// it. An invalid placement is ignored, and a new root under the caller's span is its own.
func TestSpansUnderACallersPlacement(t *testing.T) {
	p, mem := placementProvider(t)
	tr := p.TracerProvider().Tracer("t")

	caller := "20261202T120000000001Z2f6a1c7e-0b6e-4d8e-9a51-3c1f0e7d2b90.20261202T120001000002Z7d9e4c0a-5b1f-4e2a-8c3d-6f0a1b2c3d4e"
	remote := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{7}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled, Remote: true}))
	under := func(ctx context.Context, name string, opts ...trace.SpanStartOption) {
		rctx, run := tr.Start(ctx, name, opts...)
		_, chat := tr.Start(rctx, name+"-chat")
		chat.End()
		run.End()
	}
	under(ContextWithCallerPlacement(remote, caller), "remote")
	under(ContextWithCallerPlacement(context.Background(), caller), "parentless")
	under(ContextWithCallerPlacement(remote, caller[:len(caller)-1]), "invalid")
	under(ContextWithCallerPlacement(remote, caller), "newroot", trace.WithNewRoot())
	// a remote span other than the one the caller's placement came with
	under(trace.ContextWithRemoteSpanContext(ContextWithCallerPlacement(remote, caller), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{8}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled, Remote: true})), "otherremote")
	require.NoError(t, p.ForceFlush(context.Background()))

	got := placements(mem.GetSpans())
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range mem.GetSpans().Snapshots() {
		byName[s.Name()] = s
	}
	for _, name := range []string{"remote", "parentless"} {
		run, chat := byName[name], byName[name+"-chat"]
		assert.Equal(t, dottedorder.Child(caller, run.StartTime().UnixMicro(), run.SpanContext().SpanID()), got[name], name)
		assert.Equal(t, dottedorder.Child(got[name], chat.StartTime().UnixMicro(), chat.SpanContext().SpanID()), got[name+"-chat"], name)
		segs, ok := dottedorder.Parse(got[name+"-chat"])
		require.True(t, ok)
		assert.Len(t, segs, 4, name)
	}
	assert.Empty(t, got["invalid"], "an invalid caller placement is ignored: the run waits for its trace, as before")
	assert.Empty(t, got["invalid-chat"])
	assert.Equal(t, dottedorder.Root(byName["newroot"].StartTime().UnixMicro(), byName["newroot"].SpanContext().TraceID()), got["newroot"])
	assert.Empty(t, got["otherremote"], "placed under the caller only below the span its placement came with")
	assert.Empty(t, got["otherremote-chat"])
	assert.Equal(t, caller, CallerPlacement(strings.ToUpper(caller[:20])+caller[20:len(caller)-36]+strings.ToUpper(caller[len(caller)-36:])),
		"run ids in lower case, as LangSmith writes them")

	assert.Equal(t, caller, CallerPlacement(caller))
	assert.Empty(t, CallerPlacement("not-a-placement"))
	assert.Empty(t, CallerPlacement(strings.Repeat(caller[:dottedorder.SegmentLen]+".", 200)+caller[:dottedorder.SegmentLen]), "longer than a header line")
}

// A caller that names its LangSmith project in its baggage (langsmith-project, as
// LangSmith's SDKs send it) gets the run in that project: the run placed under the
// caller's run and every span below it carry it (langsmith.trace.session_name). A run
// not placed under a caller names none.
func TestRunUnderACallerGoesToTheCallersProject(t *testing.T) {
	p, mem := placementProvider(t)
	tr := p.TracerProvider().Tracer("t")
	const caller = "20261202T120000000001Z2f6a1c7e-0b6e-4d8e-9a51-3c1f0e7d2b90"
	member, err := baggage.NewMemberRaw(LangSmithProjectBaggage, "caller project")
	require.NoError(t, err)
	bag, err := baggage.New(member)
	require.NoError(t, err)
	ctx := ContextWithCallerPlacement(baggage.ContextWithBaggage(context.Background(), bag), caller)
	rctx, run := tr.Start(ctx, "run")
	cctx, agent := tr.Start(rctx, "run-agent")
	_, chat := tr.Start(cctx, "run-chat")
	chat.End()
	agent.End()
	run.End()
	localChain(tr)
	require.NoError(t, p.ForceFlush(context.Background()))

	project := map[string]string{}
	for _, s := range mem.GetSpans() {
		project[s.Name] = ""
		for _, kv := range s.Attributes {
			if kv.Key == genai.AttrLSSessionName {
				project[s.Name] = kv.Value.AsString()
			}
		}
	}
	for _, name := range []string{"run", "run-agent", "run-chat"} {
		assert.Equal(t, "caller project", project[name], name)
	}
	assert.Empty(t, project["root"], "a run of its own goes to the exporter's project")
}

// The caller's run metadata (its SDK's langsmith-metadata baggage) is on every span
// placed under the caller, as langsmith.metadata.<key>, a span's own keys winning, as
// LangSmith's SDKs give a child run its parent's metadata. A run of its own gets none,
// and metadata that is not a JSON object is ignored.
func TestRunUnderACallerGetsTheCallersMetadata(t *testing.T) {
	const caller = "20261202T120000000001Z2f6a1c7e-0b6e-4d8e-9a51-3c1f0e7d2b90"
	withMetadata := func(v string) context.Context {
		member, err := baggage.NewMemberRaw(LangSmithMetadataBaggage, v)
		require.NoError(t, err)
		bag, err := baggage.New(member)
		require.NoError(t, err)
		return ContextWithCallerPlacement(baggage.ContextWithBaggage(context.Background(), bag), caller)
	}
	metadataOf := func(s tracetest.SpanStub) map[string]any {
		md := map[string]any{}
		for _, kv := range s.Attributes {
			if k, ok := strings.CutPrefix(string(kv.Key), genai.AttrLSMetadataPrefix); ok {
				md[k] = kv.Value.AsInterface()
			}
		}
		return md
	}

	p, mem := placementProvider(t)
	tr := p.TracerProvider().Tracer("t")
	ctx := withMetadata(`{"customer":"acme","tier":2,"ratio":0.5,"beta":true,"labels":["a","b"],"gone":null}`)
	rctx, run := tr.Start(ctx, "run")
	cctx, agent := tr.Start(rctx, "run-agent")
	_, chat := tr.Start(cctx, "run-chat", trace.WithAttributes(attribute.String(genai.AttrLSMetadataPrefix+"customer", "own")))
	chat.End()
	agent.End()
	run.End()
	localChain(tr)
	_, bad := tr.Start(withMetadata(`["not", "an", "object"]`), "bad")
	bad.End()
	require.NoError(t, p.ForceFlush(context.Background()))

	want := map[string]any{"customer": "acme", "tier": int64(2), "ratio": 0.5, "beta": true, "labels": `["a","b"]`}
	got := map[string]map[string]any{}
	for _, s := range mem.GetSpans() {
		got[s.Name] = metadataOf(s)
	}
	assert.Equal(t, want, got["run"])
	assert.Equal(t, want, got["run-agent"], "inherited from its parent")
	wantChat := map[string]any{"customer": "own", "tier": int64(2), "ratio": 0.5, "beta": true, "labels": `["a","b"]`}
	assert.Equal(t, wantChat, got["run-chat"], "its own key wins")
	for _, name := range []string{"root", "agent", "chat", "bad"} {
		assert.Empty(t, got[name], name)
	}
}
