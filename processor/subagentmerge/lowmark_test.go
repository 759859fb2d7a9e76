package subagentmerge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// The low mark (what a restart reads from) never passes a chunk that holds acknowledged
// spans: not while a released trace is on its way to its lane, and not when a trace
// holds its chunks in another order than they were numbered.

// pauseKey in a request's context stops it where it counts released traces (the
// processor's telemetry), between a trace's release and its push to its lane.
type pauseKey struct{}

type pause struct{ reached, release chan struct{} }

func newPause() *pause { return &pause{make(chan struct{}), make(chan struct{})} }

type pauseCounter struct{ metric.Int64Counter }

func (c pauseCounter) Add(ctx context.Context, n int64, o ...metric.AddOption) {
	if ps, ok := ctx.Value(pauseKey{}).(*pause); ok {
		close(ps.reached)
		<-ps.release
	}
	c.Int64Counter.Add(ctx, n, o...)
}

func hookReleased(p *subagentMerge) {
	p.tel.tb.ProcessorSubagentmergeTracesReleased = pauseCounter{p.tel.tb.ProcessorSubagentmergeTracesReleased}
}

// A trace released by a request that is not yet through (its spans not yet in its lane)
// keeps its chunks live: a restart after the sweeper moved the low mark meanwhile still
// sends every acknowledged span.
func TestLowMarkDoesNotPassAReleaseOnItsWay(t *testing.T) {
	st := storagetest.New()
	p := startWithStorageTo(t, st, queuedTestConfig(), consumertest.NewErr(errors.New("vendor down")))
	hookReleased(p)
	full := buildOneTask()
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(full))) // chunk 0

	ps := newPause()
	done := make(chan error, 1)
	go func() { done <- p.ConsumeTraces(context.WithValue(context.Background(), pauseKey{}, ps), rootOf(full)) }()
	<-ps.reached
	// what the sweeper does each second (processor.go sweepLoop)
	require.NoError(t, p.store.advanceLow(context.Background()))
	close(ps.release)
	require.NoError(t, <-done)
	kill(p)

	p2, sink2 := startWithStorage(t, st, queuedTestConfig())
	require.NoError(t, p2.Shutdown(context.Background()))
	assert.Equal(t, full.SpanCount(), sink2.SpanCount())
}

// Two requests number their chunks in one order and reach a trace in the other: the
// trace's first chunk is not its lowest, and the low mark must not pass the lowest.
func TestLowMarkDoesNotPassAChunkDrawnFirstAndHeldLast(t *testing.T) {
	// traces in three different shards
	var picked []ptrace.Traces
	seen := map[int]bool{}
	for n := uint64(10); len(picked) < 3; n++ {
		td := oneTaskN(n)
		if s := shardIndex(traceIDOf(td)); !seen[s] {
			seen[s] = true
			picked = append(picked, td)
		}
	}
	c, d, a := picked[0], picked[1], picked[2]
	aRest := withoutRoot(a)
	var aIDs []pcommon.SpanID
	for sp := range spaniter.All(aRest) {
		aIDs = append(aIDs, sp.SpanID())
	}
	a1 := only(aRest, func(sp ptrace.Span) bool { return sp.SpanID() == aIDs[0] || sp.SpanID() == aIDs[1] })
	a2 := only(aRest, func(sp ptrace.Span) bool { return sp.SpanID() != aIDs[0] && sp.SpanID() != aIDs[1] })

	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	p := startWithStorageTo(t, st, queuedTestConfig(), sink)

	sd := &p.shards[shardIndex(traceIDOf(d))]
	sd.mu.Lock() // R1 stops at D, after drawing its chunk number at C
	done := make(chan error, 1)
	go func() { done <- p.ConsumeTraces(context.Background(), concat(withoutRoot(c), withoutRoot(d), a1)) }()
	require.Eventually(t, func() bool { return p.store.next.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p.ConsumeTraces(context.Background(), a2)) // R2: chunk 1, first to reach A
	sd.mu.Unlock()
	require.NoError(t, <-done)
	sa := &p.shards[shardIndex(traceIDOf(a))]
	sa.mu.Lock()
	seqs := append([]uint64(nil), sa.traces[traceIDOf(a)].seqs...)
	sa.mu.Unlock()
	require.Equal(t, []uint64{1, 0}, seqs, "A holds the chunk numbered later first")

	// C and D complete and are delivered: chunk 0 is held by A alone
	require.NoError(t, p.ConsumeTraces(context.Background(), concat(rootOf(c), rootOf(d))))
	require.Eventually(t, func() bool { return sink.SpanCount() == c.SpanCount()+d.SpanCount() }, 5*time.Second, time.Millisecond)
	require.NoError(t, p.store.advanceLow(context.Background())) // the sweeper, each second
	kill(p)

	p2, sink2 := startWithStorage(t, st, queuedTestConfig())
	require.NoError(t, p2.ConsumeTraces(context.Background(), rootOf(a)))
	require.NoError(t, p2.Shutdown(context.Background()))
	got := spanCounts(sink2.AllTraces())
	for id := range spanIDSet(a) {
		assert.Equal(t, 1, got[id], "span %s of A (acknowledged) after the restart", id)
	}
}

// oneTaskN is buildOneTask as trace n, its trace ids spread over shards and lanes.
func oneTaskN(n uint64) ptrace.Traces {
	b := newTraceBuilder(n)
	b.tid[0] = byte(n * 37)
	return oneTaskOn(b)
}

func traceIDOf(td ptrace.Traces) pcommon.TraceID {
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
}

func concat(tds ...ptrace.Traces) ptrace.Traces {
	out := ptrace.NewTraces()
	for _, td := range tds {
		clone(td).ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	return out
}
