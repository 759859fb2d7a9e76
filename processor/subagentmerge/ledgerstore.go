package subagentmerge

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// In stream mode, with `storage`, the ledgers are kept on disk (persist.go does the
// chunk bookkeeping, under the "ledger/" prefix): what one request added to the
// ledgers it touched is one chunk, written after the next consumer accepted the
// request's spans and before the request is acknowledged:
//
//	uvarint(len(skel)) skel sent
//
// skel is the skeletons of the request's new spans (concatenated TracesData messages,
// every trace's), sent the first version of each span that may be re-emitted and the
// versions that settled a pending caller (read over the first ones at start, so the
// call is not settled, and counted, again); the sweeper and shutdown write such settled
// versions as chunks without skeletons (commitSettled). A chunk
// counts the ledgers holding data of it and is deleted when the last of them ends; an
// ended ledger's part of a chunk that lives on is marked ended (persist_ends.go).
// Corrections are not written: at start the ledgers are rebuilt from their chunks, the
// merge runs over each again, and whatever reads differently from its first version
// is re-emitted, so a restart converges to the same numbers. The spans themselves are
// never written here: the exporters' persistent queues hold them.

// commitChunk writes the call's chunk and counts it on every ledger that holds data of
// it (holdChunk: each does, as it waits on the call); a chunk no ledger holds is not
// written. gone are the ledgers the call ended for room: they let go of their chunks
// (forgetLedgers) in the same transaction, the call's own included.
func (p *subagentMerge) commitChunk(ctx context.Context, sc *scratch, gone []ended) error {
	if p.store == nil || len(sc.chunkSkel)+len(sc.chunkSent) == 0 {
		return p.forgetLedgers(ctx, gone...)
	}
	seq := p.store.draw()
	refs := 0
	var unheld []pcommon.TraceID
	for i := range sc.touched {
		t := &sc.touched[i]
		if t.ids[0] == t.ids[1] {
			continue
		}
		if p.holdChunk(t.l, seq) {
			refs++
		} else {
			unheld = append(unheld, t.l.id)
		}
	}
	if refs == 0 {
		p.store.undraw(seq)
		return p.forgetLedgers(ctx, gone...)
	}
	sc.chunk = protowire.AppendVarint(sc.chunk[:0], uint64(len(sc.chunkSkel)))
	sc.chunk = append(sc.chunk, sc.chunkSkel...)
	sc.chunk = append(sc.chunk, sc.chunkSent...)
	holds, revived := p.endedHolds(ctx, gone)
	err := p.store.writeForgetting(ctx, []chunkWrite{{seq, sc.chunk, unheld}}, holds)
	return errors.Join(err, p.settleRevived(ctx, revived))
}

// forgetLedgers lets go of ended ledgers whose last re-emissions were taken (endedHolds),
// and deletes their chunks once no ledger holds them, marking the ledgers ended in those
// that live on (persist_ends.go). Its error is settleRevived's (a deletion that fails
// goes with the next write, and is only logged).
func (p *subagentMerge) forgetLedgers(ctx context.Context, ends ...ended) error {
	holds, revived := p.endedHolds(ctx, ends)
	if p.store != nil && len(holds) > 0 {
		if err := p.store.forget(ctx, holds); err != nil {
			p.logger.Warn("storage: deleting the chunks of ended ledgers failed", zap.Error(err))
		}
	}
	return p.settleRevived(ctx, revived)
}

// endedHolds lets go of the ended ledgers ends, whose last re-emissions were taken, and
// returns the holds they let go of: the chunks they held. One a call took back meanwhile
// (revive) lets go of nothing: it stays, what its end settled now counted; it is among
// revived, for settleRevived. Only the ends that stay are counted as released: one taken
// back is counted when it ends for good, and one whose re-emissions were refused is
// taken back before it gets here (reinstate).
func (p *subagentMerge) endedHolds(ctx context.Context, ends []ended) (holds []chunkHold, revived []ended) {
	if len(ends) == 0 {
		return nil, nil
	}
	var c counts
	for _, e := range ends {
		s := &p.shards[shardIndex(e.l.id)]
		s.mu.Lock()
		back := e.l.revived
		if back {
			e.l.revived = false
			e.l.unsettle(e.settled)
		} else if s.led.ending[e.l.id] == e.l {
			delete(s.led.ending, e.l.id)
		}
		s.mu.Unlock()
		if back {
			revived = append(revived, e)
			continue
		}
		c.released[e.reason]++
		for _, seq := range e.seqs {
			holds = append(holds, chunkHold{e.l.id, seq})
		}
	}
	p.tel.record(ctx, &c)
	return holds, revived
}

