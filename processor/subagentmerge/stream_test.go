package subagentmerge

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/metrictest"
	"github.com/agentmeter/agentmeter/internal/otlpwire"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// realTime returns td's spans one request each, in the order they end (an SDK that
// exports each span the moment it ends).
func realTime(td ptrace.Traces) []ptrace.Traces {
	res := td.ResourceSpans().At(0)
	scope := res.ScopeSpans().At(0)
	var out []ptrace.Traces
	for _, sp := range endOrder(td) {
		out = append(out, batchOf([]arrivalSpan{{res, scope, sp}}))
	}
	return out
}

// firstEmissions counts the spans in tds that are not re-emissions.
func firstEmissions(tds []ptrace.Traces) int {
	n := 0
	for _, td := range tds {
		for sp := range spaniter.All(td) {
			if !genai.IsReemission(sp.Attributes()) {
				n++
			}
		}
	}
	return n
}

// assertExactAtSink checks, on the last version of every span, the usage the merge
// rule says each dispatching span carries.
func assertExactAtSink(t *testing.T, tds []ptrace.Traces, want map[pcommon.SpanID]genai.Usage, msg string) {
	t.Helper()
	last, counted := upserted(tds)
	for id, sp := range last {
		u, has := genai.SubagentUsageFromMap(sp.Attributes())
		w, dispatcher := want[id]
		require.Equal(t, dispatcher, has, "%s span %s", msg, id)
		if dispatcher {
			require.Equal(t, w, u, "%s: dispatching span %s", msg, id)
		}
	}
	require.Len(t, counted, len(last), "%s: every span counted once", msg)
}

// Stream mode holds nothing: after each call, every new span of it has gone on.
func TestStreamEverySpanGoesOnInItsCall(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		in, want := randomAgentTraceWithWant(r, seed, seed%2 == 0)
		p, sink, _ := newTestProcessor(t, streamTestConfig())
		sent := 0
		for _, b := range shuffleIntoBatches(r, clone(in), 1+r.IntN(8)) {
			sent += b.SpanCount()
			require.NoError(t, p.ConsumeTraces(context.Background(), b))
			require.Equal(t, sent, firstEmissions(sink.AllTraces()), "seed %d: nothing held", seed)
		}
		require.Zero(t, p.nSpans.Load(), "no span buffered")
		require.NoError(t, p.Shutdown(context.Background()))
		assertExactAtSink(t, sink.AllTraces(), want, fmt.Sprintf("seed %d", seed))
	}
}

// A run replayed in real time (each span alone, as it ends): the dispatcher goes on
// before its subagents' spans exist, and is re-emitted as their usage arrives, at most
// once per settle_time, plus once when the trace completes.
func TestStreamCorrectionsAreCoalesced(t *testing.T) {
	in, want := buildParallel(), map[pcommon.SpanID]genai.Usage{}
	disp := spanByCalls(t, in, "call_a", "call_b").SpanID()
	want[disp] = genai.Usage{Input: 30, Output: 12}
	cfg := streamTestConfig()
	cfg.SettleTime = time.Hour // nothing but completion may re-emit twice
	p, sink, tel := newTestProcessor(t, cfg)
	clock := time.Now().UnixNano()
	p.now = func() int64 { return clock }
	for _, b := range realTime(in) {
		clock += int64(time.Millisecond)
		require.NoError(t, p.ConsumeTraces(context.Background(), b))
	}
	versions := 0
	for _, td := range sink.AllTraces() {
		for sp := range spaniter.All(td) {
			if sp.SpanID() == disp {
				versions++
			}
		}
	}
	assert.Equal(t, 2, versions, "first emission, then the final one at completion (no window passed before)")
	assertExactAtSink(t, sink.AllTraces(), want, "real time")
	require.NoError(t, p.Shutdown(context.Background()))
	// the dispatcher once; the model calls, which went on before their runs did (caller
	// pending), once each when their caller is settled: the counter counts them all
	reemitted := 0
	for _, td := range sink.AllTraces() {
		for sp := range spaniter.All(td) {
			if genai.IsReemission(sp.Attributes()) {
				reemitted++
			}
		}
	}
	assert.Equal(t, int64(reemitted), counterValue(t, tel, "otelcol_processor_subagentmerge_corrections"))
}

