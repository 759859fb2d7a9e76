package subagentmerge

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentmeter/agentmeter/genai"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// numShards spreads traces over independently locked maps so concurrent
// ConsumeTraces calls rarely wait for each other.
const numShards = 64

// linearLimit is the span count up to which a trace's span ids are searched linearly;
// above it a map index is built (most agent traces stay below it, and a short slice is
// both smaller, 16 bytes a span against about 50 in a map, and as fast).
const linearLimit = 64

// Span flag bits (OTLP): bit 8 says whether bit 9 is known, bit 9 that the parent is remote.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// spanKey is all the buffer keeps per span besides its data: its ids and what the span
// tells the completeness rule (completeness.go). A local root is stored with an empty
// parent, even when its real parent is remote.
type spanKey struct {
	id, parent pcommon.SpanID
	call       uint32 // callHash of gen_ai.tool.call.id on tool spans, else 0
	kind       uint8  // kind* bits
	role       genai.SpanKind
}

func (k spanKey) root() bool { return k.parent.IsEmpty() }

// keyOf reads sp's key and appends the hashes of the tool calls it asked for to asks.
func keyOf(sp ptrace.Span, asks []uint32) (spanKey, []uint32) {
	f := factsOf(sp)
	return keyFrom(sp, &f, asks)
}

// factsOf reads sp's attributes once into what its key and version are made of.
func factsOf(sp ptrace.Span) spanFacts {
	var f spanFacts
	sp.Attributes().Range(func(key string, v pcommon.Value) bool {
		f.see(key, v)
		return true
	})
	return f
}

// keyFrom is keyOf with sp's attributes already read into f.
func keyFrom(sp ptrace.Span, f *spanFacts, asks []uint32) (spanKey, []uint32) {
	k := spanKey{id: sp.SpanID()}
	if !isLocalRoot(sp) {
		k.parent = sp.ParentSpanID()
	}
	k.kind, k.call, asks = f.classify(sp, asks)
	k.role = f.class
	return k, asks
}

// isLocalRoot reports whether sp roots this process's part of the trace: it has no parent,
// or its parent is remote (the gateway request that started a run, docs/contract.md#spans).
func isLocalRoot(sp ptrace.Span) bool {
	if sp.ParentSpanID().IsEmpty() {
		return true
	}
	f := sp.Flags()
	return f&flagHasIsRemote != 0 && f&flagIsRemote != 0
}

// spanSet holds the span keys of one trace and the tool calls its model calls asked for.
type spanSet struct {
	keys []spanKey
	asks []uint32                 // callHash of every tool-call id a model call asked for
	idx  map[pcommon.SpanID]int32 // nil until len(keys) > linearLimit
}

func (s *spanSet) has(id pcommon.SpanID) bool { return s.find(id) >= 0 }

// find returns the index of span id in keys, or -1.
func (s *spanSet) find(id pcommon.SpanID) int {
	if id.IsEmpty() {
		return -1
	}
	if s.idx != nil {
		if i, ok := s.idx[id]; ok {
			return int(i)
		}
		return -1
	}
	for i := range s.keys {
		if s.keys[i].id == id {
			return i
		}
	}
	return -1
}

func (s *spanSet) add(k spanKey, asks []uint32) {
	if s.keys == nil {
		s.keys = make([]spanKey, 0, 8) // skip the 1, 2, 4 growth steps of a new trace
	}
	s.keys = append(s.keys, k)
	s.asks = append(s.asks, asks...)
	if s.idx != nil {
		s.idx[k.id] = int32(len(s.keys) - 1)
	} else if len(s.keys) > linearLimit {
		s.idx = make(map[pcommon.SpanID]int32, 2*len(s.keys))
		for i := range s.keys {
			s.idx[s.keys[i].id] = int32(i)
		}
	}
}

