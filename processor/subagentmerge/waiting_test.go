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
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/bench/agentrun"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// A ledger a call waits on at the next consumer is not ended for room (ledger.waiting).
// Trace t1's call A waits there while call B, of a new trace t2, needs room (num_traces
// 1): t1's ledger stays. A is either the root that settles t1's waiting calls (they came
// in a call taken before), or the first call of t1, with the waiting calls themselves.
// Whatever each of A and B is answered, in either order, after the senders' retries and
// the rest of both runs every span is counted once: an ended ledger would lose what a
// refused A settled, or settle and count A's calls, which A's retry then brings again
// into a new ledger. With storage, the same holds across a kill -9 and a restart after
// the answers.
func TestLedgerACallWaitsOnIsNotEnded(t *testing.T) {
	refusal := errors.New("sending queue is full")
	for _, a := range []string{"settling", "own"} {
		for _, errA := range []error{nil, refusal} {
			for _, errB := range []error{nil, refusal} {
				for _, bFirst := range []bool{false, true} {
					for _, stored := range []bool{false, true} {
						name := fmt.Sprintf("%s/A %v/B %v/B answered first %v/storage %v", a, errA != nil, errB != nil, bFirst, stored)
						t.Run(name, func(t *testing.T) {
							callWaitsWhileAnotherNeedsRoom(t, a == "own", errA, errB, bFirst, stored)
						})
					}
				}
			}
		}
	}
}

func callWaitsWhileAnotherNeedsRoom(t *testing.T, own bool, errA, errB error, bFirst, stored bool) {
	bg := context.Background()
	t1, t2 := buildParallel(), buildNested()
	id1, id2 := traceIDOf(t1), traceIDOf(t2)
	p, g, st, cfg := roomForOne(t, stored)

	callA := withoutRoot(t1)
	if !own {
		require.NoError(t, p.ConsumeTraces(bg, callA))
		require.Positive(t, pendingCalls(p, t1), "t1's calls wait for their caller")
		callA = only(t1, isLocalRoot)
	}
	gA, resA := atGate(p, g, id1, errA, clone(callA))
	if own {
		require.Positive(t, pendingCalls(p, t1), "A's calls wait for their caller")
	} else {
		require.Zero(t, pendingCalls(p, t1), "A settled t1's calls")
	}
	callB := withoutRoot(t2)
	gB, resB := atGate(p, g, id2, errB, clone(callB))
	require.NotNil(t, liveLedger(p, id1), "B ended the ledger A waits on")
	answer := func(gate *gateOne, res chan error, want error) {
		close(gate.release)
		if want != nil {
			require.Error(t, <-res)
		} else {
			require.NoError(t, <-res)
		}
	}
	if bFirst {
		answer(gB, resB, errB)
		answer(gA, resA, errA)
	} else {
		answer(gA, resA, errA)
		answer(gB, resB, errB)
	}
	nothingWaits(t, p)
	ledgerBytesAddUp(t, p)

	// the senders' retries, then the rest of both runs
	if errA != nil {
		require.NoError(t, p.ConsumeTraces(bg, clone(callA)), "A's retry")
	}
	if errB != nil {
		require.NoError(t, p.ConsumeTraces(bg, clone(callB)), "B's retry")
	}
	if own {
		require.NoError(t, p.ConsumeTraces(bg, only(t1, isLocalRoot)))
	}
	require.NoError(t, p.ConsumeTraces(bg, only(t2, isLocalRoot)))
	assert.LessOrEqual(t, p.nLedgers.Load(), int64(cfg.NumTraces), "once nothing waits, a call makes room again")
	nothingWaits(t, p)
	ledgerBytesAddUp(t, p)

	var counted []ptrace.Span
	if stored {
		_, _, counted = killAndRestart(t, p, g, st, cfg, nil)
	} else {
		require.NoError(t, p.Shutdown(bg))
		_, counted = upserted(g.sink.AllTraces())
	}
	assertEachCountedOnce(t, counted, t1, t2)
}

