package subagentmerge

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// In stream mode (the default) no span is held: each one goes on in the call that
// brought it, carrying what the merge can say of it from everything its trace has sent
// so far. What the processor keeps instead is a small ledger per trace:
//
//   - spans: every span's ids and the few facts the completeness rule reads (24 bytes
//     a span), which also drop exact duplicates;
//   - skel: every span as it arrived, trimmed to what the merge reads (skeleton.go),
//     one encoded message per batch, so the merge can be run again over the whole
//     trace when more of it arrives;
//   - sent: the last version passed on, whole, of every span that may need to go out
//     again: model calls that asked for tool calls (possible dispatchers) and tool
//     spans that went out without their final merge status;
//   - out: for each span in sent, a fingerprint of what the merge wrote on it then.
//
// A model call that names no caller and goes out before all its ancestors did carries
// agentmeter.merge.caller_pending: the token metrics do not count it yet. Once its
// caller is settled (a dispatched run above it, or every ancestor there: the lead's),
// or its ledger ends, it goes out once more with agentmeter.merge.caller_settled, the
// version the token metrics count, so Prometheus' caller split is exact for emitters
// that name no callers too.
//
// When a batch changes what the merge writes on a span in sent, the ledger is dirty.
// A dirty ledger re-emits each changed span, whole, under its span id, at most once per
// settle_time (a trace that becomes complete re-emits at once: its subtree has closed),
// with agentmeter.merge.revision and, on model calls, agentmeter.merge.status
// "corrected" (reemit.go). A ledger lives wait_duration after its last new span. When
// ledger_limit_mib or num_traces is reached, the least recently extended ledgers of
// complete traces end first, then the least recently extended of runs in flight; none
// that a call or the sweeper waits on (waiting). A ledger that ends while dirty sends
// its last re-emissions first.
type ledger struct {
	id      pcommon.TraceID
	spans   spanSet
	skel    [][]byte // TracesData messages, one per batch that extended the trace
	skelLen int64
	// facts are what the merge reads of the spans in skel[:factParts], a part each, in
	// order, kept while the ledger is thawed: a merge run reads them instead of decoding
	// skel. Each part is allocated to size once and never copied: one slice for the
	// trace would double as it grew and leave each old array behind, some three facts'
	// bytes allocated a fact.
	facts     [][]merge.Fact
	factParts int
	factsLen  int64
	kept      map[pcommon.SpanID]*keptSpan
	keptLen   int64 // bytes of the kept spans' encodings
	pending   int   // kept model calls whose caller is not settled yet (genai.AttrCallerPending)
	// settledAt are the calls re-emissions settled whose send the next consumer has not
	// answered yet, each call's and sweep's in a run (settledSince); the answer takes
	// them out (unsettle), a refusal giving them back their pending caller (reopen)
	settledAt []pcommon.SpanID
	lastSeen  int64    // unix nanos of the last new span
	lastEmit  int64    // unix nanos of the last re-emission
	dueAt     int64    // unix nanos when a dirty ledger re-emits; 0: not dirty
	size      int64    // bytes counted against ledger_limit_mib
	complete  bool     // the completeness rule says nothing the trace names is missing
	seqs      []uint64 // its stored chunks (ledgerstore.go)
	// waiting counts the calls and sweeps whose sends carry what changed in it (new
	// spans, re-emissions, the calls they settled) and wait for the next consumer's
	// answer. Such a ledger is not ended, for room or for idleness: a refusal takes the
	// change back out of it (rollback, reopen), and one ended meanwhile would have lost
	// what the refused send settled, or settled and counted the refused call's spans
	// that its retry brings again.
	waiting int
	// revived: a call took it back while its ender waited (ledgers.ending); it counts
	// in waiting until the ender's answer, which settles what the end re-emitted
	revived bool
	// cold is skel and the kept spans' encodings packed into one block while the
	// ledger is frozen (freeze.go); nil: thawed. hotSince is when it was last thawed;
	// thaws counts the times it was needed again after it froze (at most
	// maxFreezeDoublings): each doubles how long it stays thawed.
	cold     []byte
	hotSince int64
	thaws    uint8
	// its places in the shard's chains: by lastSeen, oldest first, among the ledgers of
	// its kind (complete or not); among the dirty ledgers by dueAt, earliest first;
	// among the thawed ones by hotSince
	lruL, doneL, dueL, hotL link[ledger]
}

func ledgerLRU(l *ledger) *link[ledger]  { return &l.lruL }
func ledgerDone(l *ledger) *link[ledger] { return &l.doneL }
func ledgerDue(l *ledger) *link[ledger]  { return &l.dueL }
func ledgerHot(l *ledger) *link[ledger]  { return &l.hotL }

// scheduled reports whether l is on its shard's chain of due re-emissions.
func (l *ledger) scheduled() bool { return l.dueAt != 0 }

// keptSpan is a span that may go out again: the version first passed on, encoded alone
// (a TracesData message with its resource and scope), what its re-emissions changed on
// it besides the merge's results, and the fingerprint of what the merge had written on
// its last version out.
type keptSpan struct {
	fp      uint64
	enc     []byte
	pending bool  // went out with agentmeter.merge.caller_pending: not counted yet
	rev     int64 // its last agentmeter.merge.revision; 0: not re-emitted
	// firstPending: its first emission went out pending, so the version that settles
	// it is the one counted (a call refused after another settled it keeps it: rollback)
	firstPending bool
	// unanswered: the call that brought it pending waits for the next consumer's
	// answer; it is not pruned meanwhile, so that rollback finds it
	unanswered bool
	// outFP is the fingerprint of what the merge outcome hashed outHash writes on it
	// (mergedView.fingerprint); outHash 0: none read yet
	outHash, outFP uint64
}