// settleRevived stores, with storage, the versions that settled calls in the ends of
// ledgers a call took back, once those were taken (commitSettled), and only then stops
// their waiting on the end's answer.
func (p *subagentMerge) settleRevived(ctx context.Context, revived []ended) error {
	var items []settledOf
	for _, e := range revived {
		if len(e.settledEnc) > 0 {
			items = append(items, settledOf{e.l, e.settledEnc})
		}
	}
	err := p.commitSettled(ctx, items)
	for _, e := range revived {
		p.unwait(e.l)
	}
	return err
}

// unwait ends a wait on l (ledger.waiting) once the call or sweep that waited on it was
// answered and what it settled or kept is stored: from then on l may end.
func (p *subagentMerge) unwait(l *ledger) {
	s := &p.shards[shardIndex(l.id)]
	s.mu.Lock()
	l.waiting--
	s.mu.Unlock()
}

// holdChunk counts chunk seq on l, which then holds it until it ends, and reports
// whether it did: a ledger no longer in its shard holds nothing more. The calls and
// sweeps that store a chunk wait on its ledgers until it is stored (ledger.waiting),
// so only a ledger a refused call took out (one it had created) is no longer there.
func (p *subagentMerge) holdChunk(l *ledger, seq uint64) bool {
	s := &p.shards[shardIndex(l.id)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.led.byID[l.id] != l {
		return false
	}
	l.seqs = append(l.seqs, seq)
	p.store.ref(seq)
	return true
}

// splitChunk reads a ledger chunk's two parts.
func splitChunk(b []byte) (skel, sent []byte, err error) {
	n, w := protowire.ConsumeVarint(b)
	if w < 0 || uint64(len(b)-w) < n {
		return nil, nil, errors.New("ledger chunk: bad length prefix")
	}
	return b[w : w+int(n)], b[w+int(n):], nil
}

// restoreStream rebuilds the ledgers from the chunks a previous process left, in the
// order written, then marks dirty every ledger whose merge now reads differently from
// the first versions on disk, so the sweeper re-emits them.
func (p *subagentMerge) restoreStream(ctx context.Context) error {
	st := p.store
	now := p.now()
	var errs []error
	chunks, spans := 0, 0
	// the ledgers restored, each with the settled versions of spans no chunk read so far
	// had (settledOnly)
	restored := map[*ledger][]ptrace.Span{}
	var sw skeletonWriter
	// the markers first: they name chunks before them (persist_ends.go)
	skip, markers, err := st.readEnds(ctx)
	if skip == nil {
		return err
	}
	if err != nil {
		errs = append(errs, err)
	}
	var read []uint64
	err = st.eachChunk(ctx, func(seq uint64, b []byte) {
		n, err := p.restoreChunk(b, seq, now, &sw, restored, skip)
		if err != nil {
			// bytes only this processor wrote: a torn or foreign value; skip it, loudly
			errs = append(errs, fmt.Errorf("storage: ledger chunk %d skipped: %w", seq, err))
			return
		}
		read = append(read, seq)
		chunks++
		spans += n
	})
	if err != nil {
		return fmt.Errorf("storage: reading the ledgers: %w", err)
	}
	if err := st.settleAtStart(ctx, markers, read); err != nil {
		errs = append(errs, fmt.Errorf("storage: deleting what no restored ledger holds: %w", err))
	}
	for l, settled := range restored {
		spans += p.settledOnly(l, settled, &sw)
	}
	for l := range restored {
		s := &p.shards[shardIndex(l.id)]
		s.mu.Lock()
		if view, err := p.mergeLedger(l); err == nil {
			if p.dirty(l, &view) {
				s.led.schedule(l, now)
			}
			s.led.setComplete(l, p.stateWith(&l.spans) == stComplete)
		} else {
			errs = append(errs, err)
		}
		p.ledgerBytes.Add(l.cost() - l.size)
		l.size = l.cost()
		s.mu.Unlock()
	}
	if chunks > 0 {
		p.logger.Info("restored the ledgers from storage", zap.Int("traces", len(restored)), zap.Int("spans", spans), zap.Int("chunks", chunks))
	}
	if len(errs) > 0 {
		p.logger.Error("restoring the ledgers", zap.Error(errors.Join(errs...)))
	}
	return nil
}

// restoreChunk adds one chunk's spans to their ledgers, but for the traces whose ledgers
// had ended (skip), and reports how many it added.
func (p *subagentMerge) restoreChunk(b []byte, seq uint64, now int64, sw *skeletonWriter, restored map[*ledger][]ptrace.Span, skip map[endedChunk]struct{}) (int, error) {
	skelB, sentB, err := splitChunk(b)
	if err != nil {
		return 0, err
	}
	skel, err := p.unmarshaler.UnmarshalTraces(skelB)
	if err != nil {
		return 0, err
	}
	sent := ptrace.NewTraces()
	if len(sentB) > 0 {
		if sent, err = p.unmarshaler.UnmarshalTraces(sentB); err != nil {
			return 0, err
		}
	}
	byTrace := map[pcommon.TraceID][]ptrace.Span{}
	for _, sp := range appendSpans(nil, skel) {
		byTrace[sp.TraceID()] = append(byTrace[sp.TraceID()], sp)
	}
	type kept struct {
		sp    ptrace.Span
		res   pcommon.Resource
		scope pcommon.InstrumentationScope
	}
	sentBy := map[pcommon.TraceID][]kept{}
	rss := sent.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				sp := ss.Spans().At(k)
				sentBy[sp.TraceID()] = append(sentBy[sp.TraceID()], kept{sp, rs.Resource(), ss.Scope()})
			}
		}
	}
	added := 0
	var asks []uint32
	var enc spanEncoder
	// a chunk of settled versions only (commitSettled) has no skeletons: its traces'
	// ledgers come from earlier chunks
	for id := range sentBy {
		if _, ok := byTrace[id]; !ok {
			byTrace[id] = nil
		}
	}
	for id, spans := range byTrace {
		if _, ended := skip[endedChunk{id, seq}]; ended {
			continue
		}
		s := &p.shards[shardIndex(id)]
		s.mu.Lock()
		l := s.led.byID[id]
		if l == nil && len(spans) == 0 {
			s.mu.Unlock()
			continue
		}
		if l == nil {
			l = &ledger{id: id, lastSeen: now, kept: map[pcommon.SpanID]*keptSpan{}}
			s.led.add(l)
			p.nLedgers.Add(1)
		}
		if err := p.warm(s, l, now); err != nil {
			s.mu.Unlock()
			return added, err
		}
		sw.reset()
		for _, sp := range spans {
			if l.spans.has(sp.SpanID()) {
				continue
			}
			var key spanKey
			key, asks = keyOf(sp, asks[:0])
			l.spans.add(key, asks)
			sw.add(sp)
			added++
		}
		l.addSkel(sw.message(), nil)
		for _, k := range sentBy[id] {
			if !l.spans.has(k.sp.SpanID()) {
				restored[l] = append(restored[l], k.sp) // its own chunk may come later
			}
		}
		for _, k := range sentBy[id] {
			// a span is kept as it first went out, unless a later chunk has the version
			// that settled its pending caller: that one is counted already
			if old, dup := l.kept[k.sp.SpanID()]; dup && !(old.pending && genai.VersionOf(k.sp.Attributes()).Settled) {
				continue
			}
			if _, err := p.keep(l, &enc, k.sp, k.res, k.scope); err != nil {
				s.mu.Unlock()
				return added, err
			}
		}
		l.seqs = append(l.seqs, seq)
		p.store.ref(seq)
		if _, seen := restored[l]; !seen {
			restored[l] = nil
		}
		s.mu.Unlock()
	}
	return added, nil
}

