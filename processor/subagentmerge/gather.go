package subagentmerge

// Gather mode: hold mode's buffer for spans a stream-mode merge already merged.
//
// A sink that needs a trace whole before it can take any of it (LangSmith, for spans
// that do not carry their place in its run tree) gets them from a stream merge through a
// gather-mode instance. The stream merge has written every merged number and passes on
// each dispatching span again, under its span id, as its subagents' usage arrives. So
// this mode merges nothing: it waits for a trace as hold mode does (complete, settled,
// release_after_root, idle, capacity) and keeps the re-emissions that come meanwhile.
// A released trace goes on with each span once, in the newest version that came, as a
// first emission: a sink that creates a record from a first emission and updates it from
// re-emissions (LangSmith's POST, then PATCH) creates it in its last state. After the
// release, a newer re-emission of a span goes on at once (the sink's update), a new span
// of the trace too (a late span, already merged upstream), and an exact repeat or an
// older version is dropped, for late_span_window.
//
// It never changes the batches it is given: they are shared with the stream merge's
// other consumers. What it holds is cut out of their encoding (encodeHeld); what it
// passes on is a copy, or, with queued delivery, cut out of the same encoding
// (restEncodings).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/otlpwire"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// gatherBatch is consume's work in gather mode: it places td's spans (held, passed on,
// dropped) without changing td, and returns what goes on now, in the order it came:
// what was held of the traces this batch completes or pushes out, then this batch's
// spans that are not held (the rest of those traces, late spans, re-emissions of
// released spans, spans without a trace id), one version of each span (coalesce).
func (p *subagentMerge) gatherBatch(ctx context.Context, td ptrace.Traces, sc *scratch, c *counts) (ptrace.Traces, error) {
	p.indexBatch(td, sc, false)
	now := p.now()
	var errs []error
	// keepFirst: spans read back at start (restoring, or held by a restored trace) may
	// have gone out before without anything saying so (coalesce)
	versions, keepFirst := false, sc.restoring
	for gi := range sc.groups {
		v, err := p.gatherPlace(ctx, td, sc, gi, now, c)
		versions = versions || v
		if err != nil {
			errs = append(errs, err)
		}
	}
	p.evictOverCapacity(sc, now, c)

	out := ptrace.NewTraces()
	for gi := range sc.groups {
		g := &sc.groups[gi]
		if !g.released {
			continue
		}
		if g.slot != nil {
			sc.landings = append(sc.landings, landingOf{g.id, g.slot})
		}
		versions = versions || g.prev.versions
		keepFirst = keepFirst || g.prev.restored
		if p.queued {
			sc.raw = append(sc.raw, g.prev) // sent from its chunks, which it holds
		} else {
			sc.dels = holdsOf(sc.dels, g.prev)
			var err error
			if sc.spans, err = p.appendHeld(out, g.prev, sc.spans[:0]); err != nil {
				errs = append(errs, err)
			}
		}
		g.prev = held{}
	}
	for _, h := range sc.evicted {
		versions = versions || h.versions
		keepFirst = keepFirst || h.restored
		if p.queued {
			sc.raw = append(sc.raw, h)
			continue
		}
		sc.dels = holdsOf(sc.dels, h)
		var err error
		if sc.spans, err = p.appendHeld(out, h, sc.spans[:0]); err != nil {
			errs = append(errs, err)
		}
	}
	if p.queued {
		// sent encoded: cut out of the batch's encoding (restEncodings), as what is held
		// is, instead of copied only to be encoded
		for i := range sc.refs {
			if f := sc.refs[i].fate; f == fateKeep || f == fateLate {
				if k := sc.refs[i].follow; k > 0 {
					fo := &sc.follows[k-1]
					if sc.refs[i].asFirst {
						fo.first = append(fo.first, int32(i))
					} else {
						fo.idx = append(fo.idx, int32(i))
					}
					continue
				}
				lane := laneOf(sc.refs[i].span.TraceID())
				if sc.refs[i].asFirst {
					sc.restFirst[lane] = append(sc.restFirst[lane], int32(i))
				} else {
					sc.rest[lane] = append(sc.rest[lane], int32(i))
				}
			}
		}
	} else {
		w := newRefWriter(td, out)
		for i := range sc.refs {
			if f := sc.refs[i].fate; f == fateKeep || f == fateLate {
				w.copy(&sc.refs[i])
			}
		}
	}
	switch {
	case versions && p.queued:
		sc.versions = true // coalesced by the sender, once it decoded them
	case versions:
		coalesce(out, keepFirst)
	}
	return out, errors.Join(errs...)
}

