package subagentmerge

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/otlpwire"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// touched is what one call did to one ledger, kept until the next consumer answered:
// a refused call is taken back out of the ledger (rollback), so the sender's retry is
// new spans again and not a duplicate.
type touched struct {
	l            *ledger
	ids          [2]int32 // the call's new spans: scratch.ids[ids[0]:ids[1]]
	re           [2]int32 // the spans it re-emitted: scratch.ids[re[0]:re[1]]
	st           [2]int32 // the pending calls those settled: scratch.ids[st[0]:st[1]]
	fr           [2]int32 // its new spans that went out pending: scratch.ids[fr[0]:fr[1]]
	created      bool
	prevLastEmit int64
}

// settled returns the pending calls the call's re-emissions of t.l settled.
func (t *touched) settled(sc *scratch) []pcommon.SpanID { return sc.ids[t.st[0]:t.st[1]] }

// consumeStream is ConsumeTraces in stream mode: every span goes on in this call, with
// what the merge says of it given its trace's ledger; dispatching spans whose merged
// usage changed go on again with it when their settle window allows (reemit.go).
func (p *subagentMerge) consumeStream(ctx context.Context, td ptrace.Traces) error {
	sc := p.pool.Get().(*scratch)
	defer p.putScratch(sc)
	var c counts
	sc.sw.reset()
	p.indexBatch(td, sc, true)
	now := p.now()
	out := ptrace.NewTraces()
	removed := false
	var errs []error
	for gi := range sc.groups {
		rm, err := p.streamTrace(sc, gi, now, &c, out)
		removed = removed || rm
		if err != nil {
			errs = append(errs, err)
		}
	}
	gone := p.endOverCapacity(now, &c, out)
	if removed {
		removeNotKept(td, sc.refs)
	}
	out.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	p.tel.record(ctx, &c)
	if td.ResourceSpans().Len() > 0 {
		// the consumers behind share one encoding of td (otlpwire.Encode)
		sctx, done := otlpwire.WithShared(ctx)
		err := p.next.ConsumeTraces(sctx, td)
		done()
		if err != nil {
			p.rollback(ctx, sc)
			p.reinstate(gone, now)
			return errors.Join(append(errs, err)...)
		}
	}
	if err := p.commitChunk(ctx, sc, gone); err != nil {
		// the spans went on; the chunk is written with the next write that succeeds
		p.logger.Error("storage: writing the ledgers failed; refusing the request (retryable)", zap.Error(err))
		errs = append(errs, fmt.Errorf("subagentmerge: storing the ledgers: %w", err))
	}
	p.acknowledged(sc)
	if len(errs) == 0 && c.duplicates > 0 {
		// a refused request's chunk: its retry, acknowledged now, wrote nothing
		if err := p.flushFailed(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// acknowledged runs once the next consumer took a call's spans: what its re-emissions
// settled is final, the ledgers can forget what no longer changes, and they may end.
func (p *subagentMerge) acknowledged(sc *scratch) {
	for i := range sc.touched {
		t := &sc.touched[i]
		l := t.l
		s := &p.shards[shardIndex(l.id)]
		s.mu.Lock()
		l.waiting--
		if t.st[1] == t.st[0] && t.fr[1] == t.fr[0] {
			s.mu.Unlock()
			continue
		}
		l.unsettle(t.settled(sc)) // out of its shard too: a ledger taken back keeps it
		prune := t.st[1] > t.st[0]
		for _, id := range sc.ids[t.fr[0]:t.fr[1]] {
			if k := l.kept[id]; k != nil {
				k.unanswered = false
				prune = prune || !k.pending // another call settled it: pruning waited for this
			}
		}
		if prune && s.led.byID[l.id] == l {
			if !l.scheduled() {
				_ = p.warm(s, l, p.now()) // a ledger that does not thaw is not pruned
				p.prune(l)
				p.ledgerBytes.Add(l.cost() - l.size)
				l.size = l.cost()
			}
		}
		s.mu.Unlock()
	}
}

// indexBatch is pass 1: every span of td becomes a ref, chained by trace. With skel
// (stream mode) each span's skeleton is written in the same pass over its attributes
// that reads its key.
func (p *subagentMerge) indexBatch(td ptrace.Traces, sc *scratch, skel bool) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		res := rss.At(i).Resource()
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			scope := sss.At(j).Scope()
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				idx := int32(len(sc.refs))
				from := int32(len(sc.asks))
				var f spanFacts
				var sk [2]int32
				if skel {
					sk[0] = int32(len(sc.sw.spans))
					f = sc.sw.add(sp)
					sk[1] = int32(len(sc.sw.spans))
				} else {
					f = factsOf(sp)
				}
				var key spanKey
				key, sc.asks = keyFrom(sp, &f, sc.asks)
				sc.refs = append(sc.refs, ref{
					span: sp, res: res, scope: scope, rs: int32(i), ss: int32(j), next: -1,
					key: key, asks: [2]int32{from, int32(len(sc.asks))}, skel: sk,
					rank: f.version.Rank(),
				})
				tid := sp.TraceID()
				if tid.IsEmpty() {
					continue // cannot be grouped; passed on as is
				}
				g, ok := sc.byTrace[tid]
				if !ok {
					sc.byTrace[tid] = int32(len(sc.groups))
					sc.groups = append(sc.groups, group{id: tid, first: idx, last: idx})
					continue
				}
				sc.refs[sc.groups[g].last].next = idx
				sc.groups[g].last = idx
			}
		}
	}
}