// A ledger the sweeper waits on is not ended for room either: its re-emission settles
// t1's calls and waits at the next consumer while call B, of a new trace, needs room.
// The sweep is refused, or taken; either way each span of both runs is counted once.
func TestLedgerASweepWaitsOnIsNotEnded(t *testing.T) {
	for _, refused := range []bool{false, true} {
		t.Run(fmt.Sprintf("sweep refused %v", refused), func(t *testing.T) {
			bg := context.Background()
			t1, last := runWithLastCallLater(81)
			t2 := buildNested()
			id1 := traceIDOf(t1)
			cfg := streamTestConfig()
			cfg.NumTraces = 1
			p, g := gated(t, cfg, nil)
			clock := stepClock(p)
			isLast := func(sp ptrace.Span) bool { return sp.SpanID() == last }
			require.NoError(t, p.ConsumeTraces(bg, only(withoutRoot(t1), func(sp ptrace.Span) bool { return !isLast(sp) })))
			require.NoError(t, p.ConsumeTraces(bg, only(t1, isLocalRoot)))
			require.Positive(t, pendingCalls(p, t1), "the settle waits for the sweep")

			var errSweep error
			if refused {
				errSweep = errors.New("sending queue is full")
			}
			gate := g.arm(id1, errSweep)
			clock.Add(int64(cfg.SettleTime))
			swept := make(chan error, 1)
			go func() { swept <- p.sweepStream(bg, clock.Load()) }()
			<-gate.entered
			require.Zero(t, pendingCalls(p, t1), "the sweep settled t1's calls")
			require.NoError(t, p.ConsumeTraces(bg, withoutRoot(t2)), "B")
			require.NotNil(t, liveLedger(p, id1), "B ended the ledger the sweep waits on")
			close(gate.release)
			if refused {
				require.Error(t, <-swept)
				clock.Add(int64(cfg.SettleTime))
				require.NoError(t, p.sweepStream(bg, clock.Load()), "the next sweep sends them again")
			} else {
				require.NoError(t, <-swept)
			}
			nothingWaits(t, p)
			ledgerBytesAddUp(t, p)
			require.NoError(t, p.ConsumeTraces(bg, only(t1, isLast)))
			require.NoError(t, p.ConsumeTraces(bg, only(t2, isLocalRoot)))
			require.NoError(t, p.Shutdown(bg))
			_, counted := upserted(g.sink.AllTraces())
			assertEachCountedOnce(t, counted, t1, t2)
		})
	}
}

// nothingWaits checks that once every call and sweep was answered no ledger counts one
// waiting on it, none holds a settled call whose answer is awaited, and the due chain
// holds only ledgers of the shard.
func nothingWaits(t *testing.T, p *subagentMerge) {
	t.Helper()
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for id, l := range s.led.byID {
			assert.Zero(t, l.waiting, "ledger %s: something waits on it", id)
			assert.Empty(t, l.settledAt, "ledger %s: settled calls wait for an answer that came", id)
		}
		for l := s.led.due.head; l != nil; l = s.led.due.next(l) {
			assert.Same(t, s.led.byID[l.id], l, "a ledger on the due chain that the shard does not hold")
		}
		s.mu.Unlock()
	}
}

// assertEachCountedOnce checks that counted (the versions the token metrics count) has
// every span of runs once.
func assertEachCountedOnce(t *testing.T, counted []ptrace.Span, runs ...ptrace.Traces) {
	t.Helper()
	n := map[pcommon.SpanID]int{}
	for _, sp := range counted {
		n[sp.SpanID()]++
	}
	want := 0
	for _, td := range runs {
		for _, sp := range appendSpans(nil, td) {
			want++
			assert.Equal(t, 1, n[sp.SpanID()], "span %s (%s) counted %d times", sp.SpanID(), sp.Name(), n[sp.SpanID()])
		}
	}
	assert.Len(t, counted, want, "versions counted")
}

// A ledger idle for wait_duration ends in a sweep: its last re-emissions settle the calls
// that still wait for their caller (the run's root never came). The next consumer
// refuses them: the ledger is taken back, its calls wait again, and the next sweep after
// settle_time ends it again; the calls are counted once.
func TestIdleEndRefusedEndsAgain(t *testing.T) {
	bg := context.Background()
	t1 := withoutRoot(buildParallel())
	id1 := traceIDOf(t1)
	cfg := streamTestConfig()
	p, g := gated(t, cfg, nil)
	clock := stepClock(p)
	require.NoError(t, p.ConsumeTraces(bg, clone(t1)))
	waiting := pendingCalls(p, t1)
	require.Positive(t, waiting)

	gate := g.arm(id1, errors.New("sending queue is full"))
	close(gate.release)
	clock.Add(int64(cfg.WaitDuration) + 1)
	require.Error(t, p.sweepStream(bg, clock.Load()), "the idle end's re-emissions are refused")
	require.NotNil(t, liveLedger(p, id1), "the ledger is taken back")
	assert.Equal(t, waiting, pendingCalls(p, t1), "its calls wait for their caller again")
	ledgerBytesAddUp(t, p)
	require.NoError(t, p.sweepStream(bg, clock.Load()), "not due again yet")
	require.NotNil(t, liveLedger(p, id1))

	clock.Add(int64(cfg.SettleTime))
	require.NoError(t, p.sweepStream(bg, clock.Load()))
	require.Nil(t, liveLedger(p, id1), "ended again, its re-emissions taken")
	nothingWaits(t, p)
	ledgerBytesAddUp(t, p)
	require.NoError(t, p.Shutdown(bg))
	_, counted := upserted(g.sink.AllTraces())
	assertEachCountedOnce(t, counted, t1)
}