// The sweeper sends a due correction once settle_time has passed since the last one.
func TestStreamDueCorrectionGoesOutFromTheSweeper(t *testing.T) {
	in := buildParallel()
	disp := spanByCalls(t, in, "call_a", "call_b").SpanID()
	cfg := streamTestConfig()
	cfg.SettleTime = time.Second
	p, sink, _ := newTestProcessor(t, cfg)
	clock := time.Now().UnixNano()
	p.now = func() int64 { return clock }
	batches := realTime(in)
	for _, b := range batches[:len(batches)-1] { // everything but the root
		require.NoError(t, p.ConsumeTraces(context.Background(), b))
	}
	before := len(sink.AllTraces())
	clock += int64(2 * time.Second)
	require.NoError(t, p.sweepStream(context.Background(), clock))
	require.Greater(t, len(sink.AllTraces()), before, "the due correction went out")
	last, _ := upserted(sink.AllTraces())
	assertSubagent(t, last[disp], genai.Usage{Input: 30, Output: 12}, 2, "call_a", "call_b")
	rev, ok := last[disp].Attributes().Get(genai.AttrMergeRevision)
	require.True(t, ok)
	assert.Positive(t, rev.Int())
	require.NoError(t, p.Shutdown(context.Background()))
}

// A correction the sweeper sends and the next consumer refuses goes out again later:
// the dispatcher's last version at the sink is exact.
func TestStreamRefusedCorrectionGoesOutAgain(t *testing.T) {
	in := buildParallel()
	disp := spanByCalls(t, in, "call_a", "call_b").SpanID()
	cfg := streamTestConfig()
	cfg.SettleTime = time.Second
	f := &failOnce{sink: new(consumertest.TracesSink)}
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, f.consumer())
	require.NoError(t, err)
	clock := time.Now().UnixNano()
	p.now = func() int64 { return clock }
	batches := realTime(in)
	for _, b := range batches[:len(batches)-1] { // everything but the root
		require.NoError(t, p.ConsumeTraces(context.Background(), b))
	}
	clock += int64(2 * time.Second)
	f.left.Store(1)
	require.Error(t, p.sweepStream(context.Background(), clock), "the correction was refused")
	last, _ := upserted(f.sink.AllTraces())
	_, merged := genai.SubagentUsageFromMap(last[disp].Attributes())
	require.False(t, merged, "not at the sink yet")

	require.NoError(t, p.sweepStream(context.Background(), clock), "not due again before its backoff")
	clock += int64(2 * time.Second)
	require.NoError(t, p.sweepStream(context.Background(), clock))
	last, _ = upserted(f.sink.AllTraces())
	assertSubagent(t, last[disp], genai.Usage{Input: 30, Output: 12}, 2, "call_a", "call_b")
	require.NoError(t, p.Shutdown(context.Background()))
}

// failOnce refuses its first n calls, then passes everything to the sink.
type failOnce struct {
	left atomic.Int32
	sink *consumertest.TracesSink
}

func (f *failOnce) consumer() consumer.Traces {
	next, _ := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if f.left.Add(-1) >= 0 {
			return errors.New("queue full")
		}
		return f.sink.ConsumeTraces(ctx, td)
	})
	return next
}

// A call the next consumer refuses is taken back out of the ledger: the sender's retry
// goes on (not dropped as a duplicate) and the merged numbers end exact.
func TestStreamRefusedCallIsRetried(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		in, want := randomAgentTraceWithWant(r, seed, true)
		f := &failOnce{sink: new(consumertest.TracesSink)}
		frozen := seed%2 == 0 // every ledger frozen between calls: the refusal thaws it
		p, err := newProcessor(processortest.NewNopSettings(Type), streamTestConfig(), f.consumer())
		require.NoError(t, err)
		require.NoError(t, p.Start(context.Background(), nil))
		batches := shuffleIntoBatches(r, clone(in), 2+r.IntN(5))
		refuse := r.IntN(len(batches))
		for i, b := range batches {
			if i == refuse && b.SpanCount() > 0 {
				f.left.Store(1)
				require.Error(t, p.ConsumeTraces(context.Background(), clone(b)))
			}
			require.NoError(t, p.ConsumeTraces(context.Background(), b))
			if frozen {
				freezeAll(p)
			}
		}
		ledgerBytesAddUp(t, p)
		require.NoError(t, p.Shutdown(context.Background()))
		require.Equal(t, in.SpanCount(), firstEmissions(f.sink.AllTraces()), "seed %d: the retry went on", seed)
		assertExactAtSink(t, f.sink.AllTraces(), want, "refused")
	}
}

