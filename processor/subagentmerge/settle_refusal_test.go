package subagentmerge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// traceGate blocks the next call carrying a span of an armed trace (once a trace), then
// answers its error.
type traceGate struct {
	mu    sync.Mutex
	gates map[pcommon.TraceID]*gateOne
	sink  *consumertest.TracesSink
}

type gateOne struct {
	entered, release chan struct{}
	err              error
}

func (g *traceGate) arm(id pcommon.TraceID, err error) *gateOne {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := &gateOne{entered: make(chan struct{}), release: make(chan struct{}), err: err}
	g.gates[id] = o
	return o
}

func (g *traceGate) consume(ctx context.Context, td ptrace.Traces) error {
	var o *gateOne
	g.mu.Lock()
	for sp := range spaniter.All(td) {
		if x := g.gates[sp.TraceID()]; x != nil {
			o = x
			delete(g.gates, sp.TraceID())
			break
		}
	}
	g.mu.Unlock()
	if o != nil {
		close(o.entered)
		<-o.release
		if o.err != nil {
			return o.err
		}
	}
	return g.sink.ConsumeTraces(ctx, td)
}

// liveLedger is p's ledger of trace id (nil: none).
func liveLedger(p *subagentMerge, id pcommon.TraceID) *ledger {
	s := &p.shards[shardIndex(id)]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.led.byID[id]
}

// runWithLastCallLater is a run whose lead's last call is held back (so the root's arrival
// leaves it incomplete: what it settles waits for the sweep).
func runWithLastCallLater(n uint64) (td ptrace.Traces, last pcommon.SpanID) {
	b := newTraceBuilder(n)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(60, 9), "call_a")
	_, sub := b.task(lead, "call_a", "researcher", genai.SubagentCompleted)
	b.chat(sub, usage(10, 5))
	last = b.chat(lead, usage(90, 30)).SpanID()
	return b.td, last
}

// A sweep whose re-emissions the next consumer takes in part: the settled versions it
// took are counted, and stored, so a restart does not settle, and count, them again.
func TestSweepTakenInPartStoresWhatWasTaken(t *testing.T) { sweepTakenInPart(t, true) }

func TestSweepTakenWholeStoresWhatItSettled(t *testing.T) { sweepTakenInPart(t, false) }

func sweepTakenInPart(t *testing.T, part bool) {
	bg := context.Background()
	st := storagetest.New()
	cfg := streamTestConfig()
	t1, last1 := runWithLastCallLater(21)
	t2, last2 := runWithLastCallLater(22)
	id2 := traceIDOf(t2)
	sink1 := new(consumertest.TracesSink)
	var partial atomic.Bool
	next, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if partial.CompareAndSwap(true, false) {
			_ = sink1.ConsumeTraces(ctx, only(td, func(sp ptrace.Span) bool { return sp.TraceID() != id2 }))
			return consumererror.NewTraces(errors.New("some refused"), only(td, func(sp ptrace.Span) bool { return sp.TraceID() == id2 }))
		}
		return sink1.ConsumeTraces(ctx, td)
	})
	require.NoError(t, err)
	p1 := startWithStorageTo(t, st, cfg, next)
	clock := time.Now().UnixNano()
	p1.now = func() int64 { return clock }
	notLast := func(sp ptrace.Span) bool { return sp.SpanID() != last1 && sp.SpanID() != last2 }
	require.NoError(t, p1.ConsumeTraces(bg, only(concat(withoutRoot(t1), withoutRoot(t2)), notLast)))
	require.Positive(t, pendingCalls(p1, t1))
	require.NoError(t, p1.ConsumeTraces(bg, concat(only(t1, isLocalRoot), only(t2, isLocalRoot))))
	require.Positive(t, pendingCalls(p1, t1), "the settle waits for the sweep")
	clock += int64(cfg.SettleTime)
	partial.Store(part)
	if err := p1.sweepStream(bg, clock); part {
		require.Error(t, err)
	} else {
		require.NoError(t, err)
	}
	require.Zero(t, pendingCalls(p1, t1), "t1's calls were settled and taken")
	kill(p1)

	p2, sink2 := startWithStorage(t, st, cfg)
	require.NoError(t, p2.sweepStream(bg, p2.now()+int64(time.Hour)))
	require.NoError(t, p2.Shutdown(bg))
	_, counted := upserted(append(sink1.AllTraces(), sink2.AllTraces()...))
	times := map[pcommon.SpanID]int{}
	for _, sp := range counted {
		if sp.TraceID() == traceIDOf(t1) {
			times[sp.SpanID()]++
		}
	}
	for id, n := range times {
		assert.Equal(t, 1, n, "span %s of t1 counted %d times", id, n)
	}
}

