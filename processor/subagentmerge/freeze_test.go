package subagentmerge

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// ledgerOf returns trace id's ledger.
func ledgerOf(t testing.TB, p *subagentMerge, id pcommon.TraceID) *ledger {
	t.Helper()
	s := &p.shards[shardIndex(id)]
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.led.byID[id]
	require.NotNil(t, l)
	return l
}

// parallelLedger is a stream-mode processor that has the parallel trace without its
// root, and that trace's ledger and shard.
func parallelLedger(t testing.TB) (*subagentMerge, *consumertest.TracesSink, ptrace.Traces, *ledger, *shard) {
	t.Helper()
	p, sink, _ := newTestProcessor(t, streamTestConfig())
	full := buildParallel()
	id := full.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(full)))
	return p, sink, full, ledgerOf(t, p, id), &p.shards[shardIndex(id)]
}

// A frozen ledger is smaller, thaws to exactly what it held, and the trace's later
// spans merge onto it exactly.
func TestFrozenLedgerThawsAndMergesOn(t *testing.T) {
	p, sink, full, l, s := parallelLedger(t)
	s.mu.Lock()
	skel := append([][]byte(nil), l.skel...)
	kept := map[pcommon.SpanID][]byte{}
	for sid, k := range l.kept {
		kept[sid] = bytes.Clone(k.enc)
	}
	require.NotEmpty(t, kept, "the dispatchers are kept")
	before := l.cost()
	if l.scheduled() {
		s.led.unschedule(l) // a dirty ledger is not frozen; here it must be
	}
	p.freezeIdle(s, math.MaxInt64)
	require.NotNil(t, l.cold, "frozen")
	assert.Nil(t, l.skel)
	assert.Less(t, l.cost(), before, "frozen is smaller")
	assert.Equal(t, l.cost(), l.size, "the budget counts the frozen size")
	require.NoError(t, l.thaw())
	assert.Equal(t, skel, l.skel)
	for sid, k := range l.kept {
		assert.Equal(t, kept[sid], k.enc, "kept span %s", sid)
	}
	l.freeze() // frozen again for what comes next
	require.NotNil(t, l.cold)
	s.mu.Unlock()

	require.NoError(t, p.ConsumeTraces(context.Background(), only(full, isLocalRoot)))
	assert.Nil(t, ledgerOf(t, p, l.id).cold, "new spans thaw it")
	require.NoError(t, p.Shutdown(context.Background()))
	out := canonical(lastVersions(sink.AllTraces()...)...)
	assertSubagent(t, spanByCalls(t, out, "call_a", "call_b"), genai.Usage{Input: 30, Output: 12}, 2, "call_a", "call_b")
}

// A frozen block cut short does not thaw, and says so.
func TestFrozenLedgerCutShortDoesNotThaw(t *testing.T) {
	l := &ledger{kept: map[pcommon.SpanID]*keptSpan{{1}: {enc: []byte("span")}}}
	l.addSkel([]byte("part one"), nil)
	l.freeze()
	require.NotNil(t, l.cold)
	l.cold = l.cold[:len(l.cold)-2]
	require.ErrorIs(t, l.thaw(), errFrozen)
}

// stopSweeper stops p's sweeper for a test that sweeps itself, or must see p hold
// still between its calls; Shutdown does the rest.
func stopSweeper(p *subagentMerge) {
	close(p.stop)
	p.cancelSweep()
	<-p.done
	p.started.Store(false)
}

// ledgerBytesAddUp checks that what counts against ledger_limit_mib is what the ledgers
// hold: a drift would end ledgers for room they do not take, ever earlier.
func ledgerBytesAddUp(t *testing.T, p *subagentMerge) {
	t.Helper()
	var sum, n int64
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for _, l := range s.led.byID {
			n++
			sum += l.cost()
			assert.Equal(t, l.cost(), l.size, "a ledger's counted size is its cost")
		}
		s.mu.Unlock()
	}
	assert.Equal(t, n, p.nLedgers.Load())
	assert.Equal(t, sum, p.ledgerBytes.Load(), "ledger bytes add up")
}

