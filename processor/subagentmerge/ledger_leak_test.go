package subagentmerge

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/bench/agentrun"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// Nothing a stream-mode processor keeps per trace outlives the trace: concurrent senders,
// a next consumer that answers after a random wait with success, a retryable refusal, a
// permanent refusal or a partial refusal (consumererror.Traces naming some of the traces
// sent), room for a few ledgers only (num_traces and ledger bytes), and a clock the test
// moves, so that requests, sweeps, ends for room and for idleness, revivals and
// reinstatements interleave. Once every call and sweep is answered nothing waits on a
// ledger and no ledger is ending; once every trace idled past wait_duration and the
// sweeps ran, no ledger is left: the gauges (ledger_traces, ledger_bytes) are back to 0,
// the shards' maps and chains are empty and, with storage, no chunk or end marker is
// held or stored.
func TestPropertyLedgersAllEndUnderRefusals(t *testing.T) {
	for _, storage := range []string{"off", "on", "flaky"} {
		for _, bg := range []bool{false, true} {
			for seed := uint64(1); seed <= 4; seed++ {
				t.Run(fmt.Sprintf("storage %s/background sweeper %v/seed %d", storage, bg, seed), func(t *testing.T) {
					ledgersAllEnd(t, seed, storage, bg)
				})
			}
		}
	}
}