// A request's chunk is drawn, then held ledger by ledger (commitChunk). When the first
// ledger that held it is let go of before the next one holds it, or after, the drawn
// number stays until its write and a marker names it, so a restart does not bring that
// ledger back from it. (The interleavings are played in order here: commitChunk's loop
// runs without the persister's locks. The processor itself does not end a ledger whose
// call waits for its chunk to be written: ledger.waiting.)
func TestChunkLetGoOfBeforeItsWriteIsMarked(t *testing.T) {
	for _, bothFirst := range []bool{false, true} {
		bg := context.Background()
		st := storagetest.New()
		cfg := streamTestConfig()
		a, b := buildOneTask(), buildNested()
		aID, bID := traceIDOf(a), traceIDOf(b)
		p1, _ := startWithStorage(t, st, cfg)
		require.NoError(t, p1.ConsumeTraces(bg, concat(withoutRoot(a), withoutRoot(b))))
		la, lb := liveLedger(p1, aID), liveLedger(p1, bID)
		require.NotNil(t, la)
		require.NotNil(t, lb)

		// a later request brought the roots of a and b: its chunk
		skel, err := p1.marshaler.MarshalTraces(concat(only(a, isLocalRoot), only(b, isLocalRoot)))
		require.NoError(t, err)
		chunk := append(protowire.AppendVarint(nil, uint64(len(skel))), skel...)
		seq := p1.store.draw()
		require.True(t, p1.holdChunk(la, seq))
		if bothFirst {
			require.True(t, p1.holdChunk(lb, seq))
		}
		// meanwhile a's ledger ends and is let go of
		s := &p1.shards[shardIndex(aID)]
		s.mu.Lock()
		e := p1.endLedger(s, la, ptrace.NewTraces(), &counts{}, p1.now(), relCapacity)
		s.mu.Unlock()
		require.NoError(t, p1.forgetLedgers(bg, e))
		if !bothFirst {
			require.True(t, p1.holdChunk(lb, seq))
		}
		require.NoError(t, p1.store.write(bg, seq, chunk))
		kill(p1)

		p2, _ := startWithStorage(t, st, cfg)
		assert.Zero(t, ledgerSpans(p2, aID), "both held it first: %v; a's ledger ended, a restart brought it back", bothFirst)
		kill(p2)
	}
}

// A brings model call X while its ancestors are missing (caller pending) and waits at
// the next consumer; B brings the root, which settles X: B's re-emission of X is its
// counted version, and B is taken. A is refused: X stays in the ledger (its counted
// version went on), so the sender's retry of X is a duplicate, not a first emission
// counted again.
func TestCallSettledByAnotherThenRefusedIsCountedOnce(t *testing.T) {
	bg := context.Background()
	in, sub, x := subagentCallTrace(31)
	isX := func(sp ptrace.Span) bool { return sp.SpanID() == x }
	g := &traceGate{gates: map[pcommon.TraceID]*gateOne{}, sink: new(consumertest.TracesSink)}
	next, err := consumer.NewTraces(g.consume)
	require.NoError(t, err)
	p, err := newProcessor(processortest.NewNopSettings(Type), streamTestConfig(), next)
	require.NoError(t, err)
	require.NoError(t, p.Start(bg, nil))
	isSub := func(sp ptrace.Span) bool { return sp.SpanID() == sub }
	require.NoError(t, p.ConsumeTraces(bg, only(in, func(sp ptrace.Span) bool { return !isLocalRoot(sp) && !isX(sp) && !isSub(sp) })))
	gA := g.arm(traceIDOf(in), errors.New("A refused"))
	resA := make(chan error, 1)
	go func() { resA <- p.ConsumeTraces(bg, only(in, isX)) }()
	<-gA.entered
	require.Positive(t, pendingCalls(p, in), "X waits for its caller")
	require.NoError(t, p.ConsumeTraces(bg, only(in, func(sp ptrace.Span) bool { return isLocalRoot(sp) || isSub(sp) })), "B: the root and X's agent")
	close(gA.release)
	require.Error(t, <-resA)
	require.NoError(t, p.ConsumeTraces(bg, only(in, isX)), "A's retry")
	require.NoError(t, p.Shutdown(bg))
	_, counted := upserted(g.sink.AllTraces())
	n := 0
	for _, sp := range counted {
		if sp.SpanID() == x {
			n++
		}
	}
	assert.Equal(t, 1, n, "X counted once")
	assert.Len(t, counted, in.SpanCount(), "every span counted once")
}

