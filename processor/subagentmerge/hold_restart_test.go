package subagentmerge

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		got := spanCounts(sink2.AllTraces())
		for id := range spanIDSet(a) {
			assert.Zero(t, got[id], "span %s of the trace passed on before the restart went on again", id)
		}
		for id := range spanIDSet(b) {
			assert.Equal(t, 1, got[id], "span %s of the held trace once", id)
		}
		assert.Zero(t, st.Count("chunk/"), "nothing left on disk")
		assert.Zero(t, st.Count("end/"), "no marker left on disk")
	}
}