// ledgersAllEnd runs the senders with storage "off", "on" or "flaky" (on, its writes
// failing now and then while the senders send, as a full disk does).
func ledgersAllEnd(t *testing.T, seed uint64, storage string, bgSweeper bool) {
	stored := storage != "off"
	ctx := context.Background()
	const senders, inFlight, requests = 4, 5, 50
	cfg := streamTestConfig()
	cfg.NumTraces = 6
	cfg.SettleTime = 3 * time.Millisecond
	cfg.WaitDuration = 25 * time.Millisecond
	cfg.CompactAfter = 5 * time.Millisecond

	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, 99))
	var calm atomic.Bool
	var nRefused, nPermanent, nPartial atomic.Int64
	sink := new(consumertest.TracesSink)
	next, err := consumer.NewTraces(func(c context.Context, td ptrace.Traces) error {
		mu.Lock()
		wait, answer, pick := time.Duration(r.IntN(1200))*time.Microsecond, r.IntN(10), r.Uint64()
		mu.Unlock()
		time.Sleep(wait)
		if calm.Load() {
			return sink.ConsumeTraces(c, td)
		}
		switch answer {
		case 0, 1:
			nRefused.Add(1)
			return errors.New("sending queue is full")
		case 2:
			nPermanent.Add(1)
			return consumererror.NewPermanent(errors.New("bad data"))
		case 3:
			// the first pieces taken, the rest (some traces) not
			ids := traceIDsIn(td)
			left := map[pcommon.TraceID]bool{}
			i := uint64(0)
			for id := range ids {
				if (pick>>(i%64))&1 == 1 || len(left) == 0 {
					left[id] = true
				}
				i++
			}
			rest := only(td, func(sp ptrace.Span) bool { return left[sp.TraceID()] })
			if rest.SpanCount() == 0 {
				return sink.ConsumeTraces(c, td)
			}
			nPartial.Add(1)
			return consumererror.NewTraces(errors.New("sending queue is full"), rest)
		}
		return sink.ConsumeTraces(c, td)
	})
	require.NoError(t, err)

	var st *storagetest.Storage
	var host component.Host
	if stored {
		st = storagetest.New()
		cfg.Storage = &storageID
		host = st.Host(storageID)
	}
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, next)
	require.NoError(t, err)
	// before Start: the sweeper reads the clock
	p.maxLedgerBytes = 24 << 10 // room for a few ledgers by bytes too
	clock := stepClock(p)
	require.NoError(t, p.Start(ctx, host))
	if !bgSweeper {
		// only the test sweeps, so that it knows when nothing is in flight
		stopSweeper(p)
	}

	// the test's own sweeper, on the test's clock, while the senders send
	stopSweeps := make(chan struct{})
	var sweeps sync.WaitGroup
	sweeps.Go(func() {
		for {
			select {
			case <-stopSweeps:
				return
			default:
			}
			_ = p.sweepStream(ctx, clock.Load())
			time.Sleep(time.Millisecond)
		}
	})

	if storage == "flaky" {
		full := errors.New("no space left on device")
		sweeps.Go(func() {
			rd := rand.New(rand.NewPCG(seed, 7))
			for {
				select {
				case <-stopSweeps:
					st.Fail(nil)
					return
				default:
				}
				if rd.IntN(3) == 0 {
					st.Fail(full)
				} else {
					st.Fail(nil)
				}
				time.Sleep(time.Duration(1+rd.IntN(3)) * time.Millisecond)
			}
		})
	}

	var traceNo atomic.Uint64
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() {
			rw := rand.New(rand.NewPCG(seed, uint64(w)))
			newRun := func() agentrun.Run {
				if rw.IntN(2) == 0 {
					return agentrun.Untraced(rw, traceNo.Add(1))
				}
				return agentrun.New(rw, traceNo.Add(1))
			}
			runs := make([]flight, inFlight)
			for i := range runs {
				runs[i] = flight{run: newRun()}
			}
			send := func(td ptrace.Traces) {
				for td.SpanCount() > 0 {
					clock.Add(int64(rw.IntN(2000)) * int64(time.Microsecond))
					err := p.ConsumeTraces(ctx, clone(td))
					if err == nil || consumererror.IsPermanent(err) {
						return // taken, or dropped by the sender
					}
				}
			}
			for range requests {
				td := ptrace.NewTraces()
				for i := range runs {
					if rw.IntN(3) == 0 {
						continue
					}
					if runs[i].next(td, 1+rw.IntN(4)) {
						runs[i] = flight{run: newRun()}
					}
				}
				send(td)
				if rw.IntN(6) == 0 {
					// a run goes quiet past wait_duration, then goes on
					clock.Add(int64(cfg.WaitDuration))
				}
				if rw.IntN(5) == 0 {
					time.Sleep(time.Duration(rw.IntN(3)) * time.Millisecond)
				}
			}
			for i := range runs {
				td := ptrace.NewTraces()
				runs[i].next(td, len(runs[i].run.Spans))
				send(td)
			}
		})
	}
	wg.Wait()
	close(stopSweeps)
	sweeps.Wait()
	calm.Store(true)
	require.Positive(t, nRefused.Load(), "nothing was refused: the test says nothing")
	t.Logf("refused %d, permanent %d, partial %d", nRefused.Load(), nPermanent.Load(), nPartial.Load())

	if !bgSweeper {
		// every call and sweep is answered: nothing waits, nothing is ending
		nothingWaits(t, p)
		nothingEnding(t, p)
		ledgerBytesAddUp(t, p)
	}

	// every trace idles past wait_duration (and past a refused end's backoff); the
	// sweeps end every ledger. A background sweep may hold a ledger (waiting) for as
	// long as its send takes, which outlasts many sweeps that send nothing: those
	// sweeps wait a little.
	var trail []string
	for i := 0; i < 200 && (p.nLedgers.Load() > 0 || endingCount(p) > 0); i++ {
		clock.Add(int64(cfg.WaitDuration) + int64(minUnsentBackoff) + int64(cfg.SettleTime))
		require.NoError(t, p.sweepStream(ctx, clock.Load()))
		trail = append(trail, fmt.Sprintf("sweep %d: %d ledgers%s", i, p.nLedgers.Load(), describeLedgers(p)))
		if bgSweeper {
			time.Sleep(time.Millisecond)
		}
	}
	defer func() {
		if t.Failed() {
			for _, s := range trail[max(0, len(trail)-5):] {
				t.Log(s)
			}
		}
	}()
	if stored {
		// the deletions a failing disk refused go with the next write: the sweeper's
		// write once a second (and Shutdown's), here at once
		require.NoError(t, p.store.write(ctx, 0, nil))
	}
	if bgSweeper {
		// a background sweep may still be in flight: Shutdown waits for it
		require.NoError(t, p.Shutdown(ctx))
	}
	allEnded(t, p, st)
	if !bgSweeper {
		require.NoError(t, p.Shutdown(ctx))
	}
}