// As above, and then killed: X's own request was refused, and what stays of it in the
// ledger (X) was stored as a chunk of its own, so the dispatcher's merged numbers after
// the restart are those before the kill.
func TestCallSettledByAnotherThenRefusedSurvivesARestart(t *testing.T) {
	bg := context.Background()
	in, sub, x := subagentCallTrace(41)
	id := traceIDOf(in)
	isX := func(sp ptrace.Span) bool { return sp.SpanID() == x }
	isSub := func(sp ptrace.Span) bool { return sp.SpanID() == sub }
	p, g, st, cfg := gatedOnStorage(t)
	require.NoError(t, p.ConsumeTraces(bg, only(in, func(sp ptrace.Span) bool { return !isLocalRoot(sp) && !isX(sp) && !isSub(sp) })))
	gA, resA := atGate(p, g, id, errors.New("A refused"), only(in, isX))
	require.NoError(t, p.ConsumeTraces(bg, only(in, func(sp ptrace.Span) bool { return isLocalRoot(sp) || isSub(sp) })))
	close(gA.release)
	require.Error(t, <-resA)
	require.NoError(t, p.ConsumeTraces(bg, only(in, isX)), "A's retry")
	require.Equal(t, in.SpanCount(), ledgerSpans(p, id))
	lastBefore, lastAfter, _ := killAndRestart(t, p, g, st, cfg, func(p2 *subagentMerge) {
		assert.Equal(t, in.SpanCount(), ledgerSpans(p2, id), "the restored ledger has X (from the version that settled it)")
	})
	for sid, sp := range lastBefore {
		a := lastAfter[sid]
		sub := func(m pcommon.Map) map[string]any {
			out := map[string]any{}
			for k, v := range m.AsRaw() {
				if len(k) > 19 && k[:19] == "agentmeter.subagent" {
					out[k] = v
				}
			}
			return out
		}
		assert.Equal(t, sub(sp.Attributes()), sub(a.Attributes()),
			"span %s %s: merged numbers before the kill %v, after the restart %v", sid, sp.Name(), sp.Attributes().AsRaw(), a.Attributes().AsRaw())
	}
}

// X is a dispatcher (the lead's model call asking for call_a) that goes out pending
// (the root is missing) in its request A; B brings the root and settles X while A
// waits; A is then taken, or refused and retried (a duplicate). Killed and restarted:
// the dispatcher's merged numbers and the counts stay as they were (the skeleton taken
// from X's settled version, when no chunk of its own has it, is X as it came).
func TestDispatcherSettledByAnotherSurvivesARestart(t *testing.T) {
	for _, errA := range []error{nil, errors.New("A refused")} {
		dispatcherSettledByAnotherThenRestart(t, errA)
	}
}

func dispatcherSettledByAnotherThenRestart(t *testing.T, errA error) {
	bg := context.Background()
	b := newTraceBuilder(43)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	x := b.chat(lead, usage(60, 9), "call_a").SpanID()
	_, sub := b.task(lead, "call_a", "researcher", genai.SubagentCompleted)
	b.chat(sub, usage(10, 5))
	b.chat(lead, usage(90, 30))
	in := b.td
	id := traceIDOf(in)
	isX := func(sp ptrace.Span) bool { return sp.SpanID() == x }
	p, g, st, cfg := gatedOnStorage(t)
	require.NoError(t, p.ConsumeTraces(bg, only(in, func(sp ptrace.Span) bool { return !isLocalRoot(sp) && !isX(sp) })))
	gA, resA := atGate(p, g, id, errA, only(in, isX))
	require.Positive(t, pendingCalls(p, in), "X waits for its caller")
	require.NoError(t, p.ConsumeTraces(bg, only(in, isLocalRoot)), "B: the root")
	close(gA.release)
	if errA != nil {
		require.Error(t, <-resA)
		require.NoError(t, p.ConsumeTraces(bg, only(in, isX)), "A's retry")
	} else {
		require.NoError(t, <-resA)
	}
	require.NoError(t, p.sweepStream(bg, p.now()+int64(time.Second)))
	_, countedBefore := upserted(g.sink.AllTraces())
	require.Len(t, countedBefore, in.SpanCount())
	lastBefore, lastAfter, counted := killAndRestart(t, p, g, st, cfg, func(p2 *subagentMerge) {
		assert.Equal(t, in.SpanCount(), ledgerSpans(p2, id))
	})
	assert.Len(t, counted, in.SpanCount(), "every span counted once")
	for sid, sp := range lastBefore {
		a := lastAfter[sid]
		assert.Equal(t, sp.Attributes().AsRaw()["agentmeter.subagent.input_tokens"], a.Attributes().AsRaw()["agentmeter.subagent.input_tokens"], "span %s %s: before %v after %v", sid, sp.Name(), sp.Attributes().AsRaw(), a.Attributes().AsRaw())
	}
}

