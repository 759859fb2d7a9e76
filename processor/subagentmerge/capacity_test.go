package subagentmerge

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/bench/agentrun"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// Past num_traces or ledger_limit_mib, the ledgers of complete traces end first, the
// least recently extended of them first; a run in flight loses its ledger only when no
// complete trace has one left, and then the least recently extended goes.
func TestStreamCapacityEndsCompleteLedgersFirst(t *testing.T) {
	cfg := streamTestConfig()
	cfg.NumTraces = 2
	p, _, tel := newTestProcessor(t, cfg)
	clock := int64(1_000)
	p.now = func() int64 { return clock }
	a, b, c, d := buildParallel(), buildNested(), buildOneTask(), newTraceBuilder(900)
	d.agent(pcommon.SpanID{}, genai.LeadAgentName)
	has := func(td ptrace.Traces) bool {
		id := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
		s := &p.shards[shardIndex(id)]
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.led.byID[id]
		return ok
	}
	send := func(td ptrace.Traces) {
		clock++
		require.NoError(t, p.ConsumeTraces(context.Background(), td))
	}

	send(withoutRoot(a)) // in flight, extended first
	send(b)              // complete, extended later
	send(withoutRoot(c)) // a third ledger: one must end
	assert.Equal(t, int64(2), p.nLedgers.Load())
	assert.True(t, has(a), "the run in flight keeps its ledger, though extended before the complete one")
	assert.False(t, has(b), "the complete trace's ledger ended")
	assert.True(t, has(c))

	send(d.td) // only runs in flight are left: the least recently extended ends
	assert.False(t, has(a))
	assert.True(t, has(c))
	assert.Equal(t, int64(2), releasedBy(t, tel, "capacity"))
	require.NoError(t, p.Shutdown(context.Background()))
}

// A run that goes quiet (a slow tool) while short runs complete around it is the least
// recently extended trace, but still in flight. Random agent runs, some of them slow,
// sent as their spans end, interleaved, with room for a few ledgers more than the runs
// in flight: every dispatcher's last version is exact and every task span ends merged,
// although capacity ends ledgers all along.
func TestStreamCapacityKeepsRunsInFlightExact(t *testing.T) {
	var released int64
	for seed := uint64(1); seed <= 30; seed++ {
		r := rand.New(rand.NewPCG(seed, 21))
		const runs, inFlight = 30, 5
		cfg := streamTestConfig()
		cfg.NumTraces = inFlight + 2
		p, sink, tel := newTestProcessor(t, cfg)
		want := map[pcommon.SpanID]genai.Usage{}
		type run struct {
			spans  []ptrace.Traces
			weight int // how often it is picked: a slow run sends seldom
		}
		var all []run
		spans := 0
		for i := range runs {
			td, w := randomAgentTraceWithWant(r, seed*1_000+uint64(i), true)
			maps.Copy(want, w)
			spans += td.SpanCount()
			all = append(all, run{spans: realTime(td), weight: []int{1, 10}[r.IntN(2)]})
		}
		active := all[:inFlight:inFlight]
		next := inFlight
		for len(active) > 0 {
			total := 0
			for _, a := range active {
				total += a.weight
			}
			pick := r.IntN(total)
			i := 0
			for ; pick >= active[i].weight; i++ {
				pick -= active[i].weight
			}
			n := min(1+r.IntN(3), len(active[i].spans))
			batch := ptrace.NewTraces()
			for _, sp := range active[i].spans[:n] {
				sp.ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
			}
			active[i].spans = active[i].spans[n:]
			require.NoError(t, p.ConsumeTraces(context.Background(), batch))
			if len(active[i].spans) == 0 {
				if next < len(all) {
					active[i] = all[next]
					next++
				} else {
					active = append(active[:i], active[i+1:]...)
				}
			}
		}
		require.NoError(t, p.Shutdown(context.Background()))
		released += releasedBy(t, tel, "capacity")
		msg := fmt.Sprintf("seed %d", seed)
		assertExactAtSink(t, sink.AllTraces(), want, msg)
		last, _ := upserted(sink.AllTraces())
		require.Len(t, last, spans, msg)
		requireTasksMerged(t, last, msg)
	}
	require.Positive(t, released, "capacity must have ended ledgers, or the test says nothing")
}

// Concurrent requests, as several senders make them: every capacity decision still ends
// a complete trace's ledger while there is one. Four senders keep 25 runs each in
// flight (the bench's DeerFlow-shaped runs, spans in the order they end, a few of each
// run per request), with room for 30 ledgers more than the runs in flight: no task span
// may be marked orphan, as none would be without a capacity.
func TestStreamCapacityUnderConcurrentRequests(t *testing.T) {
	cfg := streamTestConfig()
	const senders, inFlight = 4, 25
	cfg.NumTraces = senders*inFlight + 30
	p, sink, tel := newTestProcessor(t, cfg)
	var traceNo atomic.Uint64
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 3))
			runs := make([]flight, inFlight)
			for i := range runs {
				runs[i] = flight{run: agentrun.New(r, traceNo.Add(1))}
			}
			for sent := 0; sent < 8000; {
				td := ptrace.NewTraces()
				for i := range runs {
					before := runs[i].pos
					done := runs[i].next(td, 1+r.IntN(4))
					sent += runs[i].pos - before
					if done {
						runs[i] = flight{run: agentrun.New(r, traceNo.Add(1))}
					}
				}
				assert.NoError(t, p.ConsumeTraces(context.Background(), td))
			}
		})
	}
	wg.Wait()
	require.NoError(t, p.Shutdown(context.Background()))
	require.Positive(t, releasedBy(t, tel, "capacity"), "capacity must have ended ledgers, or the test says nothing")
	orphans := 0
	for sp := range spaniter.In(sink.AllTraces()) {
		if v, ok := sp.Attributes().Get(genai.AttrMergeStatus); ok && v.Str() == genai.MergeOrphan {
			orphans++
		}
	}
	assert.Zero(t, orphans, "task spans marked orphan: ledgers of runs in flight ended")
}

// flight is a run being sent, a few spans a request, in the order they end.
type flight struct {
	run agentrun.Run
	pos int // spans sent so far
}

// next appends the run's next n spans (fewer at its end) to td, in a resource of their
// own, and reports whether the run has no span left.
func (f *flight) next(td ptrace.Traces, n int) bool {
	if f.pos < len(f.run.Spans) {
		rs := td.ResourceSpans().AppendEmpty()
		f.run.Traces.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		for end := min(f.pos+n, len(f.run.Spans)); f.pos < end; f.pos++ {
			f.run.Spans[f.pos].CopyTo(ss.Spans().AppendEmpty())
		}
	}
	return f.pos == len(f.run.Spans)
}