// entry is one buffered trace. Its spans are held in two forms:
//   - hot: recently arrived spans, moved (not copied) out of the incoming batches into
//     a ptrace.Traces of their own. A trace that completes soon after its spans arrive,
//     the common case, never pays for encoding.
//   - chunks: spans held longer than compact_after, encoded by the sweeper as OTLP
//     TracesData protobuf, several times smaller than the same spans in pdata.
//     Concatenated TracesData messages decode as one message whose resource_spans are
//     the concatenation, so release joins the chunks and decodes once.
type entry struct {
	id       pcommon.TraceID
	spans    spanSet
	hasRoot  bool
	rootAt   int64         // unix nanos when the root arrived
	settleAt int64         // unix nanos when a settling trace goes; 0: not settling
	hot      ptrace.Traces // valid only while hotSince != 0
	hotSince int64         // unix nanos when the oldest hot span arrived; 0: no hot spans
	chunks   [][]byte
	seqs     []uint64 // sequence numbers of its chunks in storage (persist.go)
	lastSeen int64    // unix nanos of the last span added
	// versions is how many later versions of spans already in spans.keys it holds
	// (gather mode: re-emissions that came while the trace waited), ranks the newest
	// rank of each such span
	versions int
	ranks    map[pcommon.SpanID]int64
	// restored: some of its chunks were read back at start; the previous process may
	// have delivered them (a delivery whose record the disk failed to write), so a first
	// emission of them is not coalesced with a later version (coalesce's keepFirst)
	restored bool
	// its places in the shard's chains: by lastSeen (idle and capacity release), among
	// the entries holding hot spans by hotSince (compaction), among the settling entries
	// by settleAt
	lruL, hotL, settleL link[entry]
}

func entryLRU(e *entry) *link[entry]    { return &e.lruL }
func entryHot(e *entry) *link[entry]    { return &e.hotL }
func entrySettle(e *entry) *link[entry] { return &e.settleL }

// held is a released trace's data, taken out of its entry.
type held struct {
	chunks [][]byte
	hot    ptrace.Traces
	hasHot bool
	seqs   []uint64 // its stored chunks (persist.go)
	// versions: it holds later versions of some of its spans (gather mode)
	versions bool
	restored bool            // entry.restored
	spans    int             // how many spans its chunks and hot spans hold
	id       pcommon.TraceID // its trace (queued delivery's lane)
	slot     *slot           // queued delivery: its release's place among the trace's calls (landing.go)
}

// holdsOf appends h's holds on its stored chunks.
func holdsOf(dst []chunkHold, h held) []chunkHold {
	for _, s := range h.seqs {
		dst = append(dst, chunkHold{h.id, s})
	}
	return dst
}

func (e *entry) take() held {
	h := held{chunks: e.chunks, hot: e.hot, hasHot: e.hotSince != 0, seqs: e.seqs, versions: e.versions > 0, id: e.id, restored: e.restored}
	e.chunks, e.hot, e.hotSince, e.seqs = nil, ptrace.Traces{}, 0, nil
	return h
}

// tombstone remembers a released trace's span ids for late-span and duplicate checks,
// and what correcting it needs when late spans come (correction.go; nil until recorded).
type tombstone struct {
	spans spanSet
	// ranks (gather mode): the newest version passed on of each span that had later
	// versions; an older one coming after it is dropped
	ranks      map[pcommon.SpanID]int64
	skel, sent []byte
	recL       link[tombstone] // its place among the shard's records, earliest kept first
	// delivered: rebuilt at start from a record of its delivery (sent.go), which does
	// not say which spans went out
	delivered bool
}

func tombRecord(t *tombstone) *link[tombstone] { return &t.recL }

type releasedAt struct {
	id pcommon.TraceID
	at int64
}