// Over the benchmark's agent runs, completing in the calls that bring their last spans
// (re-emitting as they go), with and without freezing between calls, and after the
// least recently extended ledgers end for room, the bytes counted are the bytes held.
func TestLedgerBytesAddUp(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		t.Run(map[bool]string{false: "thawed", true: "frozen"}[frozen], func(t *testing.T) {
			cfg := streamTestConfig()
			p, _, _ := newTestProcessor(t, cfg)
			stopSweeper(p) // its freezes would move bytes while they are added up
			batches, _ := benchWorkload(false)
			for i, td := range batches {
				require.NoError(t, p.ConsumeTraces(context.Background(), td))
				if frozen {
					freezeAll(p)
				}
				if i == len(batches)/2 {
					ledgerBytesAddUp(t, p)
					// end the older half for room, as ledger_limit_mib does
					p.maxLedgerBytes = p.ledgerBytes.Load() / 2
				}
			}
			ledgerBytesAddUp(t, p)
			require.NoError(t, p.Shutdown(context.Background()))
		})
	}
}

// A ledger that ended is thawed for the call that still holds it, but not put back
// among the live ones: freezing it again would count its bytes back.
func TestWarmLeavesAnEndedLedgerOut(t *testing.T) {
	p, _, _, l, s := parallelLedger(t)
	s.mu.Lock()
	l.freeze()
	p.endLedger(s, l, ptrace.NewTraces(), &counts{}, p.now(), relCapacity)
	require.NoError(t, p.warm(s, l, p.now()))
	assert.Nil(t, l.cold, "thawed for the caller")
	assert.False(t, s.led.hot.has(l), "not among the live ledgers")
	s.mu.Unlock()
	ledgerBytesAddUp(t, p)
	require.NoError(t, p.Shutdown(context.Background()))
}

// A call that brings only spans a frozen ledger has already thaws it, and the budget
// (ledger_limit_mib) counts what it holds then.
func TestDuplicatesThawAFrozenLedgerAndAreCounted(t *testing.T) {
	p, _, full, l, s := parallelLedger(t)
	s.mu.Lock()
	if l.scheduled() {
		s.led.unschedule(l)
	}
	p.freezeIdle(s, math.MaxInt64)
	require.NotNil(t, l.cold, "frozen")
	s.mu.Unlock()
	require.NoError(t, p.ConsumeTraces(context.Background(), withoutRoot(full)), "a sender's retry: all duplicates")
	ledgerBytesAddUp(t, p)
	require.NoError(t, p.Shutdown(context.Background()))
}

// BenchmarkFreezeThaw freezes and thaws the ledger of the parallel trace without its
// root, as the sweeper freezes an idle ledger and a later call thaws it: read B/op, the
// garbage each freeze leaves besides the block it keeps.
func BenchmarkFreezeThaw(b *testing.B) {
	p, _, _, l, s := parallelLedger(b)
	s.mu.Lock()
	if l.scheduled() {
		s.led.unschedule(l)
	}
	b.ReportAllocs()
	for b.Loop() {
		l.freeze()
		if err := l.thaw(); err != nil {
			b.Fatal(err)
		}
	}
	s.mu.Unlock()
	require.NoError(b, p.Shutdown(context.Background()))
}