// gatherPlace decides the fate of one trace's spans in this batch (gather mode): held,
// passed on now, or dropped as an exact repeat. It reports whether this batch brought a
// later version of a span the trace already has.
func (p *subagentMerge) gatherPlace(ctx context.Context, td ptrace.Traces, sc *scratch, gi int, now int64, c *counts) (versions bool, _ error) {
	g := &sc.groups[gi]
	s := &p.shards[shardIndex(g.id)]
	s.mu.Lock()
	defer s.mu.Unlock()

	if tomb := s.released[g.id]; tomb != nil {
		// Released before: newer versions and new spans go on now; exact repeats and
		// versions older than one passed on do not.
		for r := g.first; r >= 0; r = sc.refs[r].next {
			ref := &sc.refs[r]
			rank := ref.rank
			if !tomb.spans.has(ref.key.id) {
				tomb.spans.add(ref.key, nil)
				ref.fate = fateLate
				c.late++
				if rank > 0 {
					// a span the sink never had goes as a first emission; of a trace known
					// only from its delivery's record, it may have had it: an update
					ref.asFirst = !tomb.delivered
					tomb.ranks = setRank(tomb.ranks, ref.key.id, rank)
				}
				continue
			}
			if rank == 0 || rank <= tomb.ranks[ref.key.id] {
				ref.fate = fateDrop
				c.duplicates++
				continue
			}
			tomb.ranks = setRank(tomb.ranks, ref.key.id, rank)
			ref.fate = fateLate
			versions = true
		}
		p.follow(s, sc, g)
		return versions, nil
	}
	if _, gone := s.gone[g.id]; gone {
		lateAll(sc, g, c) // remembered by id only: everything goes on
		p.follow(s, sc, g)
		return false, nil
	}

	e := s.traces[g.id]
	var set spanSet
	hasRoot := false
	if e != nil {
		set, hasRoot = e.spans, e.hasRoot
	}
	added, later := 0, 0
	var ranks map[pcommon.SpanID]int64
	if e != nil {
		ranks = e.ranks
	}
	for r := g.first; r >= 0; r = sc.refs[r].next {
		ref := &sc.refs[r]
		rank := ref.rank
		if set.has(ref.key.id) {
			if rank > ranks[ref.key.id] {
				later++ // goes with the trace: the release keeps its newest version
				ranks = setRank(ranks, ref.key.id, rank)
				continue
			}
			// a repeat, or older than the version held
			ref.fate = fateDrop
			c.duplicates++
			continue
		}
		if rank > 0 {
			ref.asFirst = true
			ranks = setRank(ranks, ref.key.id, rank)
		}
		set.add(ref.key, sc.asks[ref.asks[0]:ref.asks[1]])
		if ref.key.root() && !hasRoot {
			hasRoot = true
			if e != nil {
				e.rootAt = now
			}
		}
		added++
	}
	versions = later > 0 // what it held already says so itself (held.versions)

	st := p.stateOf(&set, hasRoot)
	if st == stComplete {
		// released now: this batch's spans stay fateKeep and go on with what was held
		p.releaseNow(s, g, e, set, ranks, added, now, c)
		return versions, nil
	}
	if added+later == 0 {
		return false, nil // only repeats
	}

	e = p.hold(s, e, g.id, set, hasRoot, st, now)
	e.ranks = ranks
	e.versions += later
	p.nSpans.Add(int64(added + later))

	b, err := p.encodeHeld(ctx, td, sc, g)
	if err != nil {
		return false, err
	}
	return false, p.addEncoded(sc, e, b)
}

// encodeHeld encodes the spans of g that stay held (marking them so), without changing
// td: the batch is not this processor's to change. They are cut out of td's encoding,
// made once per batch, instead of copied to be encoded; only a span that goes as a first
// emission (its re-emission marks taken off) is copied.
func (p *subagentMerge) encodeHeld(ctx context.Context, td ptrace.Traces, sc *scratch, g *group) ([]byte, error) {
	sc.held = sc.held[:0]
	asFirst := false
	for r := g.first; r >= 0; r = sc.refs[r].next {
		if ref := &sc.refs[r]; ref.fate == fateKeep {
			ref.fate = fateBuffer
			sc.held = append(sc.held, r) // a ref's index is its span's in td (indexBatch)
			asFirst = asFirst || ref.asFirst
		}
	}
	if asFirst {
		dst := ptrace.NewTraces()
		w := newRefWriter(td, dst)
		for _, r := range sc.held {
			w.copy(&sc.refs[r])
		}
		b, err := p.marshaler.MarshalTraces(dst)
		if err != nil {
			return nil, fmt.Errorf("subagentmerge: encoding spans to buffer: %w", err)
		}
		return b, nil
	}
	if err := p.wireBatch(ctx, td, sc); err != nil {
		return nil, err
	}
	return sc.wire.Append(make([]byte, 0, sc.wire.Size(sc.held)), sc.held), nil
}

