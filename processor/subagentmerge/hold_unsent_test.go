package subagentmerge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// flakyNext refuses (retryably) while down is set, like an exporter whose queue is full
// during a vendor outage; what it accepts goes to sink.
type flakyNext struct {
	down    atomic.Bool
	refused atomic.Int64
	takenSink
}

func (f *flakyNext) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if f.down.Load() {
		f.refused.Add(1)
		return errors.New("sending queue is full")
	}
	return f.take(ctx, td)
}

// takenSink keeps what a test next consumer took, safe for the sweeper to add to.
type takenSink struct {
	mu   sync.Mutex
	sink consumertest.TracesSink
}

func (c *takenSink) take(ctx context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sink.ConsumeTraces(ctx, td)
}

// spans counts the times each span id was taken.
func (c *takenSink) spans() map[pcommon.SpanID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return spanCounts(c.sink.AllTraces())
}

// spanCounts counts the times each span id is in tds.
func spanCounts(tds []ptrace.Traces) map[pcommon.SpanID]int {
	got := map[pcommon.SpanID]int{}
	for sp := range spaniter.In(tds) {
		got[sp.SpanID()]++
	}
	return got
}

func startFlaky(t *testing.T, cfg *Config) (*subagentMerge, *flakyNext) {
	t.Helper()
	f := &flakyNext{}
	next, err := consumer.NewTraces(f.ConsumeTraces)
	require.NoError(t, err)
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	return p, f
}

// A trace released while the next consumer refuses, in the request that completes it
// or by the sweeper, is kept and sent again once the consumer takes spans again: every
// span arrives, once, and the request that completed it was answered with success (a
// sender's retry of it would find its spans released and drop them as duplicates).
func TestRefusedReleasesAreSentAgain(t *testing.T) {
	cfg := defaultTestConfig()
	cfg.SettleTime = 10 * time.Millisecond
	p, f := startFlaky(t, cfg)
	f.down.Store(true)

	complete := buildOneTask() // released in the request that completes it
	want := spanIDSet(complete)
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(complete)))
	require.NoError(t, p.ConsumeTraces(context.Background(), only(complete, isLocalRoot)))
	b := newTraceBuilder(300) // settles: released by the sweeper
	b.chat(b.agent(pcommon.SpanID{}, "lead_agent").SpanID(), usage(1, 1))
	for id := range spanIDSet(b.td) {
		want[id] = true
	}
	require.NoError(t, p.ConsumeTraces(context.Background(), b.td))
	require.Eventually(t, func() bool { return p.unsent.spans.Load() == int64(len(want)) }, 5*time.Second, 2*time.Millisecond)
	assert.Positive(t, f.refused.Load())
	assert.Empty(t, f.spans())

	f.down.Store(false)
	require.Eventually(t, func() bool { return len(f.spans()) == len(want) }, 10*time.Second, 5*time.Millisecond)
	assert.Zero(t, p.unsent.n.Load())
	for id, n := range f.spans() {
		assert.True(t, want[id])
		assert.Equal(t, 1, n, "span %s once", id)
	}
	// a sender retrying the completing request finds its spans released: dropped
	require.NoError(t, p.ConsumeTraces(context.Background(), only(complete, isLocalRoot)))
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Len(t, f.spans(), len(want))
}