type shard struct {
	mu sync.Mutex
	// traces are the buffered traces; lru is their order by lastSeen (oldest first), so
	// idle and capacity release pop from its head.
	traces map[pcommon.TraceID]*entry
	lru    chain[entry]
	// hot are the entries with hot spans, oldest hotSince first.
	hot chain[entry]
	// settling are the settling entries, earliest settleAt first.
	settling chain[entry]
	// released are the tombstones; relOrder is their release order, for expiry.
	released map[pcommon.TraceID]*tombstone
	records  *atomic.Int64 // bytes of all shards' tombstone records (correction.go)
	relOrder releaseOrder
	// gone are the traces whose tombstone the count bound pushed out within
	// late_span_window: only their ids; goneOrder has their release times.
	gone      map[pcommon.TraceID]struct{}
	goneOrder releaseOrder
	// recs are the tombstones holding a record, earliest kept or corrected first, and
	// recBytes their bytes
	recs     chain[tombstone]
	recBytes int64
	// landings (queued delivery) are the calls on their way to a released trace's lane,
	// in the order they placed its spans, by trace, while there are any (landing.go):
	// apart from the tombstones, which the count bound may push out meanwhile
	landings map[pcommon.TraceID]*landing
	// led are the ledgers (stream mode, ledger.go)
	led ledgers
}

// init readies an empty shard; records counts the bytes of every shard's records.
func (s *shard) init(records *atomic.Int64) {
	s.traces = map[pcommon.TraceID]*entry{}
	s.released = map[pcommon.TraceID]*tombstone{}
	s.gone = map[pcommon.TraceID]struct{}{}
	s.landings = map[pcommon.TraceID]*landing{}
	s.records = records
	s.recs.of = tombRecord
	s.lru.of, s.hot.of, s.settling.of = entryLRU, entryHot, entrySettle
	s.led.byID = map[pcommon.TraceID]*ledger{}
	s.led.ending = map[pcommon.TraceID]*ledger{}
	s.led.lru.of, s.led.done.of, s.led.due.of = ledgerLRU, ledgerDone, ledgerDue
	for i := range s.led.hot {
		s.led.hot[i].of = ledgerHot
	}
}

func shardIndex(id pcommon.TraceID) int {
	h := binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:])
	h ^= h >> 29
	return int(h % numShards)
}

func (s *shard) pushHot(e *entry, now int64) {
	e.hotSince = now
	s.hot.pushBack(e)
}

func (s *shard) unlinkHot(e *entry) {
	if e.hotSince != 0 {
		s.hot.remove(e)
	}
}

// pushSettle puts e on the settling chain, in settleAt order: settle_time and
// release_after_root give different delays after a root.
func (s *shard) pushSettle(e *entry, at int64) {
	e.settleAt = at
	s.settling.insertOrdered(e, func(e *entry) int64 { return e.settleAt })
}

func (s *shard) unlinkSettle(e *entry) {
	if e.settleAt != 0 {
		s.settling.remove(e)
		e.settleAt = 0
	}
}

// touch marks e as just extended.
func (s *shard) touch(e *entry, now int64) {
	e.lastSeen = now
	s.lru.moveToBack(e)
}

// remove takes e out of the buffer and, when window > 0, leaves a tombstone with its
// span ids. It returns the trace's data, which the caller now owns.
func (s *shard) remove(e *entry, now int64, window int64, maxTombstones int) held {
	delete(s.traces, e.id)
	s.lru.remove(e)
	s.unlinkHot(e)
	s.unlinkSettle(e)
	h := e.take()
	if window > 0 {
		s.released[e.id] = &tombstone{spans: spanSet{keys: e.spans.keys, idx: e.spans.idx}, ranks: e.ranks}
		s.relOrder.push(releasedAt{e.id, now})
		s.expireTombstones(now, window, maxTombstones)
	}
	return h
}

// addTombstone records a trace that was released without ever being buffered.
func (s *shard) addTombstone(id pcommon.TraceID, spans spanSet, ranks map[pcommon.SpanID]int64, now, window int64, maxTombstones int) {
	if window <= 0 {
		return
	}
	s.released[id] = &tombstone{spans: spans, ranks: ranks}
	s.relOrder.push(releasedAt{id, now})
	s.expireTombstones(now, window, maxTombstones)
}