// Killed mid-run and restarted on the same storage: the ledger is read back, and the
// rest of the run merges onto what went before, exactly.
func TestStreamRestartConverges(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 17))
		in, want := randomAgentTraceWithWant(r, seed, true)
		st := storagetest.New()
		batches := realTime(in)
		cut := 1 + r.IntN(len(batches)-1)
		p1, sink1 := startWithStorage(t, st, streamTestConfig())
		for _, b := range batches[:cut] {
			require.NoError(t, p1.ConsumeTraces(context.Background(), b))
		}
		require.Positive(t, st.Count(prefixStream+"chunk/"), "the ledger is on disk before the request is acknowledged")
		kill(p1)

		p2, sink2 := startWithStorage(t, st, streamTestConfig())
		require.Equal(t, int64(1), p2.nLedgers.Load(), "seed %d: the ledger is back", seed)
		for _, b := range batches[cut:] {
			require.NoError(t, p2.ConsumeTraces(context.Background(), b))
		}
		require.NoError(t, p2.Shutdown(context.Background()))
		all := append(sink1.AllTraces(), sink2.AllTraces()...)
		require.Equal(t, in.SpanCount(), firstEmissions(all), "seed %d", seed)
		assertExactAtSink(t, all, want, "restart")
	}
}

// Ledgers past ledger_limit_mib end least recently extended first, after their last
// re-emissions; a ledger idle for wait_duration ends and its chunks leave the disk.
func TestStreamLedgersAreBoundedAndExpire(t *testing.T) {
	st := storagetest.New()
	cfg := streamTestConfig()
	p, _ := startWithStorage(t, st, cfg)
	clock := time.Now().UnixNano()
	p.now = func() int64 { return clock }
	a, b := buildParallel(), buildNested()
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(a)))
	p.maxLedgerBytes = p.ledgerBytes.Load() + 100 // room for one ledger, not two
	clock++
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(b)))
	assert.Equal(t, int64(1), p.nLedgers.Load(), "the older ledger ended")
	s := &p.shards[shardIndex(b.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID())]
	s.mu.Lock()
	_, kept := s.led.byID[b.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()]
	s.mu.Unlock()
	assert.True(t, kept, "the newest stays")

	p.maxLedgerBytes = 1 << 30
	clock += int64(cfg.WaitDuration) + 1
	require.NoError(t, p.sweepStream(context.Background(), clock))
	assert.Zero(t, p.nLedgers.Load())
	assert.Zero(t, p.ledgerBytes.Load())
	assert.Zero(t, st.Count(prefixStream+"chunk/"), "ended ledgers leave nothing on disk")
	require.NoError(t, p.Shutdown(context.Background()))
}

// Spans a hold-mode process left buffered on disk go on when the processor starts in
// stream mode: they were acknowledged and never passed on.
func TestStreamDrainsWhatHoldModeLeft(t *testing.T) {
	st := storagetest.New()
	full := buildOneTask()
	p1, _ := startWithStorage(t, st, defaultTestConfig())
	require.NoError(t, p1.ConsumeTraces(context.Background(), withoutRoot(full)))
	require.Positive(t, st.Count("chunk/"))
	kill(p1)

	p2, sink := startWithStorage(t, st, streamTestConfig())
	assert.Equal(t, full.SpanCount()-1, sink.SpanCount())
	assert.Zero(t, st.Count("chunk/"))
	require.NoError(t, p2.Shutdown(context.Background()))
}