// Past its bound the unsent queue refuses new requests at once and retryably; once the
// next consumer takes spans again, what was accepted arrives and new requests go on.
// So does the queue of queued delivery (gather mode), which every released trace waits in.
func TestUnsentQueueRefusesWhenFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *Config
	}{{"hold", defaultTestConfig()}, {"gather queued", queuedTestConfig()}} {
		t.Run(tc.name, func(t *testing.T) {
			p, f := startFlaky(t, tc.cfg)
			p.unsentMax = 1 // the first refused (or queued) batch fills it
			f.down.Store(true)
			first := buildOneTask()
			firstSpans := first.SpanCount()
			require.NoError(t, p.ConsumeTraces(context.Background(), first))
			start := time.Now()
			err := p.ConsumeTraces(context.Background(), buildParallel())
			require.Error(t, err)
			assert.False(t, consumererror.IsPermanent(err), "retryable: %v", err)
			assert.Less(t, time.Since(start), time.Second, "answered at once")

			f.down.Store(false)
			require.Eventually(t, func() bool { return len(f.spans()) == firstSpans }, 10*time.Second, 5*time.Millisecond)
			require.NoError(t, p.ConsumeTraces(context.Background(), buildParallel()))
			require.NoError(t, p.Shutdown(context.Background()))
			assert.Len(t, f.spans(), firstSpans+buildParallel().SpanCount())
		})
	}
}

// Without storage, what is still refused at shutdown is reported lost, with the refusal.
func TestShutdownReportsUnsentSpansLost(t *testing.T) {
	p, f := startFlaky(t, defaultTestConfig())
	f.down.Store(true)
	require.NoError(t, p.ConsumeTraces(context.Background(), buildOneTask()))
	err := p.Shutdown(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lost at shutdown")
	assert.Contains(t, err.Error(), "sending queue is full")
}

// roomyNext takes at most room spans of each batch, the first ones, and refuses the rest
// partially (consumererror.Traces naming what it did not take), as a sending queue with
// room for only the first pieces of a batch it cut does.
type roomyNext struct {
	room  atomic.Int64
	calls atomic.Int64
	takenSink
}

func (r *roomyNext) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	r.calls.Add(1)
	room := int(r.room.Load())
	if td.SpanCount() <= room {
		return r.take(ctx, td)
	}
	taken, rest := ptrace.NewTraces(), ptrace.NewTraces()
	td.CopyTo(taken)
	td.CopyTo(rest)
	keepFirst := func(t ptrace.Traces, first bool) {
		n := 0
		t.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				ss.Spans().RemoveIf(func(ptrace.Span) bool { n++; return (n <= room) != first })
				return ss.Spans().Len() == 0
			})
			return rs.ScopeSpans().Len() == 0
		})
	}
	keepFirst(taken, true)
	keepFirst(rest, false)
	if err := r.take(ctx, taken); err != nil {
		return err
	}
	return consumererror.NewTraces(errors.New("sending queue is full"), rest)
}

// A next consumer that takes only the first spans of each batch it is handed (a full
// sending queue cutting a large release into pieces) gets only what it did not take
// again: every span arrives once, however large the released batch, whether it was
// refused in the request that released it or as the head of the unsent queue.
func TestPartlyTakenReleasesSendOnlyTheRestAgain(t *testing.T) {
	for _, room := range []int{1, 5} {
		r := &roomyNext{}
		r.room.Store(int64(room))
		next, err := consumer.NewTraces(r.ConsumeTraces)
		require.NoError(t, err)
		cfg := defaultTestConfig()
		cfg.SettleTime = 10 * time.Millisecond
		p, err := newProcessor(processortest.NewNopSettings(Type), cfg, next)
		require.NoError(t, err)
		require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))

		want := map[pcommon.SpanID]bool{}
		for _, td := range []ptrace.Traces{buildParallel(), buildOneTask()} {
			for id := range spanIDSet(td) {
				want[id] = true
			}
			require.NoError(t, p.ConsumeTraces(context.Background(), td))
		}
		require.Eventually(t, func() bool { return len(r.spans()) == len(want) }, 20*time.Second, 5*time.Millisecond,
			"room %d", room)
		require.Eventually(t, func() bool { return p.unsent.n.Load() == 0 }, 5*time.Second, 5*time.Millisecond)
		assert.Zero(t, p.unsent.spans.Load())
		assert.Zero(t, p.unsent.bytes.Load())
		require.NoError(t, p.Shutdown(context.Background()))
		for id, n := range r.spans() {
			assert.True(t, want[id])
			assert.Equal(t, 1, n, "room %d: span %s once", room, id)
		}
		assert.Greater(t, r.calls.Load(), int64(len(want)/room/2), "room %d: the batches were taken in parts", room)
	}
}