// goneIDsPerTombstone is how many more released traces are remembered by id alone than
// whole: an id and its release time take about 60 bytes of heap, a tombstone its span
// ids and record (hundreds of bytes a span), so a burst of releases that pushes
// tombstones out within seconds still leaves late_span_window's worth of ids.
const goneIDsPerTombstone = 8

// expireTombstones forgets released traces older than window, and the oldest ones
// beyond maxTombstones, so the memory of released traces stays bounded. A tombstone
// pushed out by the count while its window still runs leaves its trace id behind (gone),
// up to goneIDsPerTombstone times maxTombstones of them: a late span of that trace is
// still passed on at once, marked late, instead of being held as the start of a new
// trace that never completes (its root went out with the release) until wait_duration.
func (s *shard) expireTombstones(now, window int64, maxTombstones int) {
	for r, ok := s.relOrder.front(); ok; r, ok = s.relOrder.front() {
		live := r.at > now-window
		if live && s.relOrder.len() <= maxTombstones {
			break
		}
		if t := s.released[r.id]; t != nil {
			s.setRecord(t, nil, nil)
		}
		delete(s.released, r.id)
		s.relOrder.pop()
		if live {
			s.gone[r.id] = struct{}{}
			s.goneOrder.push(r)
		}
	}
	for r, ok := s.goneOrder.front(); ok; r, ok = s.goneOrder.front() {
		if r.at > now-window && s.goneOrder.len() <= goneIDsPerTombstone*maxTombstones {
			break
		}
		delete(s.gone, r.id)
		s.goneOrder.pop()
	}
}

// releaseOrder is a FIFO of released traces, oldest first.
type releaseOrder struct {
	q    []releasedAt
	head int
}

func (o *releaseOrder) push(r releasedAt) { o.q = append(o.q, r) }
func (o *releaseOrder) len() int          { return len(o.q) - o.head }

func (o *releaseOrder) front() (releasedAt, bool) {
	if o.head == len(o.q) {
		return releasedAt{}, false
	}
	return o.q[o.head], true
}

func (o *releaseOrder) pop() {
	o.q[o.head] = releasedAt{}
	o.head++
	// compact once the consumed head is the larger half
	if o.head > 64 && o.head*2 > len(o.q) {
		n := copy(o.q, o.q[o.head:])
		clear(o.q[n:])
		o.q = o.q[:n]
		o.head = 0
	}
}

// setRecord replaces t's record (correction.go) and counts the difference. A record
// kept or corrected goes to the back of the shard's records, a dropped one leaves them.
func (s *shard) setRecord(t *tombstone, skel, sent []byte) {
	d := int64(len(skel) + len(sent) - len(t.skel) - len(t.sent))
	t.skel, t.sent = skel, sent
	s.recBytes += d
	if s.records != nil {
		s.records.Add(d)
	}
	if skel == nil && sent == nil {
		s.recs.remove(t)
	} else {
		s.recs.moveToBack(t)
	}
}

// trimRecords drops the earliest kept records until the shard's records fit in budget.
// Their tombstones stay (duplicates are still dropped); their late spans are marked
// late instead of merged. The traces released or corrected last, the ones late spans
// are likeliest to come for, keep theirs.
func (s *shard) trimRecords(budget int64) {
	for s.recBytes > budget && s.recs.head != nil {
		s.setRecord(s.recs.head, nil, nil)
	}
}

// joinChunks returns the chunks as one TracesData message, appended to dst[:0] unless
// there is only one.
func joinChunks(dst []byte, chunks [][]byte) []byte {
	if len(chunks) == 1 {
		return chunks[0]
	}
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	dst = slices.Grow(dst[:0], n)
	for _, c := range chunks {
		dst = append(dst, c...)
	}
	return dst
}
