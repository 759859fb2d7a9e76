package subagentmerge

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
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
		require.NoError(t, p1.ConsumeTraces(context.Background(), concat(withoutRoot(a), withoutRoot(b))))
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
	p1 := startWithStorageTo(t, st, queuedTestConfig(), refusingNext(t, sink1, func(id pcommon.TraceID) bool { return id == bID }))
	require.NoError(t, p1.ConsumeTraces(context.Background(), concat(buildOneTask(), buildParallel())))
	aLaneDelivered(t, st, sink1, a)
	kill(p1)
	restartSendsOnly(t, st, a, b)
}

// The same after a restart: a chunk read back at start whose spans go on at once (two
// whole traces, both refused before the first crash) is held by each lane's batch for
// its traces, so a lane delivered before a second crash is not sent again after it.
func TestQueuedLaneDeliveredAfterRestartIsNotSentAgain(t *testing.T) {
	st := storagetest.New()
	a, b := buildOneTask(), buildParallel()
	bID := b.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	p1 := startWithStorageTo(t, st, queuedTestConfig(), refusingNext(t, new(consumertest.TracesSink), func(pcommon.TraceID) bool { return true }))
	require.NoError(t, p1.ConsumeTraces(context.Background(), concat(buildOneTask(), buildParallel())))
	require.Eventually(t, func() bool { return p1.unsentSpans() == int64(a.SpanCount()+b.SpanCount()) }, 5*time.Second, 2*time.Millisecond)
	kill(p1)

	sink2 := new(consumertest.TracesSink)
	p2 := startWithStorageTo(t, st, queuedTestConfig(), refusingNext(t, sink2, func(id pcommon.TraceID) bool { return id == bID }))
	aLaneDelivered(t, st, sink2, a)
	kill(p2)
	restartSendsOnly(t, st, a, b)
}

// aLaneDelivered waits until sink has trace a and the chunk it shares with the other
// lane's trace has a marker saying a's lane let go of it.
func aLaneDelivered(t *testing.T, st *storagetest.Storage, sink *consumertest.TracesSink, a ptrace.Traces) {
	t.Helper()
	require.Eventually(t, func() bool { return sink.SpanCount() == a.SpanCount() }, 5*time.Second, 2*time.Millisecond)
	require.Eventually(t, func() bool { return st.Count("end/") == 1 }, 5*time.Second, 2*time.Millisecond,
		"the chunk b's lane holds says a's lane let go of it")
}

// restartSendsOnly starts queued delivery once more on st: it sends trace after, and
// nothing of trace before.
func restartSendsOnly(t *testing.T, st *storagetest.Storage, before, after ptrace.Traces) {
	t.Helper()
	p, sink := startWithStorage(t, st, queuedTestConfig())
	require.Eventually(t, func() bool { return sink.SpanCount() >= after.SpanCount() }, 5*time.Second, 2*time.Millisecond)
	require.NoError(t, p.Shutdown(context.Background()))
	assertSentOnceAfterRestart(t, st, sink, before, after)
}

// Inline delivery, hold and gather mode: a chunk read back at start (trace a whole,
// refused before the crash, and a late span of trace b, whose release the restart has
// forgotten, so it holds the span as a new trace) is passed on in part at once. The
// batch passed on holds the chunk for trace a, so that once a is delivered the chunk b
// still holds says a let go of it: a second crash does not send a again.
func TestInlineDeliveredAfterRestartIsNotSentAgain(t *testing.T) {
	for _, mode := range []func() *Config{defaultTestConfig, gatherTestConfig} {
		cfg := func() *Config { c := mode(); c.SettleTime = 0; return c } // a complete trace goes at once
		ctx := context.Background()
		st := storagetest.New()
		a := oneTaskN(5)
		aID := traceIDOf(a)
		bb := newTraceBuilder(1)
		root := bb.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
		bb.chat(root, usage(1, 1))
		lateID := bb.tool(root, "web_search", "call_1").SpanID()
		isLate := func(sp ptrace.Span) bool { return sp.SpanID() == lateID }

		sink1 := new(consumertest.TracesSink)
		p1 := startWithStorageTo(t, st, cfg(), refusingNext(t, sink1, func(id pcommon.TraceID) bool { return id == aID }))
		require.NoError(t, p1.ConsumeTraces(ctx, only(bb.td, func(sp ptrace.Span) bool { return !isLate(sp) })))
		require.Equal(t, bb.td.SpanCount()-1, sink1.SpanCount(), "b passed on")
		require.NoError(t, p1.ConsumeTraces(ctx, concat(a, only(bb.td, isLate))), "both wait on disk: a's backend refuses")
		kill(p1)

		p2, sink2 := startWithStorage(t, st, cfg())
		require.Eventually(t, func() bool { return sink2.SpanCount() == a.SpanCount() }, 5*time.Second, 2*time.Millisecond, "a passed on at start")
		require.Equal(t, 1, st.Count("end/"), "the chunk b holds says a let go of it")
		kill(p2)

		p3, sink3 := startWithStorage(t, st, cfg())
		require.NoError(t, p3.Shutdown(ctx))
		got := spanCounts(sink3.AllTraces())
		for id := range spanIDSet(a) {
			assert.Zero(t, got[id], "span %s of a, passed on before the second crash, sent again after it", id)
		}
	}
}