// The ledgers' gauges say how many traces have one and what they hold.
func TestStreamLedgerGauges(t *testing.T) {
	p, _, tel := newTestProcessor(t, streamTestConfig())
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(buildParallel())))
	assertGauge(t, tel, "otelcol_processor_subagentmerge_ledger_traces", 1)
	m, err := tel.GetMetric("otelcol_processor_subagentmerge_ledger_bytes")
	require.NoError(t, err)
	assert.Equal(t, p.ledgerBytes.Load(), metrictest.GaugeInt64(t, m))
	assert.Positive(t, metrictest.GaugeInt64(t, m))
	assertGauge(t, tel, "otelcol_processor_subagentmerge_spans_buffered", 0)
	require.NoError(t, p.Shutdown(context.Background()))
}

// Once a trace is whole, its ledger keeps only the dispatchers: a model call whose
// ancestors are all there, or a merged tool span, can no longer change.
func TestStreamLedgerKeepsOnlyWhatCanChange(t *testing.T) {
	in := buildNested()
	p, _, _ := newTestProcessor(t, streamTestConfig())
	for _, b := range realTime(in) {
		require.NoError(t, p.ConsumeTraces(context.Background(), b))
	}
	id := in.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	s := &p.shards[shardIndex(id)]
	s.mu.Lock()
	l := s.led.byID[id]
	require.NotNil(t, l)
	for sid := range l.kept {
		k := l.spans.keys[l.spans.find(sid)]
		assert.NotZero(t, k.kind&kindModel, "span %s kept", sid)
		assert.Zero(t, k.kind&kindFinal, "only dispatchers stay: span %s", sid)
	}
	assert.NotEmpty(t, l.kept)
	s.mu.Unlock()
	require.NoError(t, p.Shutdown(context.Background()))
}

// When the next consumer takes only part of a sweep's re-emissions (a sending queue with
// room for the first pieces of a batch it cut), only the ledgers with re-emissions in
// what it did not take re-emit again. Here it takes one trace's whole, so each
// correction reaches the sink once (a ledger taken in part would send its whole again).
func TestStreamPartlyTakenCorrectionsOnlyTheRestGoAgain(t *testing.T) {
	cfg := streamTestConfig()
	cfg.SettleTime = time.Second
	r := &roomyNext{}
	r.room.Store(1 << 20) // room for everything until the sweep
	next, err := consumer.NewTraces(r.ConsumeTraces)
	require.NoError(t, err)
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, next)
	require.NoError(t, err)
	clock := time.Now().UnixNano()
	p.now = func() int64 { return clock }
	for n := byte(1); n <= 2; n++ {
		in := buildParallel()
		for sp := range spaniter.All(in) {
			id := sp.TraceID()
			id[15] = n
			sp.SetTraceID(id)
		}
		batches := realTime(in)
		for _, b := range batches[:len(batches)-1] { // everything but the root: one span a call
			require.NoError(t, p.ConsumeTraces(context.Background(), b))
		}
	}
	reemitted := func() map[[2]string]int {
		r.mu.Lock()
		defer r.mu.Unlock()
		out := map[[2]string]int{}
		for sp := range spaniter.In(r.sink.AllTraces()) {
			if genai.IsReemission(sp.Attributes()) {
				out[[2]string{sp.TraceID().String(), sp.SpanID().String()}]++
			}
		}
		return out
	}
	clock += int64(2 * time.Second)
	r.room.Store(3) // the re-emissions of one trace: its dispatcher and two task spans
	require.Error(t, p.sweepStream(context.Background(), clock), "the second trace's were not taken")
	require.Len(t, reemitted(), 3, "the first trace's were")
	r.room.Store(1 << 20)
	clock += int64(2 * time.Second)
	require.NoError(t, p.sweepStream(context.Background(), clock))
	got := reemitted()
	require.Len(t, got, 6, "both traces' re-emissions")
	for k, n := range got {
		assert.Equal(t, 1, n, "span %v re-emitted once", k)
	}
	require.NoError(t, p.Shutdown(context.Background()))
}