// wireBatch encodes and indexes td once a call (sc.wire), for the spans cut out of it.
// The batch is read-only behind a stream merge, and its encoding the one the other
// consumers of the merge's call use (otlpwire.Encode).
func (p *subagentMerge) wireBatch(ctx context.Context, td ptrace.Traces, sc *scratch) error {
	if sc.wired {
		return nil
	}
	buf, err := otlpwire.Encode(ctx, &p.marshaler, td)
	if err != nil {
		return fmt.Errorf("subagentmerge: encoding spans to buffer: %w", err)
	}
	if err := sc.wire.Reset(buf); err != nil {
		return fmt.Errorf("subagentmerge: indexing the encoded batch: %w", err)
	}
	sc.wired = true
	return nil
}

// hasRest reports whether spans of the call's batch go on now (queued delivery).
func (sc *scratch) hasRest() bool {
	if len(sc.follows) > 0 {
		return true
	}
	for lane := range sc.rest {
		if len(sc.rest[lane]) > 0 || len(sc.restFirst[lane]) > 0 {
			return true
		}
	}
	return false
}

// restEncodings cuts the spans of td that go on now out of its encoding, a message a
// lane (queued delivery), and one for each released trace that has spans among them
// (sc.follows, landing.go). It returns one of the latter for each slot the call took,
// encoded or, failing that, empty: every slot is filled.
func (p *subagentMerge) restEncodings(ctx context.Context, td ptrace.Traces, sc *scratch) ([deliverLanes]encodedRest, []encodedFollow, error) {
	var out [deliverLanes]encodedRest
	follows := make([]encodedFollow, len(sc.follows))
	for i, fo := range sc.follows {
		follows[i] = encodedFollow{id: fo.id, s: fo.s}
	}
	if !sc.hasRest() {
		return out, follows, nil
	}
	if err := p.wireBatch(ctx, td, sc); err != nil {
		return out, follows, err
	}
	var errs []error
	for lane := range sc.rest {
		idx, first := sc.rest[lane], sc.restFirst[lane]
		if len(idx)+len(first) == 0 {
			continue
		}
		enc, err := p.encodeRefs(td, sc, idx, first)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[lane] = encodedRest{enc: enc, spans: len(idx) + len(first)}
		out[lane].traces = sc.traceIDsOf(sc.traceIDsOf(out[lane].traces, idx), first)
	}
	for i, fo := range sc.follows {
		if len(fo.idx)+len(fo.first) == 0 {
			continue
		}
		enc, err := p.encodeRefs(td, sc, fo.idx, fo.first)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		follows[i].enc, follows[i].spans = enc, len(fo.idx)+len(fo.first)
	}
	return out, follows, errors.Join(errs...)
}

// encodeRefs encodes spans idx of td, cut out of its encoding (sc.wire), then spans
// first, which go as first emissions: copied without their revision marks, encoded
// after the others (concatenated messages decode as one).
func (p *subagentMerge) encodeRefs(td ptrace.Traces, sc *scratch, idx, first []int32) ([]byte, error) {
	var enc []byte
	if len(idx) > 0 {
		enc = sc.wire.Append(make([]byte, 0, sc.wire.Size(idx)), idx)
	}
	if len(first) == 0 {
		return enc, nil
	}
	dst := ptrace.NewTraces()
	w := newRefWriter(td, dst)
	for _, i := range first {
		w.copy(&sc.refs[i])
	}
	b, err := p.marshaler.MarshalTraces(dst)
	if err != nil {
		return enc, fmt.Errorf("subagentmerge: encoding spans that go as first emissions: %w", err)
	}
	return append(enc, b...), nil
}