// A long run whose spans come seconds apart (each more than compact_after after the
// last) thaws its ledger a few times in its life, not at every span: each thaw doubles
// how long the ledger stays thawed after its last use, up to compact_after·2⁶. A ledger
// that nothing needs again still freezes, and its run merges exactly.
func TestSlowRunThawsItsLedgerSeldom(t *testing.T) {
	cfg := streamTestConfig()
	cfg.WaitDuration = 24 * time.Hour
	p, sink, _ := newTestProcessor(t, cfg)
	stopSweeper(p)
	clock := int64(1_000_000_000)
	p.now = func() int64 { return clock }
	batches := slowRun(1, 60, false)
	id := batches[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	s := &p.shards[shardIndex(id)]
	thaws := 0
	for _, td := range batches {
		clock += int64(3 * time.Second)
		require.NoError(t, p.sweepStream(context.Background(), clock))
		s.mu.Lock()
		l := s.led.byID[id]
		cold := l != nil && l.cold != nil
		s.mu.Unlock()
		require.NoError(t, p.ConsumeTraces(context.Background(), td))
		if cold {
			thaws++
		}
	}
	// 3 s apart: frozen after 1 s, 2 s (both before the next span), then thawed for 4 s
	// and more, longer than the gaps
	assert.Equal(t, 2, thaws, "of %d spans", len(batches))
	l := ledgerOf(t, p, id)
	assert.Equal(t, uint8(2), l.thaws)

	// quiet past compact_after·2²: it freezes
	clock += int64(4*time.Second) + 1
	require.NoError(t, p.sweepStream(context.Background(), clock))
	s.mu.Lock()
	assert.NotNil(t, l.cold, "frozen once nothing needed it for its time")
	s.mu.Unlock()
	ledgerBytesAddUp(t, p)
	require.NoError(t, p.Shutdown(context.Background()))

	out := canonical(lastVersions(sink.AllTraces()...)...)
	for i := 3; i < 60; i += 4 {
		call := fmt.Sprintf("call_%d", i)
		assertSubagent(t, spanByCalls(t, out, call), genai.Usage{Input: 700, Output: 70}, 1, call)
	}
}

// slowRunsAtOnce sends runs slow runs interleaved, one span of each in turn, 3 s between
// two spans of a run, sweeping before each span; with freezeAll it also freezes every
// ledger idle for compact_after, whatever its thaws (as before thaws doubled it). It
// returns the most ledger bytes counted, how many ledgers ended, and what went out.
func slowRunsAtOnce(t *testing.T, runs int, limit int64, freezeAll bool) (peak int64, ended int, out ptrace.Traces) {
	cfg := streamTestConfig()
	cfg.WaitDuration = time.Hour
	p, sink, _ := newTestProcessor(t, cfg)
	stopSweeper(p)
	if limit > 0 {
		p.maxLedgerBytes = limit
	}
	clock := int64(1_000_000_000)
	p.now = func() int64 { return clock }
	var queues [][]ptrace.Traces
	for r := range runs {
		queues = append(queues, slowRun(uint64(r+1), 40, false))
	}
	started := 0
	for k := 0; ; k++ {
		sent := false
		for r := range queues {
			if k >= len(queues[r]) {
				continue
			}
			sent = true
			clock += int64(3*time.Second) / int64(runs)
			require.NoError(t, p.sweepStream(context.Background(), clock))
			if freezeAll {
				for i := range p.shards {
					s := &p.shards[i]
					s.mu.Lock()
					p.freezeForRoom(s, clock)
					s.mu.Unlock()
				}
			}
			require.NoError(t, p.ConsumeTraces(context.Background(), queues[r][k]))
			if k == 0 {
				started++
			}
			peak = max(peak, p.ledgerBytes.Load())
			ended = max(ended, started-int(p.nLedgers.Load()))
		}
		if !sent {
			break
		}
	}
	require.NoError(t, p.Shutdown(context.Background()))
	return peak, ended, canonical(lastVersions(sink.AllTraces()...)...)
}

// Ledgers a thaw keeps thawed longer give their room back before any ledger ends for it:
// 40 slow runs at once fit a ledger_limit_mib that fits them when every idle ledger
// freezes after compact_after, and every dispatcher ends merged. (Found by review:
// thawed ledgers ended runs in flight, and 10–15 dispatchers lost their subagents'
// usage.)
func TestThawedLedgersGiveRoomBackBeforeRunsEnd(t *testing.T) {
	const runs = 40
	frozenPeak, _, _ := slowRunsAtOnce(t, runs, 0, true)
	thawedPeak, _, _ := slowRunsAtOnce(t, runs, 0, false)
	require.Greater(t, thawedPeak, frozenPeak, "thaws keep ledgers thawed longer")
	_, ended, out := slowRunsAtOnce(t, runs, frozenPeak*5/4, false)
	assert.Zero(t, ended, "no ledger of a run in flight ended for room")
	wrong := 0
	for i := 3; i < 40; i += 4 {
		call := fmt.Sprintf("call_%d", i)
		for sp := range spaniter.All(out) {
			if slices.Contains(genai.StringsFromMap(sp.Attributes(), genai.AttrResponseToolCallIDs), call) {
				if u, _ := genai.SubagentUsageFromMap(sp.Attributes()); u != (genai.Usage{Input: 700, Output: 70}) {
					wrong++
				}
			}
		}
	}
	assert.Zero(t, wrong, "dispatchers without their subagent's usage")
}
