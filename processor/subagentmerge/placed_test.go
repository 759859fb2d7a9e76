package subagentmerge

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder/dottedordertest"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

func placedTestConfig() *Config { c := defaultTestConfig(); c.StreamPlaced = true; return c }

// ofTrace keeps the spans of trace id in tds.
func ofTrace(tds []ptrace.Traces, id pcommon.TraceID) []ptrace.Traces {
	var out []ptrace.Traces
	for _, td := range tds {
		c := clone(td)
		c.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				ss.Spans().RemoveIf(func(sp ptrace.Span) bool { return sp.TraceID() != id })
				return ss.Spans().Len() == 0
			})
			return rs.ScopeSpans().Len() == 0
		})
		out = append(out, c)
	}
	return out
}

func traceIDOf(td ptrace.Traces) pcommon.TraceID {
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
}

// With stream_placed, a hold-mode processor streams the traces whose spans carry their
// placement: each span goes on in the call that brought it, children before their
// parents, and the dispatchers' last versions are exact. A trace without placement in
// the same batches is held until it is complete, as before.
func TestStreamPlacedTracesGoOnAtOnceOthersAreHeld(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 21))
		placedIn, want := randomAgentTraceWithWant(r, seed, seed%2 == 0)
		dottedordertest.Place(placedIn)
		heldIn, _ := randomAgentTraceWithWant(r, 1000+seed, true)
		placedID, heldID := traceIDOf(placedIn), traceIDOf(heldIn)
		p, sink, _ := newTestProcessor(t, placedTestConfig())

		// spans as they end, one request each; the held trace's spans ride along in the
		// same requests, its root last
		held := realTime(heldIn)
		sent := 0
		for i, b := range realTime(placedIn) {
			if i < len(held)-1 {
				held[i].ResourceSpans().MoveAndAppendTo(b.ResourceSpans())
			}
			sent++
			require.NoError(t, p.ConsumeTraces(context.Background(), b))
			require.Equal(t, sent, firstEmissions(ofTrace(sink.AllTraces(), placedID)), "seed %d: a placed span goes on at once", seed)
			require.Zero(t, firstEmissions(ofTrace(sink.AllTraces(), heldID)), "seed %d: the other trace is held", seed)
		}
		for _, b := range held[min(len(held)-1, sent):] {
			require.NoError(t, p.ConsumeTraces(context.Background(), b))
		}
		require.Equal(t, heldIn.SpanCount(), firstEmissions(ofTrace(sink.AllTraces(), heldID)), "seed %d: released once complete", seed)
		require.NoError(t, p.Shutdown(context.Background()))
		assertExactAtSink(t, ofTrace(sink.AllTraces(), placedID), want, "placed")
	}
}

// A trace the hold engine already holds stays there when a span of it that carries its
// placement comes: a trace is merged by one engine, whole.
func TestStreamPlacedHeldTraceStaysHeld(t *testing.T) {
	in := buildParallel()
	p, sink, _ := newTestProcessor(t, placedTestConfig())
	spans := realTime(dottedordertest.Place(clone(in)))
	// the first span to end comes without its placement: the trace is held
	spans[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().Remove(genai.AttrLSDottedOrder)
	require.NoError(t, p.ConsumeTraces(context.Background(), spans[0]))
	for _, b := range spans[1:] {
		require.NoError(t, p.ConsumeTraces(context.Background(), b))
		if sink.SpanCount() > 0 {
			break
		}
	}
	require.Equal(t, in.SpanCount(), sink.SpanCount(), "released whole with its root, not streamed")
	require.NoError(t, p.Shutdown(context.Background()))
}

// A mixed batch is split by trace: each part keeps its resource and scope.
func TestStreamPlacedSplitKeepsResourceAndScope(t *testing.T) {
	a, b := dottedordertest.Place(randomAgentTrace(rand.New(rand.NewPCG(1, 1)), 1)), randomAgentTrace(rand.New(rand.NewPCG(2, 2)), 2)
	a.ResourceSpans().At(0).Resource().Attributes().PutStr("service.name", "lead")
	a.ResourceSpans().At(0).ScopeSpans().At(0).Scope().SetName("scope-a")
	batch, nb := clone(a), b.SpanCount()
	// the held trace under the same resource and scope as the placed one
	b.ResourceSpans().At(0).ScopeSpans().At(0).Spans().MoveAndAppendTo(batch.ResourceSpans().At(0).ScopeSpans().At(0).Spans())
	placed := splitOff(batch, map[pcommon.TraceID]bool{traceIDOf(a): true})
	assert.Equal(t, a.SpanCount(), placed.SpanCount())
	assert.Equal(t, nb, batch.SpanCount())
	for _, td := range []ptrace.Traces{placed, batch} {
		require.Equal(t, 1, td.ResourceSpans().Len())
		rs := td.ResourceSpans().At(0)
		name, _ := rs.Resource().Attributes().Get("service.name")
		assert.Equal(t, "lead", name.Str())
		assert.Equal(t, "scope-a", rs.ScopeSpans().At(0).Scope().Name())
	}
	for sp := range spaniter.All(placed) {
		assert.Equal(t, traceIDOf(a), sp.TraceID())
	}
}

// With storage, the placed traces' ledgers are a store of their own: a restart after
// kill -9 picks up both the held buffer and the ledgers, and neither engine reads the
// other's.
func TestStreamPlacedRestartKeepsBothEngines(t *testing.T) {
	st := storagetest.New()
	r := rand.New(rand.NewPCG(7, 7))
	placedIn, want := randomAgentTraceWithWant(r, 7, true)
	dottedordertest.Place(placedIn)
	heldIn := buildParallel()
	placedSpans := realTime(placedIn)
	half := len(placedSpans) / 2

	p1, _ := startWithStorage(t, st, placedTestConfig())
	for _, b := range placedSpans[:half] {
		require.NoError(t, p1.ConsumeTraces(context.Background(), b))
	}
	require.NoError(t, p1.ConsumeTraces(context.Background(), withoutRoot(heldIn)))
	kill(p1.placed)
	kill(p1)

	p2, sink2 := startWithStorage(t, st, placedTestConfig())
	assert.Equal(t, int64(heldIn.SpanCount()-1), p2.nSpans.Load(), "the held spans are held again")
	assert.Equal(t, int64(1), p2.placed.nLedgers.Load(), "the placed trace's ledger is back")
	for _, b := range placedSpans[half:] {
		require.NoError(t, p2.ConsumeTraces(context.Background(), b))
	}
	require.NoError(t, p2.ConsumeTraces(context.Background(), only(heldIn, isLocalRoot)))
	require.NoError(t, p2.Shutdown(context.Background()))
	assert.Equal(t, heldIn.SpanCount(), firstEmissions(ofTrace(sink2.AllTraces(), traceIDOf(heldIn))))
	// the first half went on before the crash; what the restart re-emits is exact
	last, _ := upserted(ofTrace(sink2.AllTraces(), traceIDOf(placedIn)))
	for id, w := range want {
		if sp, ok := last[id]; ok {
			u, _ := genai.SubagentUsageFromMap(sp.Attributes())
			assert.Equal(t, w, u, "dispatcher %s", id)
		}
	}
	assert.NotEmpty(t, last)
}

func TestStreamPlacedIsForHoldModeOnly(t *testing.T) {
	c := streamTestConfig()
	c.StreamPlaced = true
	assert.ErrorContains(t, c.Validate(), "stream_placed applies to mode \"hold\" only")
}
