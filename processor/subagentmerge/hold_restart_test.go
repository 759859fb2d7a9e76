package subagentmerge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// One request buffered spans of two traces, so one chunk holds both. The first trace is
// passed on while the second still holds the chunk; a restart then must not buffer the
// first one's spans again from it (they would go on a second time, which a backend
// that cannot upsert keeps as duplicates, and counters downstream count twice). Inline
// delivery (hold), and queued delivery from the gather's own queue.
func TestHoldRestartDoesNotPassATraceOnTwice(t *testing.T) {
	for _, cfg := range []func() *Config{defaultTestConfig, queuedTestConfig} {
		st := storagetest.New()
		a, b := buildParallel(), buildNested()
		p1, sink1 := startWithStorage(t, st, cfg())
		require.NoError(t, p1.ConsumeTraces(context.Background(), joined(withoutRoot(a), withoutRoot(b))))
		require.Equal(t, 1, st.Count("chunk/"), "one chunk holds both traces")
		require.NoError(t, p1.ConsumeTraces(context.Background(), rootOf(a)))
		require.Eventually(t, func() bool { return sink1.SpanCount() == a.SpanCount() }, 5*time.Second, 2*time.Millisecond)
		require.Eventually(t, func() bool { return st.Count("end/") == 1 }, 5*time.Second, 2*time.Millisecond,
			"the chunk b holds says a let go of it")
		kill(p1)

		p2, sink2 := startWithStorage(t, st, cfg())
		require.NoError(t, p2.ConsumeTraces(context.Background(), rootOf(b)))
		require.Eventually(t, func() bool { return sink2.SpanCount() >= b.SpanCount() }, 5*time.Second, 2*time.Millisecond)
		require.NoError(t, p2.Shutdown(context.Background()))
		assertSentOnceAfterRestart(t, st, sink2, a, b)
	}
}

// Queued delivery: the spans of one request that go on at once (here two whole traces,
// on two lanes) are one chunk, held by each lane's batch. One lane is delivered while
// the other's backend refuses; after a restart only the refused lane's traces go on.
func TestQueuedLaneDeliveredIsNotSentAgainAfterRestart(t *testing.T) {
	st := storagetest.New()
	a, b := buildOneTask(), buildParallel()
	bID := b.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	require.NotEqual(t, laneOf(a.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()), laneOf(bID))
	sink1 := new(consumertest.TracesSink)
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		for sp := range spaniter.All(td) {
			if sp.TraceID() == bID {
				return errors.New("b's backend is down")
			}
		}
		return sink1.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	p1 := startWithStorageTo(t, st, queuedTestConfig(), next)
	require.NoError(t, p1.ConsumeTraces(context.Background(), joined(buildOneTask(), buildParallel())))
	require.Eventually(t, func() bool { return sink1.SpanCount() == a.SpanCount() }, 5*time.Second, 2*time.Millisecond)
	require.Eventually(t, func() bool { return st.Count("end/") == 1 }, 5*time.Second, 2*time.Millisecond,
		"the chunk b's lane holds says a's lane let go of it")
	kill(p1)

	p2, sink2 := startWithStorage(t, st, queuedTestConfig())
	require.Eventually(t, func() bool { return sink2.SpanCount() >= b.SpanCount() }, 5*time.Second, 2*time.Millisecond)
	require.NoError(t, p2.Shutdown(context.Background()))
	assertSentOnceAfterRestart(t, st, sink2, a, b)
}

// assertSentOnceAfterRestart checks what went on after a restart: nothing of trace
// before (passed on before it), every span of trace after once, and nothing left on st.
func assertSentOnceAfterRestart(t *testing.T, st *storagetest.Storage, sink *consumertest.TracesSink, before, after ptrace.Traces) {
	t.Helper()
	got := spanCounts(sink.AllTraces())
	for id := range spanIDSet(before) {
		assert.Zero(t, got[id], "span %s, passed on before the restart, went on again", id)
	}
	for id := range spanIDSet(after) {
		assert.Equal(t, 1, got[id], "span %s once", id)
	}
	assert.Zero(t, st.Count("chunk/"), "nothing left on disk")
	assert.Zero(t, st.Count("end/"), "no marker left on disk")
}
