package subagentmerge

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// touched is what one call did to one ledger, kept until the next consumer answered:
// a refused call is taken back out of the ledger (rollback), so the sender's retry is
// new spans again and not a duplicate.
type touched struct {
	l            *ledger
	ids          [2]int32 // the call's new spans: scratch.ids[ids[0]:ids[1]]
	re           [2]int32 // the spans it re-emitted: scratch.ids[re[0]:re[1]]
	created      bool
	prevLastEmit int64
}

// consumeStream is ConsumeTraces in stream mode: every span goes on in this call, with
// what the merge says of it given its trace's ledger; dispatching spans whose merged
// usage changed go on again with it when their settle window allows (reemit.go).
func (p *subagentMerge) consumeStream(ctx context.Context, td ptrace.Traces) error {
	sc := p.pool.Get().(*scratch)
	defer p.putScratch(sc)
	var c counts
	p.indexBatch(td, sc)
	now := p.now()
	out := ptrace.NewTraces()
	removed := false
	var errs []error
	for gi := range sc.groups {
		rm, err := p.streamTrace(td, sc, gi, now, &c, out)
		removed = removed || rm
		if err != nil {
			errs = append(errs, err)
		}
	}
	ended := p.endOverCapacity(now, &c, out)
	if removed {
		removeNotKept(td, sc.refs)
	}
	out.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	p.tel.record(ctx, &c)
	if td.ResourceSpans().Len() > 0 {
		if err := p.next.ConsumeTraces(ctx, td); err != nil {
			p.rollback(sc)
			p.forgetLedgers(ctx, ended)
			return errors.Join(append(errs, err)...)
		}
	}
	if err := p.commitChunk(ctx, sc); err != nil {
		// the spans went on; the chunk is written with the next write that succeeds
		p.logger.Error("storage: writing the ledgers failed; refusing the request (retryable)", zap.Error(err))
		errs = append(errs, fmt.Errorf("subagentmerge: storing the ledgers: %w", err))
	}
	p.forgetLedgers(ctx, ended)
	return errors.Join(errs...)
}