// streamTrace adds one trace's new spans of the batch to its ledger, writes onto them
// what the merge now says, and re-emits into out what changed, when due. It reports
// whether it dropped duplicates from td.
func (p *subagentMerge) streamTrace(sc *scratch, gi int, now int64, c *counts, out ptrace.Traces) (bool, error) {
	g := &sc.groups[gi]
	s := &p.shards[shardIndex(g.id)]
	s.mu.Lock()
	defer s.mu.Unlock()

	l := s.led.byID[g.id]
	if l == nil && s.led.ending[g.id] != nil {
		l = p.revive(s, s.led.ending[g.id])
	}
	t := touched{l: l}
	if l == nil {
		// lastEmit starts at creation: even the first re-emission waits for a window
		l = &ledger{id: g.id, lastSeen: now, lastEmit: now, kept: map[pcommon.SpanID]*keptSpan{}}
		s.led.add(l)
		p.nLedgers.Add(1)
		t.l, t.created = l, true
	}
	t.prevLastEmit = l.lastEmit
	l.waiting++ // until the call is answered (acknowledged, rollback)
	warmErr := p.warm(s, l, now)
	removed := false
	sc.parts, sc.facts = sc.parts[:0], sc.facts[:0]
	// a ledger whose facts were dropped reads them all from its skeleton at its next
	// merge run (mergeLedger): these would be thrown away
	readFacts := l.factParts == len(l.skel)
	t.ids[0] = int32(len(sc.ids))
	for r := g.first; r >= 0; r = sc.refs[r].next {
		ref := &sc.refs[r]
		if l.spans.has(ref.key.id) {
			ref.fate = fateDrop
			c.duplicates++
			removed = true
			continue
		}
		l.spans.add(ref.key, sc.asks[ref.asks[0]:ref.asks[1]])
		sc.parts = append(sc.parts, ref.skel)
		if readFacts {
			sc.facts = append(sc.facts, merge.FactOf(ref.span, ref.key.role))
		}
		sc.ids = append(sc.ids, ref.key.id)
	}
	t.ids[1] = int32(len(sc.ids))
	t.re = [2]int32{t.ids[1], t.ids[1]}
	if t.ids[0] == t.ids[1] {
		// only duplicates; warm may have thawed it, which the budget counts
		p.ledgerBytes.Add(l.cost() - l.size)
		l.size = l.cost()
		sc.touched = append(sc.touched, t)
		return removed, warmErr
	}
	delta := sc.sw.messageOf(sc.parts)
	l.addSkel(delta, sc.facts)
	s.led.touch(l, now)
	err := warmErr

	// The new spans go on carrying what the merge says of them. Most need no merge run
	// for that (effect): nothing of theirs changes, or only a tool span's status,
	// read off the span keys; the dispatchers they change are re-emitted later, once
	// per settle window, from one run of the merge.
	var view mergedView
	eff := effectNone
	below := &modelsBelow{s: &l.spans}
	if err == nil {
		eff = p.effectOf(sc, g, l, below)
	}
	if eff == effectInline {
		if view, err = p.mergeLedger(l); err != nil {
			eff = effectNone
		}
	}
	for r := g.first; r >= 0; r = sc.refs[r].next {
		ref := &sc.refs[r]
		if ref.fate == fateDrop {
			continue
		}
		attrs := ref.span.Attributes()
		_, named := attrs.Get(genai.AttrCaller)
		switch eff {
		case effectInline:
			if v, ok := view.attrs(ref.key.id); ok {
				writeMerged(attrs, v)
			}
		case effectLater:
			if ref.key.kind&kindTool != 0 {
				if st := l.spans.toolStatus(l.spans.find(ref.key.id), below); st != "" {
					if _, marked := attrs.Get(genai.AttrMergeStatus); !marked {
						attrs.PutStr(genai.AttrMergeStatus, st)
					}
				}
			}
		}
		countStatus(attrs, c)
		// a model call that names no caller while an ancestor of it is missing: the
		// trace's shape may yet put it in a subagent's run
		unsettled := ref.key.kind&kindModel != 0 && !named && !l.spans.rooted(ref.key)
		if !mayChange(ref, unsettled) {
			continue
		}
		if unsettled {
			if _, has := attrs.Get(genai.AttrCaller); !has {
				attrs.PutBool(genai.AttrCallerPending, true)
			}
		}
		enc, kerr := p.keep(l, &sc.enc, ref.span, ref.res, ref.scope)
		if kerr != nil {
			err = errors.Join(err, kerr)
			continue
		}
		if k := l.kept[ref.key.id]; k.pending {
			k.unanswered = true
			sc.fresh = append(sc.fresh, ref.key.id)
		}
		if p.store != nil {
			sc.chunkSent = append(sc.chunkSent, enc...) // the call's chunk (commitChunk)
		}
	}

	s.led.setComplete(l, p.stateWith(&l.spans) == stComplete)
	t.re[0] = int32(len(sc.ids))
	settledFrom := len(l.settledAt)
	dirty := eff == effectLater || (eff == effectInline && p.dirty(l, &view)) || (eff == effectNone && p.pendingRooted(l))
	switch {
	case dirty && (l.complete || now-l.lastEmit >= p.settle) && eff == effectInline:
		s.led.unschedule(l)
		if sc.ids, err = p.reemit(l, &view, out, c, now, sc.ids, false, p.settledSink(sc)); err != nil {
			err = fmt.Errorf("subagentmerge: re-emitting corrected spans: %w", err)
		}
	case (dirty && l.complete) || (l.complete && l.scheduled()):
		// its last spans came: what waited for the settle window goes now
		if ferr := p.flushInto(s, l, out, c, now, sc); ferr != nil {
			err = errors.Join(err, ferr)
		}
	case dirty:
		s.led.schedule(l, max(l.lastEmit+p.settle, now))
	}
	t.re[1] = int32(len(sc.ids))
	sc.ids = append(sc.ids, l.settledSince(settledFrom)...)
	t.st = [2]int32{t.re[1], int32(len(sc.ids))}
	sc.ids = append(sc.ids, sc.fresh...)
	t.fr = [2]int32{t.st[1], int32(len(sc.ids))}
	sc.fresh = sc.fresh[:0]
	if !l.scheduled() && l.complete {
		p.prune(l) // ancestors that settle a kept span have all come by now
	}

	if p.store != nil {
		sc.chunkSkel = append(sc.chunkSkel, delta...)
	}
	// l.size, not its value on entry: a flush above counted its part already
	p.ledgerBytes.Add(l.cost() - l.size)
	l.size = l.cost()
	sc.touched = append(sc.touched, t)
	return removed, err
}