// follow takes a slot of g's released trace (its shard s locked) for g's spans that go
// on now, and marks them so (landing.go): they go on the lane after what calls placed
// before them, and before what calls place after.
func (p *subagentMerge) follow(s *shard, sc *scratch, g *group) {
	k := int32(0)
	for r := g.first; r >= 0; r = sc.refs[r].next {
		if ref := &sc.refs[r]; ref.fate == fateLate {
			if k == 0 {
				sl := p.takeSlot(s, g.id)
				if sl == nil {
					return
				}
				sc.follows = append(sc.follows, following{id: g.id, s: sl})
				k = int32(len(sc.follows))
			}
			ref.follow = k
		}
	}
}

// traceIDsOf appends to dst the traces of refs idx that dst does not name yet.
func (sc *scratch) traceIDsOf(dst []pcommon.TraceID, idx []int32) []pcommon.TraceID {
	for _, i := range idx {
		if id := sc.refs[i].span.TraceID(); !slices.Contains(dst, id) {
			dst = append(dst, id)
		}
	}
	return dst
}

// rankOf is sp's version: 0 for a first emission, the re-emission's rank after it.
func rankOf(sp ptrace.Span) int64 { return genai.ReemissionOf(sp.Attributes()).Rank() }

// setRank records rank as the newest version of span id, making ranks when nil.
func setRank(ranks map[pcommon.SpanID]int64, id pcommon.SpanID, rank int64) map[pcommon.SpanID]int64 {
	if ranks == nil {
		ranks = map[pcommon.SpanID]int64{}
	}
	ranks[id] = rank
	return ranks
}

// spanVersions are where a span's versions are in a delivery (coalesce).
type spanVersions struct {
	first   int   // index of the first emission, -1 none
	newest  int   // index of the newest re-emission, -1 none
	newRank int64 // its rank
}

type traceSpan struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
}

// coalesceMaps are coalesce's maps, kept for the next delivery with the room they grew
// (a delivery of up to a few thousand spans would grow one from nothing every time).
var coalesceMaps = sync.Pool{New: func() any { m := map[traceSpan]spanVersions{}; return &m }}

// coalesceMaxPooled is the most entries of a map kept for the next delivery.
const coalesceMaxPooled = 1 << 16

// coalesce keeps one version of each span in td: its newest (a re-emission carries
// the whole span, so it has everything the versions before it had). A span whose first
// emission is in td as well goes on as a first emission with the newest version's
// content: the sink has not had it yet, and gets it created once, in its last state,
// instead of created and then updated. The tombstone's ranks then drop versions older
// than it that come later.
//
// With keepFirst (spans read back at start, which the previous process may have
// delivered without its record reaching the disk) a span's first emission goes as it
// is, followed by its newest version as an update: a repeated post is ignored (409),
// and a first emission carrying the newest content would lose it with it.
func coalesce(td ptrace.Traces, keepFirst bool) {
	mp := coalesceMaps.Get().(*map[traceSpan]spanVersions)
	byID := *mp
	defer func() {
		if len(byID) <= coalesceMaxPooled {
			clear(byID)
			coalesceMaps.Put(mp)
		}
	}()
	i := 0
	for sp := range spaniter.All(td) {
		k := traceSpan{sp.TraceID(), sp.SpanID()}
		v, seen := byID[k]
		if !seen {
			v = spanVersions{first: -1, newest: -1}
		}
		if rank := rankOf(sp); rank == 0 {
			if v.first < 0 {
				v.first = i
			}
		} else if v.newest < 0 || rank > v.newRank {
			v.newest, v.newRank = i, rank
		}
		byID[k] = v
		i++
	}
	i = 0
	spaniter.RemoveIf(td, func(sp ptrace.Span) bool {
		v := byID[traceSpan{sp.TraceID(), sp.SpanID()}]
		at := i
		i++
		switch {
		case v.newest < 0:
			return at != v.first
		case keepFirst && at == v.first:
			return false
		case at != v.newest:
			return true
		case v.first >= 0 && !keepFirst:
			asFirstEmission(sp.Attributes())
		}
		return false
	})
}

// asFirstEmission takes off a span's re-emission marks (genai.IsReemission): its
// revision, and the corrected status of a model call, which its first emission never
// carries. What the merge wrote stays.
func asFirstEmission(attrs pcommon.Map) {
	attrs.Remove(genai.AttrMergeRevision)
	if v, ok := attrs.Get(genai.AttrMergeStatus); ok && v.Str() == genai.MergeCorrected {
		attrs.Remove(genai.AttrMergeStatus)
	}
}
