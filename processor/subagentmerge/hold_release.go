package subagentmerge

// Hold mode: releasing buffered traces (idle, settled, at shutdown), compacting the
// hot ones, and what becomes of their stored chunks.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/internal/otlpwire"
	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/merge"
)

// releaseDue releases the traces idle for wait_duration (from the head of each shard's
// list, ordered by lastSeen) and the settling traces whose settle time is over (from the
// head of the settling list, ordered by settleAt).
func (p *subagentMerge) releaseDue(ctx context.Context, now int64) error {
	var bufs []held
	var c counts
	cutoff := now - p.wait
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for e := s.lru.head; e != nil && e.lastSeen <= cutoff; e = s.lru.head {
			bufs = append(bufs, p.removeLocked(s, e, now))
			c.released[relIdle]++
		}
		for e := s.settling.head; e != nil && e.settleAt <= now; e = s.settling.head {
			bufs = append(bufs, p.removeLocked(s, e, now))
			c.released[relSettled]++
		}
		s.expireTombstones(now, p.window, p.maxTombstones)
		s.mu.Unlock()
	}
	return p.sendReleased(ctx, bufs, &c, "idle or settled")
}

// releaseAll releases every buffered trace (shutdown).
func (p *subagentMerge) releaseAll(ctx context.Context) error {
	var bufs []held
	var c counts
	now := p.now()
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for e := s.lru.head; e != nil; e = s.lru.head {
			bufs = append(bufs, p.removeLocked(s, e, now))
		}
		s.mu.Unlock()
	}
	c.released[relShutdown] = int64(len(bufs))
	return p.sendReleased(ctx, bufs, &c, "shutdown")
}

// removeLocked takes e out of its shard s (whose lock the caller holds) and the counts.
func (p *subagentMerge) removeLocked(s *shard, e *entry, now int64) held {
	n := len(e.spans.keys) + e.versions
	h := s.remove(e, now, p.window, p.maxTombstones)
	h.spans = n
	h.slot = p.takeSlot(s, e.id)
	p.nTraces.Add(-1)
	p.nSpans.Add(-int64(n))
	return h
}

// sendReleased merges the released traces and passes them on in one batch.
func (p *subagentMerge) sendReleased(ctx context.Context, bufs []held, c *counts, what string) error {
	if len(bufs) == 0 {
		return nil
	}
	if p.queued {
		versions := false
		for _, b := range bufs {
			versions = versions || b.versions
		}
		p.tel.record(ctx, c)
		if err := p.enqueue(ctx, queuedOut{raw: bufs, restSeq: -1, versions: versions}, chunkWrite{}); err != nil {
			return fmt.Errorf("subagentmerge: queueing %d traces released (%s): %w", len(bufs), what, err)
		}
		return nil
	}
	out := ptrace.NewTraces()
	var spans []ptrace.Span
	var errs []error
	for _, b := range bufs {
		var err error
		spans, err = p.appendReleased(out, b, spans[:0], c, what != "shutdown")
		if err != nil {
			errs = append(errs, err)
		}
	}
	if p.gather && slices.ContainsFunc(bufs, func(b held) bool { return b.versions }) {
		coalesce(out, slices.ContainsFunc(bufs, func(b held) bool { return b.restored }))
	}
	p.tel.record(ctx, c)
	var seqs []chunkHold
	for _, b := range bufs {
		seqs = holdsOf(seqs, b)
	}
	if err := p.passOn(ctx, out, seqs, false); err != nil {
		errs = append(errs, fmt.Errorf("subagentmerge: passing on %d traces released (%s): %w", len(bufs), what, err))
	}
	return errors.Join(errs...)
}

// compact encodes the hot spans of every trace that has held them since before cutoff.
func (p *subagentMerge) compact(cutoff int64) {
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for e := s.hot.head; e != nil && e.hotSince <= cutoff; e = s.hot.head {
			b, err := p.marshaler.MarshalTraces(e.hot)
			s.unlinkHot(e)
			if err != nil {
				// keep the spans hot rather than lose them; they go out at release
				p.logger.Error("encoding buffered spans failed", zap.Error(err))
				s.pushHot(e, p.now())
				break
			}
			e.chunks = append(e.chunks, b)
			e.hot, e.hotSince = ptrace.Traces{}, 0
		}
		s.mu.Unlock()
	}
}