// indexBatch is pass 1: every span of td becomes a ref, chained by trace.
func (p *subagentMerge) indexBatch(td ptrace.Traces, sc *scratch) {
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
				var key spanKey
				key, sc.asks = keyOf(sp, sc.asks)
				sc.refs = append(sc.refs, ref{
					span: sp, res: res, scope: scope, rs: int32(i), ss: int32(j), next: -1,
					key: key, asks: [2]int32{from, int32(len(sc.asks))},
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
func (p *subagentMerge) streamTrace(td ptrace.Traces, sc *scratch, gi int, now int64, c *counts, out ptrace.Traces) (bool, error) {
	g := &sc.groups[gi]
	s := &p.shards[shardIndex(g.id)]
	s.mu.Lock()
	defer s.mu.Unlock()

	l := s.led.byID[g.id]
	t := touched{l: l}
	if l == nil {
		l = &ledger{id: g.id, lastSeen: now}
		s.led.byID[g.id] = l
		s.led.pushBack(l)
		p.nLedgers.Add(1)
		t.l, t.created = l, true
	}
	t.prevLastEmit = l.lastEmit
	oldCost := l.size // 0 for a new ledger
	removed := false
	sc.sw.reset()
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
		sc.sw.add(ref.span)
		sc.ids = append(sc.ids, ref.key.id)
	}
	t.ids[1] = int32(len(sc.ids))
	if t.ids[0] == t.ids[1] {
		t.re = [2]int32{t.ids[1], t.ids[1]}
		sc.touched = append(sc.touched, t)
		return removed, nil // only duplicates
	}
	delta := sc.sw.message()
	l.skel = append(l.skel, delta...)
	s.led.touch(l, now)

	view, err := p.mergeLedger(l)
	if err != nil {
		p.ledgerBytes.Add(l.cost() - oldCost)
		l.size = l.cost()
		t.re = [2]int32{t.ids[1], t.ids[1]}
		sc.touched = append(sc.touched, t)
		return removed, fmt.Errorf("subagentmerge: merging a trace's ledger: %w", err)
	}

	// The new spans go on carrying what the merge says of them; those that may need to
	// go out again are kept whole.
	var sent ptrace.Traces
	if l.out == nil {
		l.out = map[pcommon.SpanID]uint64{}
	}
	for r := g.first; r >= 0; r = sc.refs[r].next {
		ref := &sc.refs[r]
		if ref.fate == fateDrop {
			continue
		}
		now, ok := view.byID[ref.key.id]
		if !ok {
			continue
		}
		_, named := ref.span.Attributes().Get(genai.AttrCaller)
		writeMerged(ref.span.Attributes(), now.Attributes())
		countStatus(ref.span.Attributes(), c)
		if !mayChange(ref, named, &l.spans) {
			continue
		}
		if sent == (ptrace.Traces{}) {
			sent = ptrace.NewTraces()
		}
		appendUnder(sent, ref.span, ref.res, ref.scope)
		l.out[ref.key.id] = fingerprint(now.Attributes())
	}
	var sentDelta []byte
	if sent != (ptrace.Traces{}) {
		if sentDelta, err = p.marshaler.MarshalTraces(sent); err != nil {
			return removed, fmt.Errorf("subagentmerge: encoding spans kept for re-emission: %w", err)
		}
		l.sent = append(l.sent, sentDelta...)
	}

	// What went out before and now reads differently makes the ledger dirty.
	dirty := false
	for id, fp := range l.out {
		if now, ok := view.byID[id]; ok && fingerprint(now.Attributes()) != fp {
			dirty = true
			break
		}
	}
	st := l.spans.state()
	l.complete = st == stComplete || (st == stSettle && p.settle == 0)
	t.re[0] = int32(len(sc.ids))
	if dirty {
		if l.complete || now-l.lastEmit >= p.settle {
			sc.ids, err = p.reemit(l, view, out, c, now, sc.ids)
			if err != nil {
				err = fmt.Errorf("subagentmerge: re-emitting corrected spans: %w", err)
			}
			s.led.unschedule(l)
		} else {
			s.led.schedule(l, l.lastEmit+p.settle)
		}
	}
	t.re[1] = int32(len(sc.ids))

	if p.store != nil {
		p.addToChunk(sc, delta, sentDelta)
	}
	p.ledgerBytes.Add(l.cost() - oldCost)
	l.size = l.cost()
	sc.touched = append(sc.touched, t)
	return removed, err
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

// mayChange reports whether what the merge writes on ref's span can still change as
// more of its trace arrives: a model call that asked for tool calls (its subagents'
// usage may still come), a model call that names no caller while some ancestor of it
// is still missing (the trace's shape may yet say it runs in a subagent), or a tool
// span that went out without being merged (its dispatcher or subtree may still come).
func mayChange(ref *ref, named bool, spans *spanSet) bool {
	if ref.key.kind&kindModel != 0 {
		return ref.asks[1] > ref.asks[0] || (!named && !spans.rooted(ref.key))
	}
	attrs := ref.span.Attributes()
	if ref.key.kind&kindTool == 0 && !genai.IsToolCallSpan(ref.span.Name(), attrs) {
		return false
	}
	return mergeStatus(attrs) != genai.MergeMerged
}

// rooted reports whether every ancestor of k, up to a local root, is in the set.
func (s *spanSet) rooted(k spanKey) bool {
	for steps := 0; steps <= len(s.keys); steps++ {
		if k.root() {
			return true
		}
		i := s.find(k.parent)
		if i < 0 {
			return false
		}
		k = s.keys[i]
	}
	return false // a cycle of parent links
}

// mergedView is the merge run over a ledger's whole skeleton.
type mergedView struct {
	byID map[pcommon.SpanID]ptrace.Span
}

// mergeLedger decodes l's skeleton and runs the merge over it.
func (p *subagentMerge) mergeLedger(l *ledger) (mergedView, error) {
	s, err := p.unmarshaler.UnmarshalTraces(l.skel)
	if err != nil {
		// only this processor's own encoding produced these bytes
		return mergedView{}, err
	}
	spans := appendSpans(nil, s)
	v := mergedView{byID: make(map[pcommon.SpanID]ptrace.Span, len(spans))}
	for _, sp := range spans {
		v.byID[sp.SpanID()] = sp
	}
	merge.Apply(spans)
	return v, nil
}

// rollback takes every ledger change of a call the next consumer refused back out, so
// the sender's retry counts as new spans, and what it re-emitted goes out again. It
// runs after the shard locks were let go, so other calls may have extended the same
// ledgers since: the refused spans are filtered out, not cut off.
func (p *subagentMerge) rollback(sc *scratch) {
	for i := range sc.touched {
		t := &sc.touched[i]
		l := t.l
		s := &p.shards[shardIndex(l.id)]
		s.mu.Lock()
		oldCost := l.size
		var drop map[pcommon.SpanID]struct{}
		for _, id := range sc.ids[t.ids[0]:t.ids[1]] {
			if drop == nil {
				drop = map[pcommon.SpanID]struct{}{}
			}
			drop[id] = struct{}{}
			delete(l.out, id)
		}
		if drop != nil {
			l.spans = l.spans.without(drop)
			var err error
			if l.skel, err = p.filterSpans(l.skel, drop); err == nil {
				l.sent, err = p.filterSpans(l.sent, drop)
			}
			if err != nil {
				p.logger.Error("taking refused spans out of a ledger failed", zap.Error(err))
			}
		}
		for _, id := range sc.ids[t.re[0]:t.re[1]] {
			if _, ok := l.out[id]; ok {
				l.out[id] = 0 // differs from any merge result: goes out again
			}
		}
		if t.re[1] > t.re[0] {
			l.lastEmit = t.prevLastEmit
			s.led.schedule(l, p.now())
		}
		if s.led.byID[l.id] != l {
			s.mu.Unlock()
			continue // ended meanwhile: its bytes are counted off already
		}
		if t.created && len(l.spans.keys) == 0 {
			s.led.remove(l)
			p.nLedgers.Add(-1)
			p.ledgerBytes.Add(-oldCost)
			s.mu.Unlock()
			continue
		}
		p.ledgerBytes.Add(l.cost() - oldCost)
		l.size = l.cost()
		s.mu.Unlock()
	}
	// the call's chunk is never written: what it recorded was refused
	sc.chunkSkel, sc.chunkSent = sc.chunkSkel[:0], sc.chunkSent[:0]
}

// filterSpans returns the encoded traces b without the spans in drop.
func (p *subagentMerge) filterSpans(b []byte, drop map[pcommon.SpanID]struct{}) ([]byte, error) {
	if len(b) == 0 {
		return b, nil
	}
	td, err := p.unmarshaler.UnmarshalTraces(b)
	if err != nil {
		return b, err
	}
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
				_, gone := drop[sp.SpanID()]
				return gone
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	return p.marshaler.MarshalTraces(td)
}

// without returns the set less the spans in drop. The asks of dropped model calls
// stay: only the completeness rule reads them, and an extra one only keeps the trace
// from counting as complete until the retry brings the span back.
func (s spanSet) without(drop map[pcommon.SpanID]struct{}) spanSet {
	var out spanSet
	for _, k := range s.keys {
		if _, gone := drop[k.id]; !gone {
			out.add(k, nil)
		}
	}
	out.asks = s.asks
	return out
}