// keep records sp (as it goes on now) as a span that may go out again, and returns its
// encoding (made by se).
func (p *subagentMerge) keep(l *ledger, se *spanEncoder, sp ptrace.Span, res pcommon.Resource, scope pcommon.InstrumentationScope) ([]byte, error) {
	if err := l.thaw(); err != nil {
		return nil, err
	}
	enc, err := se.encode(&p.marshaler, sp, res, scope)
	if err != nil {
		return nil, fmt.Errorf("subagentmerge: encoding a span kept for re-emission: %w", err)
	}
	k := &keptSpan{fp: fingerprint(sp.Attributes()), enc: enc}
	if old := l.kept[sp.SpanID()]; old != nil {
		l.keptLen -= int64(len(old.enc))
		if old.pending {
			l.pending--
		}
		k.firstPending = old.firstPending
	}
	if v, ok := sp.Attributes().Get(genai.AttrCallerPending); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
		k.pending, k.firstPending = true, true
		l.pending++
	}
	l.kept[sp.SpanID()] = k
	l.keptLen += int64(len(enc))
	return enc, nil
}

// dirty reports whether a kept span now reads differently from its last version out.
func (p *subagentMerge) dirty(l *ledger, view *mergedView) bool {
	for id, k := range l.kept {
		fp, _, ok := view.fingerprint(id, k)
		if !ok {
			continue
		}
		if fp != k.fp {
			return true
		}
		if k.pending && p.settled(l, id, view.namesCaller(id)) {
			return true
		}
	}
	return false
}

// settled reports whether the caller of kept model call id is settled: the merge gave
// it one (named: what the merge says of the span names a caller,
// mergedView.namesCaller), or every ancestor of it is there.
func (p *subagentMerge) settled(l *ledger, id pcommon.SpanID, named bool) bool {
	if named {
		return true
	}
	i := l.spans.find(id)
	return i >= 0 && l.spans.rooted(l.spans.keys[i])
}

// pendingRooted reports whether a pending call's ancestors have all arrived, so its
// settled version can go (checked when a batch changes nothing the merge writes).
func (p *subagentMerge) pendingRooted(l *ledger) bool {
	if l.pending == 0 {
		return false
	}
	for id, k := range l.kept {
		if k.pending && p.settled(l, id, false) {
			return true
		}
	}
	return false
}

// writeMerged replaces dst's merge-written attributes with the merge's view of the span,
// and gives it the caller the trace's shape says, unless it names its own.
func writeMerged(dst, view pcommon.Map) {
	copyMergeWritten(dst, view)
	if _, has := dst.Get(genai.AttrCaller); !has {
		if v, ok := view.Get(genai.AttrCaller); ok {
			dst.PutStr(genai.AttrCaller, v.AsString())
		}
	}
}

// countStatus counts a tool span going out merged or orphan.
func countStatus(attrs pcommon.Map, c *counts) {
	if v, ok := attrs.Get(genai.AttrMergeStatus); ok {
		switch v.Str() {
		case genai.MergeMerged:
			c.merged++
		case genai.MergeOrphan:
			c.orphans++
		}
	}
}
