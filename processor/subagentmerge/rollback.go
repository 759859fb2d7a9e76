package subagentmerge

// Stream mode: taking a refused call back out of the ledgers.

import (
	"context"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// rollback takes every ledger change of a call the next consumer refused back out, so
// the sender's retry counts as new spans, and what it re-emitted goes out again. It
// runs after the shard locks were let go, so other calls may have extended the same
// ledgers since: the refused spans are filtered out, not cut off.
func (p *subagentMerge) rollback(ctx context.Context, sc *scratch) {
	var stay []stayed
	for i := range sc.touched {
		t := &sc.touched[i]
		l := t.l
		s := &p.shards[shardIndex(l.id)]
		s.mu.Lock()
		oldCost := l.size
		if err := p.warm(s, l, p.now()); err != nil {
			p.logger.Error("taking refused spans out of a ledger failed", zap.Error(err))
		}
		var drop map[pcommon.SpanID]struct{}
		for _, id := range sc.ids[t.ids[0]:t.ids[1]] {
			if k := l.kept[id]; k != nil && k.firstPending && !k.pending && !slices.Contains(t.settled(sc), id) {
				// another call settled it, and that version is the one counted (or,
				// refused, gives it back): it stays, and the sender's retry of it is a
				// duplicate, not a first emission counted again
				k.unanswered = false
				stay = append(stay, stayed{l, id, k.enc})
				continue
			}
			if drop == nil {
				drop = map[pcommon.SpanID]struct{}{}
			}
			drop[id] = struct{}{}
			if k := l.kept[id]; k != nil {
				l.keptLen -= int64(len(k.enc))
				if k.pending {
					l.pending--
				}
				delete(l.kept, id)
			}
		}
		if drop != nil {
			l.spans = l.spans.without(drop)
			var err error
			kept, err := p.filterSpans(joinChunks(nil, l.skel), drop)
			if err != nil {
				p.logger.Error("taking refused spans out of a ledger failed", zap.Error(err))
			}
			l.skel, l.skelLen = nil, 0
			l.dropFacts()
			l.addSkel(kept, nil)
		}
		if t.re[1] > t.re[0] {
			l.lastEmit = t.prevLastEmit
		}
		if s.led.byID[l.id] != l {
			// taken out by another refused call that had created it and brought only
			// spans this call repeated (below): nothing of it is left to go out
			s.mu.Unlock()
			continue
		}
		p.reopen(s, l, sc.ids[t.re[0]:t.re[1]], t.settled(sc), p.now())
		if t.created && len(l.spans.keys) == 0 {
			s.led.remove(l)
			p.nLedgers.Add(-1)
			p.ledgerBytes.Add(-oldCost)
			s.mu.Unlock()
			continue
		}
		if drop != nil {
			// the refused spans may have been what made the trace complete
			s.led.setComplete(l, p.stateWith(&l.spans) == stComplete)
		}
		p.ledgerBytes.Add(l.cost() - oldCost)
		l.size = l.cost()
		s.mu.Unlock()
	}
	p.commitStayed(ctx, sc, stay)
	for i := range sc.touched {
		p.unwait(sc.touched[i].l)
	}
	// the call's chunk is never written: what it recorded was refused
	sc.chunkSkel, sc.chunkSent = sc.chunkSkel[:0], sc.chunkSent[:0]
}

// stayed is a span of a refused call that stays in its ledger (another call settled it),
// with its first version.
type stayed struct {
	l   *ledger
	id  pcommon.SpanID
	enc []byte
}

// commitStayed writes, with storage, a chunk of the spans of a refused call that stay in
// their ledgers: their skeletons (cut out of the call's) and first versions. A ledger
// holds what it has on disk; without this chunk a restart would not have them (the
// sender's retry of them is a duplicate, and writes nothing).
func (p *subagentMerge) commitStayed(ctx context.Context, sc *scratch, stay []stayed) {
	if p.store == nil || len(stay) == 0 {
		return
	}
	ids := map[pcommon.SpanID]struct{}{}
	var sent []byte
	for _, st := range stay {
		ids[st.id] = struct{}{}
		sent = append(sent, st.enc...)
	}
	skel, err := p.keepSpans(sc.chunkSkel, ids)
	if err != nil {
		p.logger.Error("storing the spans a refused call leaves in their ledgers failed", zap.Error(err))
		return
	}
	seq := p.store.draw()
	held := 0
	var unheld []pcommon.TraceID
	for i, st := range stay {
		if i > 0 && stay[i-1].l == st.l {
			continue // one touched entry a trace: a ledger's stays are together
		}
		if p.holdChunk(st.l, seq) {
			held++
		} else {
			unheld = append(unheld, st.l.id) // ended meanwhile: marked, not brought back
		}
	}
	if held == 0 {
		p.store.undraw(seq)
		return
	}
	chunk := protowire.AppendVarint(nil, uint64(len(skel)))
	chunk = append(append(chunk, skel...), sent...)
	// a failed write is retried with the next one (persister.write)
	if err := p.store.write(ctx, seq, chunk, unheld...); err != nil {
		p.logger.Error("storing the spans a refused call leaves in their ledgers failed", zap.Error(err))
	}
}

// reopen marks the re-emissions of l that the next consumer refused (ids, and the
// calls they settled) as not sent, so l goes out again at at (called under s's lock).
func (p *subagentMerge) reopen(s *shard, l *ledger, ids, settled []pcommon.SpanID, at int64) {
	giveBack(l, ids, settled)
	if len(ids) > 0 {
		s.led.schedule(l, at)
	}
}

// giveBack is reopen's part on l itself, for a ledger out of its shard too (ending: a
// refused call that ended it takes it back, and schedules it then).
func giveBack(l *ledger, ids, settled []pcommon.SpanID) {
	for _, id := range ids {
		if k := l.kept[id]; k != nil {
			k.fp = 0 // differs from any merge result: goes out again
		}
	}
	for _, id := range settled {
		if k := l.kept[id]; k != nil && !k.pending {
			k.pending = true // its settled version was refused: not counted yet
			l.pending++
		}
	}
	l.unsettle(settled)
}

// keepSpans returns the encoded traces b with only the spans in keep.
func (p *subagentMerge) keepSpans(b []byte, keep map[pcommon.SpanID]struct{}) ([]byte, error) {
	return p.filterWhere(b, func(id pcommon.SpanID) bool { _, ok := keep[id]; return !ok })
}

// filterSpans returns the encoded traces b without the spans in drop.
func (p *subagentMerge) filterSpans(b []byte, drop map[pcommon.SpanID]struct{}) ([]byte, error) {
	return p.filterWhere(b, func(id pcommon.SpanID) bool { _, gone := drop[id]; return gone })
}

// filterWhere returns the encoded traces b without the spans gone says.
func (p *subagentMerge) filterWhere(b []byte, gone func(pcommon.SpanID) bool) ([]byte, error) {
	if len(b) == 0 {
		return b, nil
	}
	td, err := p.unmarshaler.UnmarshalTraces(b)
	if err != nil {
		return b, err
	}
	spaniter.RemoveIf(td, func(sp ptrace.Span) bool { return gone(sp.SpanID()) })
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