// settledOnly adds to l the spans that only a settled version of has, once every chunk
// was read: a call whose own request was refused after another request settled it, when
// the chunk of what stays of the refused request (commitStayed) was not written before a
// crash (the sender's retry was a duplicate, so no other chunk has its span). Its
// skeleton is taken from that version, less what the merge wrote on it (its caller, its
// merged numbers, its version marks): the merge reads it as it came, but for numbers an
// earlier merge had written on it. It reports how many it added.
func (p *subagentMerge) settledOnly(l *ledger, settled []ptrace.Span, sw *skeletonWriter) int {
	if len(settled) == 0 {
		return 0
	}
	s := &p.shards[shardIndex(l.id)]
	s.mu.Lock()
	defer s.mu.Unlock()
	sw.reset()
	var asks []uint32
	added := 0
	for _, v := range settled {
		if l.spans.has(v.SpanID()) {
			continue
		}
		sp := ptrace.NewSpan()
		v.CopyTo(sp)
		sp.Attributes().RemoveIf(func(k string, val pcommon.Value) bool {
			var marks genai.Version // Offer says whether k is one of a version's marks
			return k == genai.AttrCaller || merge.Written(k) || marks.Offer(k, val)
		})
		var key spanKey
		key, asks = keyOf(sp, asks[:0])
		l.spans.add(key, asks)
		sw.add(sp)
		added++
	}
	if added > 0 {
		l.addSkel(sw.message(), nil)
	}
	return added
}
