package subagentmerge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

func queuedTestConfig() *Config {
	cfg := gatherTestConfig()
	cfg.Delivery = DeliveryQueued
	return cfg
}

// A request that completes a trace is answered before the next consumer has taken it:
// the processor sends it from its own queue. The consumer here takes nothing until the
// test lets it; the request still returns, and then every span arrives once.
func TestQueuedDeliveryAnswersBeforeSending(t *testing.T) {
	gate := make(chan struct{})
	f := &flakyNext{}
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		return f.take(ctx, td)
	})
	require.NoError(t, err)
	p, err := newProcessor(processortest.NewNopSettings(Type), queuedTestConfig(), next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), nil))

	full := buildParallel()
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(full)))
	done := make(chan error, 1)
	go func() { done <- p.ConsumeTraces(context.Background(), only(full, isLocalRoot)) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the request that completed the trace waited for the next consumer")
	}
	assert.Empty(t, f.spans())
	assert.Equal(t, int64(full.SpanCount()), p.unsentSpans(), "queued, not decoded")

	close(gate)
	require.Eventually(t, func() bool { return len(f.spans()) == full.SpanCount() }, 10*time.Second, 5*time.Millisecond)
	for id, n := range f.spans() {
		assert.Equal(t, 1, n, "span %s once", id)
	}
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Zero(t, p.unsentSpans())
}

// What the next consumer refuses (retryably) waits and is sent again: every span once.
// A correction that came while its trace waited goes with it, coalesced: the span is
// sent once, as a first emission with the correction's content (the sink has not had
// it). A correction that comes after the trace was taken goes after it, as a
// re-emission.
func TestQueuedDeliveryRetriesRefusals(t *testing.T) {
	p, f := startFlaky(t, queuedTestConfig())
	f.down.Store(true)

	full := buildOneTask()
	dispatcher := findChatWithCalls(t, full)
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(full)))
	require.NoError(t, p.ConsumeTraces(context.Background(), rootOf(full)))
	require.NoError(t, p.ConsumeTraces(context.Background(), versionOf(dispatcher, 1)), "a correction after the release")
	require.Eventually(t, func() bool { return f.refused.Load() > 0 }, 5*time.Second, 2*time.Millisecond)
	assert.Equal(t, int64(full.SpanCount()+1), p.unsentSpans())

	f.down.Store(false)
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p.ConsumeTraces(context.Background(), versionOf(dispatcher, 2)))
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Shutdown(context.Background()))

	type version struct{ rank, content int64 }
	var got []version // the dispatcher's versions as they arrived
	for sp := range spaniter.In(f.sink.AllTraces()) {
		if sp.SpanID() == dispatcher.SpanID() {
			v, _ := sp.Attributes().Get(testVersionKey)
			got = append(got, version{genai.ReemissionOf(sp.Attributes()).Rank(), v.Int()})
		}
	}
	require.Len(t, got, 2)
	assert.Equal(t, version{0, 1}, got[0], "first emission, with the waiting correction's content")
	assert.Positive(t, got[1].rank, "then the later correction, as a re-emission")
	assert.Equal(t, int64(2), got[1].content)
	assert.Len(t, f.spans(), full.SpanCount())
}

// With storage, what waits to be sent is on disk: the released traces in the chunks
// they were held in, and what a request brought that was not held (here a trace complete
// in one request) in a chunk of its own, written before the request was answered. A
// process killed before it sent them leaves them to the next, which sends every span,
// and then nothing is left on disk.
func TestQueuedDeliveryRestartSendsWhatWaited(t *testing.T) {
	st := storagetest.New()
	p := startWithStorageTo(t, st, queuedTestConfig(), consumertest.NewErr(errors.New("vendor down")))
	held, whole := buildOneTask(), buildParallel()
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(held)))
	require.NoError(t, p.ConsumeTraces(context.Background(), rootOf(held)))
	require.NoError(t, p.ConsumeTraces(context.Background(), whole))
	require.Eventually(t, func() bool { return p.unsentSpans() == int64(held.SpanCount()+whole.SpanCount()) }, 5*time.Second, 2*time.Millisecond)
	assert.Positive(t, st.Count("chunk/"), "on disk until delivered")
	kill(p)

	cfg2 := queuedTestConfig()
	p2, sink2 := startWithStorage(t, st, cfg2)
	require.Eventually(t, func() bool { return sink2.SpanCount() >= held.SpanCount()+whole.SpanCount() }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p2.Shutdown(context.Background()))
	got := spanCounts(sink2.AllTraces())
	for id := range spanIDSet(held) {
		assert.Equal(t, 1, got[id], "held span %s once", id)
	}
	for id := range spanIDSet(whole) {
		assert.Equal(t, 1, got[id], "span %s of the whole trace once", id)
	}
	assert.Zero(t, st.Count("chunk/"), "nothing left on disk once delivered")
}

// Random agent trees × every arrival order through a stream merge and a gather with
// queued delivery, the spans sent by the gather's own goroutines: each dispatching span
// ends with the exact merged usage at LangSmith, each task span merged (inline delivery
// does not keep a correction behind the release it corrects: the test above).
func TestPropertyQueuedGatherAfterStreamEveryArrivalOrder(t *testing.T) {
	propertyGatherAfterStream(t, 30, func(c *Config) { c.Delivery = DeliveryQueued })
}

