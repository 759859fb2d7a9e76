package subagentmerge

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// sweepStream re-emits what is due and ends the ledgers idle for wait_duration. When
// the next consumer refuses the re-emissions, the ledgers they came from go out again
// settle_time later: the live ones (reopen), and the ones that ended in the sweep, taken
// back (reinstate) and ended again when due.
func (p *subagentMerge) sweepStream(ctx context.Context, now int64) error {
	out := ptrace.NewTraces()
	var c counts
	var gone []ended
	var errs []error
	type flushed struct {
		l       *ledger
		ids     []pcommon.SpanID
		calls   []pcommon.SpanID // the pending calls it settled
		settled []byte           // their settled versions, encoded (storage)
	}
	var sent []flushed
	cutoff := now - p.wait
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for _, ch := range s.led.ageChains() {
			for l := ch.head; l != nil && l.lastSeen <= cutoff; {
				next := ch.next(l)
				// not while something waits on it, nor before its refused last
				// re-emissions are due again
				if l.waiting == 0 && l.dueAt <= now {
					gone = append(gone, p.endLedger(s, l, out, &c, now, relIdle))
				}
				l = next
			}
		}
		for l := s.led.due.head; l != nil && l.dueAt <= now; l = s.led.due.head {
			f := flushed{l: l}
			from := len(l.settledAt)
			var sink *[]byte
			if p.store != nil {
				sink = &f.settled
			}
			ids, err := p.flush(s, l, out, &c, now, nil, false, sink)
			if err != nil {
				errs = append(errs, err)
			}
			f.ids = ids
			f.calls = slices.Clone(l.settledSince(from)) // given back if refused
			l.waiting++                                  // until the send is answered
			sent = append(sent, f)
		}
		p.freezeIdle(s, now)
		s.mu.Unlock()
	}
	var nerr error
	if out.ResourceSpans().Len() > 0 {
		nerr = p.next.ConsumeTraces(ctx, out)
	}
	// a partial refusal names what was not taken: only those ledgers re-emit again
	var left map[pcommon.TraceID]bool
	if rest, partly := notTaken(out, nerr); nerr != nil && partly {
		left = traceIDsIn(rest)
	}
	again := p.now() + max(p.settle, int64(minUnsentBackoff))
	var back, forget []ended
	for _, e := range gone {
		if nerr != nil && (left == nil || left[e.l.id]) && len(e.ids) > 0 {
			back = append(back, e) // it ends once they are taken
		} else {
			forget = append(forget, e)
		}
	}
	// what follows is storage: not given up when Shutdown cancels the sweep (the send
	// above is)
	ctx = context.WithoutCancel(ctx)
	p.tel.record(ctx, &c)
	for _, f := range sent {
		s := &p.shards[shardIndex(f.l.id)]
		s.mu.Lock()
		refused := nerr != nil && (left == nil || left[f.l.id])
		switch {
		case !refused:
			f.l.unsettle(f.calls)
		case s.led.byID[f.l.id] == f.l:
			p.reopen(s, f.l, f.ids, f.calls, again)
		}
		// else a refused call took out the ledger it had created, with all it held
		s.mu.Unlock()
	}
	if nerr != nil {
		errs = append(errs, fmt.Errorf("subagentmerge: passing on %d re-emitted spans (they go out again): %w", out.SpanCount(), nerr))
	}
	// the settled versions taken (all, or what a partial refusal does not name) are
	// counted now: stored, so a restart does not settle them again
	var items []settledOf
	for _, f := range sent {
		if len(f.settled) > 0 && (nerr == nil || (left != nil && !left[f.l.id])) {
			items = append(items, settledOf{f.l, f.settled})
		}
	}
	if err := p.commitSettled(ctx, items); err != nil {
		errs = append(errs, fmt.Errorf("subagentmerge: storing settled calls: %w", err))
	}
	for _, f := range sent {
		p.unwait(f.l)
	}
	p.reinstate(back, again)
	if err := p.forgetLedgers(ctx, forget...); err != nil {
		errs = append(errs, fmt.Errorf("subagentmerge: storing the calls ended ledgers settled: %w", err))
	}
	return errors.Join(errs...)
}

// settledSink is where a call's re-emissions put the versions that settle waiting calls:
// the call's chunk, with storage.
func (p *subagentMerge) settledSink(sc *scratch) *[]byte {
	if p.store == nil {
		return nil
	}
	return &sc.chunkSent
}

// settledOf is what a flush outside a call settled in one ledger, encoded.
type settledOf struct {
	l   *ledger
	enc []byte
}

// commitSettled stores, once the next consumer took them, the versions that settled
// waiting calls outside a call (the sweeper, shutdown), as a chunk of their ledgers
// without skeletons: a restart reads them over the first versions, so those calls are
// not settled, and counted, again. A crash between the send and this write still
// counts them twice.
func (p *subagentMerge) commitSettled(ctx context.Context, items []settledOf) error {
	if p.store == nil || len(items) == 0 {
		return nil
	}
	seq := p.store.draw()
	chunk := protowire.AppendVarint(nil, 0) // no skeletons
	refs := 0
	for _, it := range items {
		if p.holdChunk(it.l, seq) {
			refs++
			chunk = append(chunk, it.enc...)
		}
	}
	if refs == 0 {
		p.store.undraw(seq)
		return nil
	}
	return p.store.write(ctx, seq, chunk)
}

// flushAll re-emits every dirty ledger's changes (shutdown). With storage the ledgers
// stay on disk and a restart goes on from them; without, they end here, so every
// pending caller is settled as it stands (its call counted).
func (p *subagentMerge) flushAll(ctx context.Context) error {
	out := ptrace.NewTraces()
	var c counts
	var errs []error
	var items []settledOf
	now := p.now()
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for l := s.led.due.head; l != nil; l = s.led.due.head {
			var settled []byte
			var sink *[]byte
			if p.store != nil {
				sink = &settled
			}
			if _, err := p.flush(s, l, out, &c, now, nil, p.store == nil, sink); err != nil {
				errs = append(errs, err)
			}
			if len(settled) > 0 {
				items = append(items, settledOf{l, settled})
			}
		}
		if p.store == nil {
			for _, ch := range s.led.ageChains() {
				for l := ch.head; l != nil; l = ch.next(l) {
					if l.pending > 0 {
						if _, err := p.flush(s, l, out, &c, now, nil, true, nil); err != nil {
							errs = append(errs, err)
						}
					}
				}
			}
		}
		s.mu.Unlock()
	}
	p.tel.record(ctx, &c)
	if out.ResourceSpans().Len() > 0 {
		if err := p.next.ConsumeTraces(ctx, out); err != nil {
			errs = append(errs, fmt.Errorf("subagentmerge: passing on %d re-emitted spans at shutdown: %w", out.SpanCount(), err))
		} else if err := p.commitSettled(ctx, items); err != nil {
			errs = append(errs, fmt.Errorf("subagentmerge: storing settled calls: %w", err))
		}
	}
	return errors.Join(errs...)
}