// Concurrent senders, a next consumer that refuses a quarter of the calls and the
// sweeper's sends at random (each after a short wait, so calls overlap there), room for
// fewer ledgers than runs in flight, and re-emissions every few milliseconds: every
// span of every run is counted exactly once, over seeds. Half the runs name no callers
// (their model calls wait for their caller until the trace's shape settles it, or the
// ledger ends), so requests, sweeps and ends for room and for idleness settle calls
// while other requests and sweeps of the same traces wait at the next consumer. With
// storage, the processor is then stopped and started again on it: a restart must not
// settle, and count, a call again.
func TestPropertyRefusalsUnderCapacityCountOnce(t *testing.T) {
	for _, stored := range []bool{false, true} {
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("storage %v/seed %d", stored, seed), func(t *testing.T) {
				refusalsUnderCapacity(t, seed, stored)
			})
		}
	}
}

func refusalsUnderCapacity(t *testing.T, seed uint64, stored bool) {
	bg := context.Background()
	const senders, inFlight = 3, 6
	cfg := streamTestConfig()
	cfg.NumTraces = senders * inFlight / 2
	cfg.SettleTime = 3 * time.Millisecond
	cfg.WaitDuration = 40 * time.Millisecond
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, 11))
	var calm atomic.Bool // at the end: nothing refused, so shutdown's sends are taken
	var refused atomic.Int64
	sink := new(consumertest.TracesSink)
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		mu.Lock()
		wait, refuse := time.Duration(r.IntN(1500))*time.Microsecond, r.IntN(4) == 0
		mu.Unlock()
		time.Sleep(wait)
		if refuse && !calm.Load() {
			refused.Add(1)
			return errors.New("sending queue is full")
		}
		return sink.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	var st *storagetest.Storage
	var p *subagentMerge
	if stored {
		st = storagetest.New()
		p = startWithStorageTo(t, st, cfg, next)
	} else {
		p, err = newProcessor(processortest.NewNopSettings(Type), cfg, next)
		require.NoError(t, err)
		require.NoError(t, p.Start(bg, nil))
	}

	var all []ptrace.Traces
	var allMu sync.Mutex
	var traceNo atomic.Uint64
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() {
			rw := rand.New(rand.NewPCG(seed, uint64(w)))
			newRun := func() agentrun.Run {
				var run agentrun.Run
				if rw.IntN(2) == 0 {
					run = agentrun.Untraced(rw, traceNo.Add(1))
				} else {
					run = agentrun.New(rw, traceNo.Add(1))
				}
				allMu.Lock()
				all = append(all, run.Traces)
				allMu.Unlock()
				return run
			}
			runs := make([]flight, inFlight)
			for i := range runs {
				runs[i] = flight{run: newRun()}
			}
			for range 40 {
				td := ptrace.NewTraces()
				for i := range runs {
					if rw.IntN(3) == 0 {
						continue // this run is quiet for a request
					}
					if runs[i].next(td, 1+rw.IntN(4)) {
						runs[i] = flight{run: newRun()}
					}
				}
				// the sender retries a refused request until it is taken
				for p.ConsumeTraces(bg, clone(td)) != nil {
				}
				if rw.IntN(5) == 0 {
					time.Sleep(time.Duration(rw.IntN(10)) * time.Millisecond)
				}
			}
			// the rest of the runs in flight
			for i := range runs {
				td := ptrace.NewTraces()
				runs[i].next(td, len(runs[i].run.Spans))
				for td.SpanCount() > 0 && p.ConsumeTraces(bg, clone(td)) != nil {
				}
			}
		})
	}
	wg.Wait()
	calm.Store(true)
	time.Sleep(4 * cfg.SettleTime) // a sweep refused last goes again
	require.NoError(t, p.Shutdown(bg))
	require.Positive(t, refused.Load(), "nothing was refused: the test says nothing")
	sent := sink.AllTraces()
	if stored {
		p2, sink2 := startWithStorage(t, st, cfg)
		require.NoError(t, p2.sweepStream(bg, p2.now()+int64(time.Hour)))
		require.NoError(t, p2.Shutdown(bg))
		sent = append(sent, sink2.AllTraces()...)
	}
	_, counted := upserted(sent)
	assertEachCountedOnce(t, counted, all...)
}

// Call B ends trace t1's ledger for room, its last re-emissions settling t1's waiting
// calls, and waits at the next consumer; meanwhile call C brings t1's root. C takes the
// ended ledger back (revive) instead of starting a new one: a new one would know none of
// t1's calls, and if B is then refused, the calls its end settled could never be settled
// again. Whatever B's answer, every span is counted once.
func TestCallRevivesALedgerEndedByAWaitingCall(t *testing.T) {
	for _, errB := range []error{nil, errors.New("sending queue is full")} {
		for _, stored := range []bool{false, true} {
			t.Run(fmt.Sprintf("B refused %v/storage %v", errB != nil, stored), func(t *testing.T) {
				callRevivesALedger(t, errB, stored)
			})
		}
	}
}