// gatedOnStorage starts a stream-mode processor on a fresh storage, passing on to a
// traceGate.
func gatedOnStorage(t *testing.T) (*subagentMerge, *traceGate, *storagetest.Storage, *Config) {
	t.Helper()
	st, cfg := storagetest.New(), streamTestConfig()
	p, g := gated(t, cfg, st)
	return p, g, st, cfg
}

// A dispatcher X that arrives carrying an earlier merge's results (agentmeter.subagent.*
// for a task an upstream merge already accounted for) goes out pending in A, is settled
// by B; A is refused and retried (a duplicate); killed and restarted: X's merged numbers
// stay, the earlier merge's included (the chunk of what stays of A has X as it came).
func TestDispatcherWithAPriorMergeSettledByAnotherSurvivesARestart(t *testing.T) {
	bg := context.Background()
	b := newTraceBuilder(61)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	xs := b.chat(lead, usage(60, 9), "call_z", "call_a")
	// what an upstream merge wrote for call_z (its task spans, marked, are elsewhere)
	genai.PutSubagentUsage(xs.Attributes(), genai.Usage{Input: 100, Output: 7})
	xs.Attributes().PutInt(genai.AttrSubagentDispatches, 1)
	genai.PutStrings(xs.Attributes(), genai.AttrSubagentToolCallIDs, []string{"call_z"})
	x := xs.SpanID()
	tz, subz := b.task(lead, "call_z", "coder", genai.SubagentCompleted)
	tz.Attributes().PutStr(genai.AttrMergeStatus, genai.MergeMerged) // the upstream merge's mark
	cz := b.chat(subz, usage(100, 7))
	cz.Attributes().PutStr(genai.AttrCaller, "subagent:coder")
	_, sub := b.task(lead, "call_a", "researcher", genai.SubagentCompleted)
	b.chat(sub, usage(10, 5))
	b.chat(lead, usage(90, 30))
	in := b.td
	id := traceIDOf(in)
	isX := func(sp ptrace.Span) bool { return sp.SpanID() == x }
	p, g, st, cfg := gatedOnStorage(t)
	require.NoError(t, p.ConsumeTraces(bg, only(in, func(sp ptrace.Span) bool { return !isLocalRoot(sp) && !isX(sp) })))
	gA, resA := atGate(p, g, id, errors.New("A refused"), only(in, isX))
	require.Positive(t, pendingCalls(p, in))
	require.NoError(t, p.ConsumeTraces(bg, only(in, isLocalRoot)), "B: the root")
	close(gA.release)
	require.Error(t, <-resA)
	require.NoError(t, p.ConsumeTraces(bg, only(in, isX)), "A's retry")
	require.NoError(t, p.sweepStream(bg, p.now()+int64(time.Second)))
	lastBefore, lastAfter, _ := killAndRestart(t, p, g, st, cfg, nil)
	bx, ax := lastBefore[x].Attributes().AsRaw(), lastAfter[x].Attributes().AsRaw()
	t.Logf("before %v\nafter %v", bx, ax)
	for _, k := range []string{genai.AttrSubagentInput, genai.AttrSubagentDispatches, genai.AttrSubagentToolCallIDs} {
		assert.Equal(t, bx[k], ax[k], "%s before the kill vs after the restart", k)
	}
}