// maxPooledBytes is the largest byte buffer the package's pools keep for the next use
// (decodeChunks, enqueue, freeze): a rare giant trace's buffers are let go, not pinned.
const maxPooledBytes = 4 << 20

// decodeChunks decodes stored encodings, chunks then tail, which decode as their union
// one after the other: one alone as it is, several joined and regrouped first. They
// are a trace's (or a delivery's traces') spans stored a request at a time, so the
// joined bytes repeat the resource and scope once per request that brought spans of
// a trace; regrouped (otlpwire.AppendGrouped), each is decoded once. The decode copies
// every string and byte it keeps, so the buffers serve the next call.
func (p *subagentMerge) decodeChunks(chunks [][]byte, tail []byte) (ptrace.Traces, error) {
	switch {
	case len(chunks) == 0:
		return p.unmarshaler.UnmarshalTraces(tail)
	case len(chunks) == 1 && len(tail) == 0:
		return p.unmarshaler.UnmarshalTraces(chunks[0])
	}
	d := chunkDecoders.Get().(*chunkDecoder)
	defer d.put()
	d.joined = d.joined[:0] // never a chunk itself: the chunks stay
	for _, c := range chunks {
		d.joined = append(d.joined, c...)
	}
	d.joined = append(d.joined, tail...)
	if err := d.x.Reset(d.joined); err != nil {
		return ptrace.Traces{}, err
	}
	d.grouped = d.x.AppendGrouped(d.grouped[:0], &d.g)
	return p.unmarshaler.UnmarshalTraces(d.grouped)
}

// chunkDecoder is decodeChunks' reusable state.
type chunkDecoder struct {
	joined, grouped []byte
	x               otlpwire.Index
	g               otlpwire.Grouping
}

var chunkDecoders = sync.Pool{New: func() any { return new(chunkDecoder) }}

// put returns d to its pool, without the bytes it indexed and without buffers a rare
// giant trace grew.
func (d *chunkDecoder) put() {
	_ = d.x.Reset(nil)
	if cap(d.joined) > maxPooledBytes || cap(d.grouped) > maxPooledBytes {
		*d = chunkDecoder{}
	}
	chunkDecoders.Put(d)
}

// appendHeld moves one buffered trace's spans into out (decoding its chunks) and
// appends them to spans.
func (p *subagentMerge) appendHeld(out ptrace.Traces, h held, spans []ptrace.Span) ([]ptrace.Span, error) {
	var err error
	if len(h.chunks) > 0 {
		var td ptrace.Traces
		td, err = p.decodeChunks(h.chunks, nil)
		if err != nil {
			// only our own marshalling produced these bytes; this is a bug, not bad input
			err = fmt.Errorf("subagentmerge: decoding a buffered trace: %w", err)
		} else {
			spans = appendSpans(spans, td)
			td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
		}
	}
	if h.hasHot {
		spans = appendSpans(spans, h.hot)
		h.hot.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	return spans, err
}

// appendReleased moves one buffered trace into out and merges it; with record, what
// its tombstone keeps for late spans is recorded. Gather mode merges nothing: the
// caller coalesces the versions of out's spans (coalesce).
func (p *subagentMerge) appendReleased(out ptrace.Traces, h held, spans []ptrace.Span, c *counts, record bool) ([]ptrace.Span, error) {
	from := out.ResourceSpans().Len()
	spans, err := p.appendHeld(out, h, spans)
	if p.gather {
		return spans, err
	}
	var rec *recorder
	if record && p.window > 0 && len(spans) > 0 {
		rec = newRecorder()
	}
	rec.beforeAll(spans, true)
	r := merge.Apply(spans)
	c.merged += int64(r.Merged)
	c.orphans += int64(r.Orphans)
	if rec != nil {
		rec.afterFrom(out.ResourceSpans(), from)
		p.attach(spans[0].TraceID(), rec)
	}
	return spans, err
}
