package subagentmerge

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// releasedBefore finds, before a gather with queued delivery buffers again what a
// previous process left, the traces that process had released and delivered: their
// held chunks are gone, and what is left of them on disk waits to be sent, among it
// later versions of spans whose first emission went out before. Such a span is one
// whose version on disk is a re-emission while no chunk holds its first emission (a
// span held or passed on for the first time is stored as a first emission, its marks
// taken off). Each such trace gets its tombstone back, with those spans, before any
// chunk is read back: they go on as what they were, updates of spans the sink has (a
// LangSmith PATCH), at once, and so do the trace's later corrections and late spans, as
// before the restart. Read back without it, such a span started a trace never seen,
// was held until wait_duration and sent as a first emission, which LangSmith ignores as
// a repeat of the post. skip are the parts of chunks passed on before (readEnds).
func (p *subagentMerge) releasedBefore(ctx context.Context, skip map[endedChunk]struct{}) error {
	if p.window <= 0 {
		return nil // no tombstones: every later version goes as the trace it starts
	}
	type traceSpan struct {
		trace pcommon.TraceID
		span  pcommon.SpanID
	}
	first := map[traceSpan]struct{}{}
	later := map[traceSpan]spanKey{}
	err := p.store.eachChunk(ctx, func(seq uint64, b []byte) {
		td, err := p.unmarshaler.UnmarshalTraces(b)
		if err != nil {
			return // restore says so
		}
		removeEnded(td, seq, skip)
		for sp := range spaniter.All(td) {
			k := traceSpan{sp.TraceID(), sp.SpanID()}
			if rankOf(sp) == 0 {
				first[k] = struct{}{}
			} else if _, ok := later[k]; !ok {
				later[k], _ = keyOf(sp, nil)
			}
		}
	})
	if err != nil {
		return fmt.Errorf("storage: reading buffered spans: %w", err)
	}
	sets := map[pcommon.TraceID]*spanSet{}
	for k, key := range later {
		if _, ok := first[k]; ok {
			continue
		}
		set := sets[k.trace]
		if set == nil {
			set = &spanSet{}
			sets[k.trace] = set
		}
		set.add(key, nil)
	}
	now := p.now()
	for id, set := range sets {
		s := &p.shards[shardIndex(id)]
		s.mu.Lock()
		if s.released[id] == nil {
			s.addTombstone(id, *set, nil, now, p.window, p.maxTombstones)
		}
		s.mu.Unlock()
	}
	return nil
}