// Shutdown with the vendor down does not wait for it: the last sends give up after
// shutdownSendTimeout, and what was not sent stays on disk for the next start.
func TestQueuedDeliveryShutdownDoesNotWaitForTheVendor(t *testing.T) {
	defer func(d time.Duration) { shutdownSendTimeout = d }(shutdownSendTimeout)
	shutdownSendTimeout = 50 * time.Millisecond
	st := storagetest.New()
	blocking, err := consumer.NewTraces(func(ctx context.Context, _ ptrace.Traces) error {
		<-ctx.Done() // an exporter retrying until the vendor is back
		return ctx.Err()
	})
	require.NoError(t, err)
	p := startWithStorageTo(t, st, queuedTestConfig(), blocking)
	full := buildOneTask()
	require.NoError(t, p.ConsumeTraces(context.Background(), full))

	start := time.Now()
	require.NoError(t, p.Shutdown(context.Background()), "with storage nothing is lost")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Positive(t, st.Count("chunk/"), "what was not sent stays on disk")

	p2, sink2 := startWithStorage(t, st, queuedTestConfig())
	require.Eventually(t, func() bool { return sink2.SpanCount() == full.SpanCount() }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p2.Shutdown(context.Background()))
	assert.Zero(t, st.Count("chunk/"))
}

// A trace that came a span a request is stored a request at a time, and each stored
// request repeats its resource and scope; the delivery decodes each of them once: the
// consumer gets every span under one resource and one scope, none lost or repeated.
func TestQueuedDeliveryDecodesEachResourceOnce(t *testing.T) {
	var mu sync.Mutex
	var got []ptrace.Traces
	next, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, td)
		return nil
	})
	require.NoError(t, err)
	p, err := newProcessor(processortest.NewNopSettings(Type), queuedTestConfig(), next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), nil))

	full := buildParallel()
	rest := withoutRoot(full)
	ids := map[string]int{}
	for sp := range spaniter.All(rest) {
		one := ptrace.NewTraces()
		rs := one.ResourceSpans().AppendEmpty()
		full.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		full.ResourceSpans().At(0).ScopeSpans().At(0).Scope().CopyTo(ss.Scope())
		sp.CopyTo(ss.Spans().AppendEmpty())
		require.NoError(t, p.ConsumeTraces(context.Background(), one))
	}
	require.NoError(t, p.ConsumeTraces(context.Background(), only(full, isLocalRoot)))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, td := range got {
			n += td.SpanCount()
		}
		return n == full.SpanCount()
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Shutdown(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	for _, td := range got {
		// the root's request brings its own resource message (the same content),
		// regrouped with the rest: one resource, one scope
		assert.Equal(t, 1, td.ResourceSpans().Len())
		assert.Equal(t, 1, td.ResourceSpans().At(0).ScopeSpans().Len())
		for sp := range spaniter.All(td) {
			ids[sp.SpanID().String()]++
		}
	}
	assert.Len(t, ids, full.SpanCount())
	for id, n := range ids {
		assert.Equal(t, 1, n, "span %s once", id)
	}
}

// Batches a lane delivers together let go of their chunks in one storage transaction,
// not one each.
func TestQueuedDeliveryForgetsTogether(t *testing.T) {
	st := storagetest.New()
	gate, entered := make(chan struct{}), make(chan struct{}, 8)
	sink := new(consumertest.TracesSink)
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		entered <- struct{}{}
		<-gate
		return sink.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	p := startWithStorageTo(t, st, queuedTestConfig(), next)
	var mu sync.Mutex
	forgets := 0 // batches that delete chunks
	st.SetOnBatch(func(ops []*storage.Operation) {
		for _, op := range ops {
			if op.Type == storage.Delete && strings.Contains(op.Key, "chunk/") {
				mu.Lock()
				forgets++
				mu.Unlock()
				return
			}
		}
	})
	// whole traces, each complete in its request, all on one lane (laneOf: the id's
	// last byte)
	total := 0
	for i, no := range []uint64{4, 8, 12, 16} {
		td := oneTaskOn(newTraceBuilder(no))
		total += td.SpanCount()
		require.NoError(t, p.ConsumeTraces(context.Background(), td))
		if i == 0 {
			<-entered // the lane sends the first; the others wait behind it
		}
	}
	require.Eventually(t, func() bool { return p.unsentSpans() == int64(total) }, 5*time.Second, 2*time.Millisecond)
	close(gate)
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Equal(t, total, sink.SpanCount())
	assert.Len(t, entered, 1, "the three that waited went in one send")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 2, forgets, "one transaction for each send")
	assert.Zero(t, st.Count("chunk/"))
}

// A request that holds spans (a trace not complete yet) and queues others (a trace
// complete in it) writes both chunks in one storage transaction before it is answered.
func TestQueuedDeliveryWritesHeldAndQueuedTogether(t *testing.T) {
	st := storagetest.New()
	gate := make(chan struct{})
	next, err := consumer.NewTraces(func(context.Context, ptrace.Traces) error { <-gate; return nil })
	require.NoError(t, err)
	p := startWithStorageTo(t, st, queuedTestConfig(), next)
	var mu sync.Mutex
	var writes [][]string // the chunk keys each batch writes
	st.SetOnBatch(func(ops []*storage.Operation) {
		var keys []string
		for _, op := range ops {
			if op.Type == storage.Set && strings.Contains(op.Key, "chunk/") && !strings.Contains(op.Key, "\x00") {
				keys = append(keys, op.Key)
			}
		}
		if len(keys) > 0 {
			mu.Lock()
			writes = append(writes, keys)
			mu.Unlock()
		}
	})
	require.NoError(t, p.ConsumeTraces(context.Background(), concat(withoutRoot(buildNested()), buildParallel())))
	mu.Lock()
	assert.Equal(t, 1, len(writes), "one transaction: %q", writes)
	if len(writes) == 1 {
		assert.Len(t, writes[0], 2, "the held chunk and the queued one")
	}
	mu.Unlock()
	assert.GreaterOrEqual(t, st.Count("chunk/"), 2, "both on disk before the answer")
	st.SetOnBatch(nil)
	close(gate)
	kill(p)
}