func callRevivesALedger(t *testing.T, errB error, stored bool) {
	bg := context.Background()
	t1, t2 := buildParallel(), buildNested()
	id1, id2 := traceIDOf(t1), traceIDOf(t2)
	p, g, st, cfg := roomForOne(t, stored)
	require.NoError(t, p.ConsumeTraces(bg, withoutRoot(t1)))
	require.Positive(t, pendingCalls(p, t1))
	l1 := liveLedger(p, id1)

	callB := withoutRoot(t2)
	gB, resB := atGate(p, g, id2, errB, clone(callB))
	require.Nil(t, liveLedger(p, id1), "B ended t1's ledger for room")
	require.NoError(t, p.ConsumeTraces(bg, only(t1, isLocalRoot)), "C")
	require.Same(t, l1, liveLedger(p, id1), "C took t1's ledger back")
	close(gB.release)
	if errB != nil {
		require.Error(t, <-resB)
		require.NoError(t, p.ConsumeTraces(bg, clone(callB)), "B's retry")
	} else {
		require.NoError(t, <-resB)
	}
	nothingWaits(t, p)
	ledgerBytesAddUp(t, p)
	if stored {
		// killed at once: what B's end settled is stored as counted, so the restart,
		// which rebuilds t1's ledger, does not settle it again
		_, _, counted := killAndRestart(t, p, g, st, cfg, nil)
		assertEachCountedOnce(t, counted, t1, callB)
		return
	}
	require.NoError(t, p.ConsumeTraces(bg, only(t2, isLocalRoot)))
	require.NoError(t, p.Shutdown(bg))
	_, counted := upserted(g.sink.AllTraces())
	assertEachCountedOnce(t, counted, t1, t2)
}

// gated starts a stream-mode processor with cfg, on storage st unless nil, passing on to
// a traceGate.
func gated(t *testing.T, cfg *Config, st *storagetest.Storage) (*subagentMerge, *traceGate) {
	t.Helper()
	g := &traceGate{gates: map[pcommon.TraceID]*gateOne{}, sink: new(consumertest.TracesSink)}
	next, err := consumer.NewTraces(g.consume)
	require.NoError(t, err)
	if st != nil {
		return startWithStorageTo(t, st, cfg, next), g
	}
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), nil))
	return p, g
}

// roomForOne is gated with num_traces 1, on a fresh storage when stored.
func roomForOne(t *testing.T, stored bool) (*subagentMerge, *traceGate, *storagetest.Storage, *Config) {
	t.Helper()
	cfg := streamTestConfig()
	cfg.NumTraces = 1
	var st *storagetest.Storage
	if stored {
		st = storagetest.New()
	}
	p, g := gated(t, cfg, st)
	return p, g, st, cfg
}

// stepClock gives p a clock the test moves.
func stepClock(p *subagentMerge) *atomic.Int64 {
	clock := new(atomic.Int64)
	clock.Store(time.Now().UnixNano())
	p.now = func() int64 { return clock.Load() }
	return clock
}

// A sweep ends trace t1's ledger for idleness, its last re-emissions settling t1's
// waiting calls, and waits at the next consumer; meanwhile a request brings t1's root
// and takes the ledger back. The sweep is taken: with storage, what it settled is stored
// as counted, so after a kill -9 the restart, which rebuilds t1's ledger, does not
// settle those calls again.
func TestSweepEndRevivedThenTakenSurvivesARestart(t *testing.T) {
	bg := context.Background()
	t1 := buildParallel()
	id1 := traceIDOf(t1)
	cfg := streamTestConfig()
	st := storagetest.New()
	p, g := gated(t, cfg, st)
	clock := stepClock(p)
	require.NoError(t, p.ConsumeTraces(bg, withoutRoot(t1)))
	require.Positive(t, pendingCalls(p, t1))
	l1 := liveLedger(p, id1)

	gate := g.arm(id1, nil)
	clock.Add(int64(cfg.WaitDuration) + 1)
	swept := make(chan error, 1)
	go func() { swept <- p.sweepStream(bg, clock.Load()) }()
	<-gate.entered
	require.Nil(t, liveLedger(p, id1), "the sweep ended t1's ledger")
	require.NoError(t, p.ConsumeTraces(bg, only(t1, isLocalRoot)), "t1's root")
	require.Same(t, l1, liveLedger(p, id1), "the root took the ledger back")
	close(gate.release)
	require.NoError(t, <-swept)
	nothingWaits(t, p)
	_, _, counted := killAndRestart(t, p, g, st, cfg, nil)
	assertEachCountedOnce(t, counted, t1)
}