// A partial refusal names what to send again; joined with another consumer's refusal (a
// fanout), which consumer took what is unknown, so the whole batch goes again.
func TestNotTaken(t *testing.T) {
	td, rest := buildParallel(), buildOneTask()
	partial := consumererror.NewTraces(errors.New("sending queue is full"), rest)
	got, partly := notTaken(td, partial)
	assert.True(t, partly)
	assert.Equal(t, rest.SpanCount(), got.SpanCount())
	got, partly = notTaken(td, fmt.Errorf("exporter: %w", partial))
	assert.True(t, partly, "wrapped")
	assert.Equal(t, rest.SpanCount(), got.SpanCount())
	got, partly = notTaken(td, errors.Join(partial, errors.New("the other consumer refused")))
	assert.False(t, partly)
	assert.Equal(t, td.SpanCount(), got.SpanCount())
	got, partly = notTaken(td, errors.New("sending queue is full"))
	assert.False(t, partly)
	assert.Equal(t, td.SpanCount(), got.SpanCount())
}

// A lane drained after an outage keeps no delivered batch's bytes in its queue's spare
// capacity.
func TestDrainedLaneLetsGoOfDeliveredBatches(t *testing.T) {
	p, f := startFlaky(t, queuedTestConfig())
	f.down.Store(true)
	var lane int
	for i := range 8 {
		td := oneTaskN(uint64(1 + 4*i))
		lane = laneOf(traceIDOf(td))
		require.NoError(t, p.ConsumeTraces(context.Background(), td))
	}
	f.down.Store(false)
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 10*time.Second, time.Millisecond)
	u := p.deliver.queues[lane]
	u.mu.Lock()
	retained := 0
	for _, b := range u.items[:cap(u.items)] {
		retained += int(b.size())
	}
	u.mu.Unlock()
	assert.Zero(t, retained)
	require.NoError(t, p.Shutdown(context.Background()))
}

// A delivery of several queued batches that the next consumer refuses for good (one
// invalid run) is sent again batch by batch: only the refused batch is dropped.
func TestPermanentRefusalDropsOnlyTheRefusedBatch(t *testing.T) {
	b, x, y := oneTaskN(1), oneTaskN(5), oneTaskN(9) // one lane: id[15] % 4 == 1
	require.Equal(t, laneOf(traceIDOf(x)), laneOf(traceIDOf(y)))
	require.Equal(t, laneOf(traceIDOf(b)), laneOf(traceIDOf(y)))
	bad := traceIDOf(x)
	gate := make(chan struct{})
	var mu sync.Mutex
	var taken []ptrace.Traces
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		<-gate
		for sp := range spaniter.All(td) {
			if sp.TraceID() == bad {
				return consumererror.NewPermanent(errors.New("HTTP 400: a run is invalid"))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		taken = append(taken, td)
		return nil
	})
	require.NoError(t, err)
	p, err := newProcessor(processortest.NewNopSettings(Type), queuedTestConfig(), next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), nil))
	require.NoError(t, p.ConsumeTraces(context.Background(), b))
	time.Sleep(20 * time.Millisecond) // the lane is sending b, waiting at the gate
	require.NoError(t, p.ConsumeTraces(context.Background(), x))
	require.NoError(t, p.ConsumeTraces(context.Background(), y))
	close(gate)
	require.Eventually(t, func() bool { return p.unsentSpans() == 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, p.Shutdown(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	got := spanCounts(taken)
	n := 0
	for id := range spanIDSet(y) {
		n += got[id]
	}
	assert.Equal(t, y.SpanCount(), n, "y, joined to x in one delivery, is not dropped with it")
}