// X (a subagent's model call) goes out pending in A; B brings the root and settles X;
// both wait at the next consumer. A is refused: X stays (B settled it), and the chunk of
// what stays of A has it. A's retry is a duplicate. Then B is refused: X is pending
// again. Killed and restarted, B's retry comes: X is counted once.
func TestCallKeptForARefusedRequestIsOnDisk(t *testing.T) {
	bg := context.Background()
	in, sub, x := subagentCallTrace(62)
	id := traceIDOf(in)
	isX := func(sp ptrace.Span) bool { return sp.SpanID() == x }
	isSub := func(sp ptrace.Span) bool { return sp.SpanID() == sub }
	isB := func(sp ptrace.Span) bool { return isLocalRoot(sp) || isSub(sp) }
	p, g, st, cfg := gatedOnStorage(t)
	require.NoError(t, p.ConsumeTraces(bg, only(in, func(sp ptrace.Span) bool { return !isB(sp) && !isX(sp) })))
	gA, resA := atGate(p, g, id, errors.New("A refused"), only(in, isX))
	require.Positive(t, pendingCalls(p, in))
	gB, resB := atGate(p, g, id, errors.New("B refused"), only(in, isB))
	close(gA.release)
	require.Error(t, <-resA)
	require.NoError(t, p.ConsumeTraces(bg, only(in, isX)), "A's retry (a duplicate)")
	close(gB.release)
	require.Error(t, <-resB)
	before := len(g.sink.AllTraces())
	kill(p)

	p2, sink2 := startWithStorage(t, st, cfg)
	require.NoError(t, p2.ConsumeTraces(bg, only(in, isB)), "B's retry")
	require.NoError(t, p2.sweepStream(bg, p2.now()+int64(time.Hour)))
	require.NoError(t, p2.Shutdown(bg))
	counted := countedAcross(g.sink.AllTraces()[:before:before], sink2.AllTraces())
	assert.Equal(t, 1, timesCounted(counted, x), "X counted once")
	assert.Len(t, counted, in.SpanCount(), "every span counted once")
}

// subagentCallTrace is a lead agent whose one task runs a subagent with one model call
// x (sub is the subagent's span).
func subagentCallTrace(n uint64) (in ptrace.Traces, sub, x pcommon.SpanID) {
	b := newTraceBuilder(n)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(60, 9), "call_a")
	_, sub = b.task(lead, "call_a", "researcher", genai.SubagentCompleted)
	x = b.chat(sub, usage(10, 5)).SpanID()
	b.chat(lead, usage(90, 30))
	return b.td, sub, x
}

// atGate sends td in a call of its own, which g holds at the next consumer (trace id
// armed to answer err) until released; it returns once the call is there, with the gate
// and where the call's answer comes.
func atGate(p *subagentMerge, g *traceGate, id pcommon.TraceID, err error, td ptrace.Traces) (*gateOne, chan error) {
	gate := g.arm(id, err)
	res := make(chan error, 1)
	go func() { res <- p.ConsumeTraces(context.Background(), td) }()
	<-gate.entered
	return gate, res
}

// killAndRestart kills p, whose sends g's sink has, starts a processor on st, hands it
// to check (nil: none), lets its ledgers re-emit and end, and returns the last version
// of each span sent before the kill and after the restart, and the versions counters
// count across both processes.
func killAndRestart(t *testing.T, p *subagentMerge, g *traceGate, st *storagetest.Storage, cfg *Config, check func(*subagentMerge)) (lastBefore, lastAfter map[pcommon.SpanID]ptrace.Span, counted []ptrace.Span) {
	t.Helper()
	bg := context.Background()
	sent := g.sink.AllTraces()
	kill(p)
	p2, sink2 := startWithStorage(t, st, cfg)
	if check != nil {
		check(p2)
	}
	require.NoError(t, p2.sweepStream(bg, p2.now()+int64(time.Hour)))
	require.NoError(t, p2.Shutdown(bg))
	lastBefore, _ = upserted(sent)
	lastAfter, counted = upserted(append(sent[:len(sent):len(sent)], sink2.AllTraces()...))
	return lastBefore, lastAfter, counted
}

// countedAcross is the versions counters count of what two processes sent, in order.
func countedAcross(first, second []ptrace.Traces) []ptrace.Span {
	_, counted := upserted(append(first, second...))
	return counted
}

// timesCounted is how many of counted are span id's.
func timesCounted(counted []ptrace.Span, id pcommon.SpanID) int {
	n := 0
	for _, sp := range counted {
		if sp.SpanID() == id {
			n++
		}
	}
	return n
}