// nothingEnding checks that no shard holds an ended ledger whose ender waits for an
// answer: every call and sweep was answered.
func nothingEnding(t *testing.T, p *subagentMerge) {
	t.Helper()
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for id, l := range s.led.ending {
			assert.Fail(t, "an ended ledger stays ending", "trace %s, waiting %d, revived %v", id, l.waiting, l.revived)
		}
		for _, l := range s.led.byID {
			assert.False(t, l.revived, "ledger %s: revived, though its ender was answered", l.id)
		}
		s.mu.Unlock()
	}
}

// allEnded checks that p holds no ledger and counts none, and, with storage, holds and
// stores no ledger chunk or end marker.
func allEnded(t *testing.T, p *subagentMerge, st *storagetest.Storage) {
	t.Helper()
	assert.Zero(t, p.nLedgers.Load(), "ledger_traces")
	assert.Zero(t, p.ledgerBytes.Load(), "ledger_bytes")
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for id, l := range s.led.byID {
			assert.Fail(t, "a ledger never ends", "trace %s: waiting %d, dueAt %d, lastSeen %d, lastEmit %d, revived %v, complete %v, pending %d, settledAt %d, kept %d",
				id, l.waiting, l.dueAt, l.lastSeen, l.lastEmit, l.revived, l.complete, l.pending, len(l.settledAt), len(l.kept))
		}
		assert.Empty(t, s.led.ending, "shard %d: ending", i)
		assert.True(t, s.led.lru.head == nil, "shard %d: lru chain", i)
		assert.True(t, s.led.done.head == nil, "shard %d: done chain", i)
		assert.True(t, s.led.due.head == nil, "shard %d: due chain", i)
		for n := range s.led.hot {
			assert.True(t, s.led.hot[n].head == nil, "shard %d: hot chain %d", i, n)
		}
		s.mu.Unlock()
	}
	if st == nil {
		return
	}
	ps := p.store
	ps.refMu.Lock()
	assert.Empty(t, ps.refs, "chunks still counted as held")
	assert.Empty(t, ps.drawn, "sequence numbers drawn and never written or given back")
	ps.refMu.Unlock()
	ps.mu.Lock()
	assert.Empty(t, ps.unwritten)
	assert.Empty(t, ps.retry)
	assert.Empty(t, ps.endLeft, "end markers counted as live")
	assert.Empty(t, ps.endsOn)
	ps.mu.Unlock()
	assert.Zero(t, st.Count(prefixStream+"chunk/"), "ledger chunks left on disk")
	assert.Zero(t, st.Count(prefixStream+"end/"), "end markers left on disk")
}

// describeLedgers says, for a failing test, what holds each ledger left.
func describeLedgers(p *subagentMerge) string {
	var out string
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for id, l := range s.led.byID {
			out += fmt.Sprintf("\n  live %s: waiting %d, dueAt %d, lastSeen %d, lastEmit %d, revived %v, pending %d, settledAt %d", id, l.waiting, l.dueAt, l.lastSeen, l.lastEmit, l.revived, l.pending, len(l.settledAt))
		}
		for id, l := range s.led.ending {
			out += fmt.Sprintf("\n  ending %s: waiting %d, revived %v", id, l.waiting, l.revived)
		}
		s.mu.Unlock()
	}
	return out
}

// endingCount is how many ended ledgers wait for their ender's answer.
func endingCount(p *subagentMerge) int {
	n := 0
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		n += len(s.led.ending)
		s.mu.Unlock()
	}
	return n
}