// Every re-emission starts from the version that first went out: each carries the first
// version's own attributes, the caller an earlier one gave it, a revision above the last
// one's (within one millisecond too), and caller_pending never again once settled. Half
// the traces come in the order spans end, half shuffled.
func TestStreamReemissionsStartFromTheFirstVersion(t *testing.T) {
	multi := 0 // versions after the second
	for seed := uint64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		in, want := randomAgentTraceWithWant(r, seed, true)
		cfg := streamTestConfig()
		cfg.SettleTime = 0 // every change goes out at once: many versions of a span
		p, sink, _ := newTestProcessor(t, cfg)
		clock := time.Now().UnixNano()
		p.now = func() int64 { return clock } // one millisecond for the whole trace
		batches := realTime(in)
		if seed%2 == 1 { // a shuffled trace: a dispatcher can settle before it is exact
			batches = shuffleIntoBatches(r, in, 4+r.IntN(8))
		}
		for _, b := range batches {
			require.NoError(t, p.ConsumeTraces(context.Background(), b))
			require.NoError(t, p.sweepStream(context.Background(), clock))
		}
		require.NoError(t, p.Shutdown(context.Background()))

		first := map[pcommon.SpanID]ptrace.Span{}
		lastRev := map[pcommon.SpanID]int64{}
		settled := map[pcommon.SpanID]bool{}
		callers := map[pcommon.SpanID]string{}
		for _, td := range sink.AllTraces() {
			for sp := range spaniter.All(td) {
				id, attrs := sp.SpanID(), sp.Attributes()
				f, seen := first[id]
				if !seen {
					first[id] = sp
					continue
				}
				require.True(t, genai.IsReemission(attrs), "seed %d: a second version is a re-emission", seed)
				rev, ok := attrs.Get(genai.AttrMergeRevision)
				require.True(t, ok)
				if prev, again := lastRev[id]; again {
					multi++
					assert.Greater(t, rev.Int(), prev, "seed %d span %s: revisions rise", seed, id)
				}
				lastRev[id] = rev.Int()
				f.Attributes().Range(func(k string, v pcommon.Value) bool {
					if merge.Written(k) || k == genai.AttrCaller || k == genai.AttrCallerPending {
						return true
					}
					got, has := attrs.Get(k)
					assert.True(t, has && got.Equal(v), "seed %d span %s: %s as it first went out", seed, id, k)
					return true
				})
				if c, has := callers[id]; has {
					got, _ := attrs.Get(genai.AttrCaller)
					assert.Equal(t, c, got.AsString(), "seed %d span %s: the caller a re-emission gave it stays", seed, id)
				} else if c, has := attrs.Get(genai.AttrCaller); has {
					if _, had := f.Attributes().Get(genai.AttrCaller); !had {
						callers[id] = c.AsString()
					}
				}
				_, pending := attrs.Get(genai.AttrCallerPending)
				if settled[id] {
					assert.False(t, pending, "seed %d span %s: settled before", seed, id)
				}
				if _, s := attrs.Get(genai.AttrCallerSettled); s {
					assert.False(t, settled[id], "seed %d span %s: settled once", seed, id)
					settled[id] = true
				}
			}
		}
		assertExactAtSink(t, sink.AllTraces(), want, fmt.Sprintf("seed %d", seed))
	}
	assert.Greater(t, multi, 20, "spans that went out three times or more")
}

// The consumers behind a stream merge that encode the batch they are handed together
// (read-only, as the collector's fanout hands it to several) share one encoding of it.
func TestStreamSharesTheBatchEncoding(t *testing.T) {
	var shared, calls int
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		calls++
		td.MarkReadOnly() // what the fanout does for several read-only consumers
		a, err := otlpwire.Encode(ctx, &ptrace.ProtoMarshaler{}, td)
		require.NoError(t, err)
		b, err := otlpwire.Encode(ctx, &ptrace.ProtoMarshaler{}, td)
		require.NoError(t, err)
		if len(a) > 0 && &a[0] == &b[0] {
			shared++
		}
		return nil
	})
	require.NoError(t, err)
	p, err := newProcessor(processortest.NewNopSettings(Type), streamTestConfig(), next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), nil))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	for _, td := range realTime(buildParallel()) {
		require.NoError(t, p.ConsumeTraces(context.Background(), td))
	}
	assert.Positive(t, calls)
	assert.Equal(t, calls, shared)
}