// cost is what a ledger counts against ledger_limit_mib: its skeleton and facts, its
// kept spans, its span keys and the map entries for what it may re-emit.
func (l *ledger) cost() int64 {
	bytes := l.skelLen + int64(cap(l.skel))*24 + l.factsLen + l.keptLen
	if l.cold != nil {
		bytes = int64(len(l.cold))
	}
	return bytes + int64(cap(l.spans.keys))*24 + int64(len(l.spans.asks))*4 + int64(len(l.kept))*64 + 256
}

// ledgers is one shard's ledgers and their orders. Ledgers of complete traces are
// ordered apart from the others, so that capacity ends them first: such a ledger only
// waits for what the completeness rule cannot see (a late span, a retry's duplicate),
// while the ledger of a run in flight is what its dispatchers' merged usage is made of.
type ledgers struct {
	byID map[pcommon.TraceID]*ledger
	// ending are the ledgers ended whose ender (a call, or a sweep) waits for the next
	// consumer's answer to their last re-emissions: a refusal takes them back
	// (reinstate), else they are let go of (endedHolds). A call that brings spans of
	// such a trace meanwhile takes its ledger back at once (revive).
	ending map[pcommon.TraceID]*ledger
	lru    chain[ledger] // traces not complete, by lastSeen
	done   chain[ledger] // complete traces, by lastSeen
	due    chain[ledger] // dirty, by dueAt
	hot    hotChains     // thawed, by hotSince: frozen after compact_after, or longer
}

// ageChain is the lastSeen order l is in.
func (ls *ledgers) ageChain(l *ledger) *chain[ledger] {
	if l.complete {
		return &ls.done
	}
	return &ls.lru
}

// ageChains are both lastSeen orders, complete traces first: the order capacity and
// wait_duration end ledgers in.
func (ls *ledgers) ageChains() [2]*chain[ledger] { return [2]*chain[ledger]{&ls.done, &ls.lru} }

// firstEndable is the least recently extended ledger of ch that nothing waits on
// (ledger.waiting); nil when there is none. Most ledgers calls wait on were just
// extended, so they are at the back; those the sweeper waits on are a sweep's few.
func firstEndable(ch *chain[ledger]) *ledger {
	l := ch.head
	for l != nil && l.waiting > 0 {
		l = ch.next(l)
	}
	return l
}

// add puts a ledger in the shard, in its place by lastSeen: a new one last, one taken
// back (reinstate) where its age puts it, so the ends by age still take the oldest.
func (ls *ledgers) add(l *ledger) {
	ls.byID[l.id] = l
	ls.ageChain(l).insertOrdered(l, func(l *ledger) int64 { return l.lastSeen })
}

// touch moves l to the back of its lastSeen order.
func (ls *ledgers) touch(l *ledger, now int64) {
	l.lastSeen = now
	ls.ageChain(l).moveToBack(l)
}

// setComplete records whether l's trace is complete, moving it to the matching
// lastSeen order.
func (ls *ledgers) setComplete(l *ledger, complete bool) {
	if l.complete == complete {
		return
	}
	ls.ageChain(l).remove(l)
	l.complete = complete
	ls.ageChain(l).insertOrdered(l, func(l *ledger) int64 { return l.lastSeen })
}

// schedule puts l on the dirty chain at at, keeping it ordered by dueAt; a ledger due
// no later already stays.
func (ls *ledgers) schedule(l *ledger, at int64) {
	if l.scheduled() {
		if l.dueAt <= at {
			return
		}
		ls.due.remove(l)
	}
	l.dueAt = at
	ls.due.insertOrdered(l, func(l *ledger) int64 { return l.dueAt })
}

func (ls *ledgers) unschedule(l *ledger) {
	if l.scheduled() {
		ls.due.remove(l)
		l.dueAt = 0
	}
}

// remove takes l out of the shard.
func (ls *ledgers) remove(l *ledger) {
	delete(ls.byID, l.id)
	ls.ageChain(l).remove(l)
	ls.hot.remove(l)
	ls.unschedule(l)
}

// addSkel adds one batch's encoded skeleton and, when the caller read them, the facts
// of its spans (in the same order); no facts leaves them to be read from b.
func (l *ledger) addSkel(b []byte, facts []merge.Fact) {
	if len(b) == 0 {
		return
	}
	_ = l.thaw() // the callers warmed it; this keeps a missed one correct
	inStep := l.factParts == len(l.skel)
	l.skel = append(l.skel, b)
	l.skelLen += int64(len(b))
	if inStep && len(facts) > 0 {
		l.addFacts(slices.Clone(facts))
	}
}

// addFacts adds the facts of the next part of skel (it keeps part).
func (l *ledger) addFacts(part []merge.Fact) {
	l.facts = append(l.facts, part)
	for i := range part {
		l.factsLen += part[i].Size()
	}
	l.factParts++
}

// dropFacts forgets the facts (a frozen ledger, or a skeleton rewritten): the next
// merge run reads them from the skeleton again.
func (l *ledger) dropFacts() {
	l.facts, l.factParts, l.factsLen = nil, 0, 0
}

// settledSince returns the calls settled since settledAt had n of them (under the
// shard's lock: what one call or sweep settled of l).
func (l *ledger) settledSince(n int) []pcommon.SpanID { return l.settledAt[n:] }

// unsettle takes ids out of settledAt (one each): the send that settled them was
// answered.
func (l *ledger) unsettle(ids []pcommon.SpanID) {
	for _, id := range ids {
		if i := slices.Index(l.settledAt, id); i >= 0 {
			l.settledAt = slices.Delete(l.settledAt, i, i+1)
		}
	}
}