// refusingNext is a next consumer that refuses (retryably) every batch holding a span of
// a trace down says is down, and hands the others to sink.
func refusingNext(t *testing.T, sink *consumertest.TracesSink, down func(pcommon.TraceID) bool) consumer.Traces {
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		for sp := range spaniter.All(td) {
			if down(sp.TraceID()) {
				return errors.New("the backend is down")
			}
		}
		return sink.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	return next
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

// A hold-mode marker names two chunks of trace a; one of them was deleted before the
// crash (its other trace went on). A stream-mode start drains the hold-mode chunks, and
// the marker with them: it names no chunk left.
func TestDrainOfHoldModeChunksDeletesTheirMarkers(t *testing.T) {
	st := storagetest.New()
	a, b, c := oneTaskN(1), oneTaskN(2), oneTaskN(3)
	a1, a2 := halves(a)
	p1, sink1 := startWithStorage(t, st, defaultTestConfig())
	ctx := context.Background()
	require.NoError(t, p1.ConsumeTraces(ctx, concat(a1, withoutRoot(b)))) // chunk s1: a, b
	require.NoError(t, p1.ConsumeTraces(ctx, concat(a2, withoutRoot(c)))) // chunk s2: a, c
	require.Equal(t, 2, st.Count("chunk/"))
	require.NoError(t, p1.ConsumeTraces(ctx, rootOf(a))) // a goes on: marker names a in s1, s2
	require.Equal(t, a.SpanCount(), sink1.SpanCount())
	require.Equal(t, 1, st.Count("end/"))
	require.NoError(t, p1.ConsumeTraces(ctx, rootOf(b))) // b goes on: s1 deleted, marker lives for s2
	require.Equal(t, 1, st.Count("chunk/"))
	require.Equal(t, 1, st.Count("end/"))
	kill(p1)

	p2, sink2 := startWithStorage(t, st, streamTestConfig())
	assert.Equal(t, c.SpanCount()-1, sink2.SpanCount(), "c's spans drained")
	assert.Zero(t, st.Count("chunk/"), "hold-mode chunks drained")
	assert.Zero(t, st.Count("end/"), "no hold-mode marker left on disk")
	require.NoError(t, p2.Shutdown(ctx))
}

// halves splits td's non-root spans in two.
func halves(td ptrace.Traces) (ptrace.Traces, ptrace.Traces) {
	nr := withoutRoot(td)
	first := map[[8]byte]bool{}
	i := 0
	for sp := range spaniter.All(nr) {
		if i%2 == 0 {
			first[sp.SpanID()] = true
		}
		i++
	}
	return only(nr, func(sp ptrace.Span) bool { return first[sp.SpanID()] }),
		only(nr, func(sp ptrace.Span) bool { return !first[sp.SpanID()] })
}

// Random agent trees, several at once, mixed into requests, through hold mode and
// queued gather mode (with eviction and idle release too): the next consumer refuses
// some sends, the disk fails now and then (the sender retries), the process is killed
// and restarted, and the rest arrives: every span reaches the sink once, and nothing
// stays on disk.
func TestPropertyHoldRestart(t *testing.T) { propertyHoldRestart(t, false) }

func TestPropertyHoldRestartDiskFails(t *testing.T) { propertyHoldRestart(t, true) }

func propertyHoldRestart(t *testing.T, diskFails bool) {
	for _, mk := range []struct {
		name string
		cfg  func() *Config
	}{{"hold", defaultTestConfig}, {"queued", queuedTestConfig},
		{"hold2", func() *Config { c := defaultTestConfig(); c.NumTraces = 2; return c }},
		{"queued2", func() *Config { c := queuedTestConfig(); c.NumTraces = 2; return c }},
		{"holdidle", func() *Config {
			c := defaultTestConfig()
			c.WaitDuration = 20 * time.Millisecond
			c.SettleTime = 0
			return c
		}},
		{"queuedidle", func() *Config {
			c := queuedTestConfig()
			c.WaitDuration = 20 * time.Millisecond
			c.SettleTime = 0
			return c
		}},
	} {
		for seed := uint64(1); seed <= 15; seed++ {
			r := rand.New(rand.NewPCG(seed, 41))
			reqs, all, cut := randomRequests(r, seed)
			st := storagetest.New()
			var mu sync.Mutex
			got := map[pcommon.SpanID]int{}
			refuse := seed%3 != 0
			calls := 0
			next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if refuse && calls%3 == 1 {
					return errors.New("down")
				}
				for sp := range spaniter.All(td) {
					if !genai.IsReemission(sp.Attributes()) {
						got[sp.SpanID()]++
					}
				}
				return nil
			})
			require.NoError(t, err)
			p1 := startWithStorageTo(t, st, mk.cfg(), next)
			for _, req := range reqs[:cut] {
				if diskFails && r.IntN(3) == 0 {
					st.Fail(errors.New("disk full"))
				}
				if err := p1.ConsumeTraces(context.Background(), req); err != nil {
					_ = p1.ConsumeTraces(context.Background(), req) // the sender retries
				}
				if r.IntN(2) == 0 {
					st.Fail(nil)
				}
			}
			time.Sleep(time.Duration(r.IntN(3)) * 30 * time.Millisecond)
			st.Fail(nil)
			if diskFails {
				require.Eventually(t, func() bool {
					if p1.store.write(context.Background(), 0, nil) != nil {
						return false
					}
					p1.store.mu.Lock()
					defer p1.store.mu.Unlock()
					return len(p1.store.retry) == 0 && len(p1.store.unwritten) == 0
				}, 5*time.Second, 5*time.Millisecond)
			}
			kill(p1)
			mu.Lock()
			refuse = false
			mu.Unlock()
			p2 := startWithStorageTo(t, st, mk.cfg(), next)
			for _, req := range reqs[cut:] {
				require.NoError(t, p2.ConsumeTraces(context.Background(), req))
			}
			require.NoError(t, p2.Shutdown(context.Background()))
			mu.Lock()
			for id := range all {
				assert.Equal(t, 1, got[id], "%s seed %d (cut %d of %d): span %s", mk.name, seed, cut, len(reqs), id)
			}
			mu.Unlock()
			assert.Zero(t, st.Count("chunk/"), "%s seed %d: chunks left", mk.name, seed)
			assert.Zero(t, st.Count("end/"), "%s seed %d: markers left", mk.name, seed)
		}
	}
}

// randomRequests mixes 2 to 5 random agent traces, each one's spans in the order they
// end, into requests, and returns them with every span id among them and where to cut
// them (a kill): at least one request before it and one after.
func randomRequests(r *rand.Rand, seed uint64) (reqs []ptrace.Traces, all map[pcommon.SpanID]bool, cut int) {
	all = map[pcommon.SpanID]bool{}
	var queues [][]ptrace.Traces
	for k := range uint64(2 + r.IntN(4)) {
		in, _ := randomAgentTraceWithWant(r, seed*10+k, true)
		for id := range spanIDSet(in) {
			all[id] = true
		}
		queues = append(queues, realTime(in))
	}
	reqs, _ = mixIntoRequests(r, queues, 4)
	return reqs, all, 1 + r.IntN(len(reqs)-1)
}
