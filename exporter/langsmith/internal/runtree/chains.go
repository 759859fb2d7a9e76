package runtree

import (
	"container/list"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/internal/dottedorder"
)

// chainEntry is what a child needs from an already mapped run: its id, its dotted_order
// and the timestamp of its own segment (children's segments are clamped to be no earlier,
// as the SDKs do, so segment timestamps never go backwards along a chain).
type chainEntry struct {
	runID      string
	traceRunID string // the LangSmith trace_id: the id of the chain's first run
	dotted     string
	segMicros  int64
	// parentRunID and orphan are the run's own placement, kept so a later version of
	// the span (a re-emission, patched onto the run) is placed where the run already is
	parentRunID string
	orphan      string
}

// cachedRun is a mapped run as the cache keeps it: the run its chain goes on from and
// its own segment's timestamp. Its id, its trace_id and its dotted_order follow from
// those and are rebuilt on a lookup, so a chain is not kept as a string once per run
// (a deep chain's dotted_order is hundreds of bytes; this is 24).
type cachedRun struct {
	up       pcommon.SpanID // the run above it; zero: its chain starts here
	seg      int64
	traceRun bool  // its run id is the trace UUID (the true root)
	orphan   uint8 // index into orphanReasons
}

var orphanReasons = [...]string{"", OrphanRerooted, OrphanAttachedToRoot}

func orphanCode(reason string) uint8 {
	for i, r := range orphanReasons {
		if r == reason {
			return uint8(i)
		}
	}
	return 0
}

// traceChains remembers the runs of one trace that were already mapped, so spans that
// arrive in a later batch than their parent still get the full ancestor chain.
type traceChains struct {
	traceID pcommon.TraceID
	// trueRoot is the span without a parent; its run id is the trace UUID.
	trueRoot    pcommon.SpanID
	trueRootSet bool
	// root is where orphans are attached: the true root, or else the first re-rooted
	// orphan (see Mapper); rootSpan is its span.
	root     chainEntry
	rootSpan pcommon.SpanID
	rootSet  bool
	spans    map[pcommon.SpanID]cachedRun
	// placed holds the runs their emitter placed (langsmith.span.dotted_order): their
	// dotted_order as it came, since its ids need not be the ones derived from spans
	placed map[pcommon.SpanID]string
	elem   *list.Element
}

// lookup rebuilds the chain entry of a remembered span; buf is scratch for the
// dotted_order. The run ids it returns are substrings of that dotted_order, which holds
// them all: a lookup allocates the one string.
func (tc *traceChains) lookup(span pcommon.SpanID, buf []byte) (chainEntry, []byte, bool) {
	if d, ok := tc.placed[span]; ok {
		e, _ := placedEntry(d)
		return e, buf, true
	}
	r, ok := tc.spans[span]
	if !ok {
		return chainEntry{}, buf, false
	}
	// the chain from span up to where it starts, bounded by the runs remembered (a
	// cycle cannot be built by put, but the walk does not rely on it)
	var idsArr [16]pcommon.SpanID
	var runsArr [16]cachedRun
	ids, runs := append(idsArr[:0], span), append(runsArr[:0], r)
	// above is the dotted_order of a run its emitter placed that the chain hangs under
	var above string
	for at := r; !at.up.IsEmpty() && len(ids) <= len(tc.spans); {
		if d, ok := tc.placed[at.up]; ok {
			above = d
			break
		}
		next, ok := tc.spans[at.up]
		if !ok {
			break // cannot happen: a trace's runs are evicted together
		}
		ids, runs = append(ids, at.up), append(runs, next)
		at = next
	}
	buf = append(buf[:0], above...)
	top := len(ids) - 1
	// where in buf the run ids of the chain's start, span's parent and span begin
	var topAt, parentAt, spanAt int
	if above != "" {
		topAt, parentAt = dottedorder.SegmentLen-dottedorder.UUIDLen, len(above)-dottedorder.UUIDLen
	}
	for i := top; i >= 0; i-- {
		if i != top || above != "" {
			buf = append(buf, '.')
		}
		buf = dottedorder.AppendSegment(buf, runs[i].seg, "")
		if i == top && above == "" {
			topAt = len(buf)
		}
		if i == 1 {
			parentAt = len(buf)
		}
		if i == 0 {
			spanAt = len(buf)
		}
		if runs[i].traceRun {
			buf = dottedorder.AppendUUID(buf, tc.traceID)
		} else {
			var b [16]byte
			copy(b[8:], ids[i][:])
			buf = dottedorder.AppendUUID(buf, b)
		}
	}
	e := chainEntry{dotted: string(buf), segMicros: r.seg, orphan: orphanReasons[r.orphan]}
	runID := func(at int) string { return e.dotted[at : at+dottedorder.UUIDLen] }
	e.traceRunID, e.runID = runID(topAt), runID(spanAt)
	if top >= 1 || above != "" {
		e.parentRunID = runID(parentAt)
	}
	return e, buf, true
}

// chainCache is an LRU of traceChains bounded by the total number of remembered spans.
// Not safe for concurrent use; Mapper serialises access.
type chainCache struct {
	maxSpans int
	spans    int
	lru      *list.List // front = most recently used
	traces   map[pcommon.TraceID]*traceChains
}

func newChainCache(maxSpans int) *chainCache {
	return &chainCache{maxSpans: maxSpans, lru: list.New(), traces: map[pcommon.TraceID]*traceChains{}}
}

// get returns the trace's chains, creating an empty entry; it marks the trace as used.
func (c *chainCache) get(id pcommon.TraceID) *traceChains {
	if tc, ok := c.traces[id]; ok {
		c.lru.MoveToFront(tc.elem)
		return tc
	}
	tc := &traceChains{traceID: id, spans: map[pcommon.SpanID]cachedRun{}}
	tc.elem = c.lru.PushFront(tc)
	c.traces[id] = tc
	return tc
}

func (c *chainCache) put(tc *traceChains, span pcommon.SpanID, e cachedRun) {
	if _, had := tc.spans[span]; !had {
		c.spans++
	}
	tc.spans[span] = e
}

// putPlaced remembers a run its emitter placed, by its dotted_order.
func (c *chainCache) putPlaced(tc *traceChains, span pcommon.SpanID, dotted string) {
	if tc.placed == nil {
		tc.placed = map[pcommon.SpanID]string{}
	}
	if _, had := tc.placed[span]; !had {
		c.spans++
	}
	tc.placed[span] = dotted
}

// placedEntry is the chain entry of a run whose emitter gave its dotted_order: its id,
// its trace's and its parent's are the chain's last, first and last but one.
func placedEntry(dotted string) (chainEntry, bool) {
	root, parent, last, ok := dottedorder.Ends(dotted)
	if !ok {
		return chainEntry{}, false
	}
	return chainEntry{runID: last.RunID, traceRunID: root.RunID, parentRunID: parent.RunID, dotted: dotted, segMicros: last.Micros}, true
}

// evict drops least recently used traces until the span bound holds. A bound of 0 keeps
// nothing between batches.
func (c *chainCache) evict() {
	for c.spans > c.maxSpans && c.lru.Len() > 0 {
		tc := c.lru.Remove(c.lru.Back()).(*traceChains)
		delete(c.traces, tc.traceID)
		c.spans -= len(tc.spans) + len(tc.placed)
	}
	if c.maxSpans == 0 {
		// traces without remembered spans may still hold a root assignment; drop them too
		c.lru.Init()
		clear(c.traces)
		c.spans = 0
	}
}

// Len is the number of remembered spans.
func (c *chainCache) Len() int { return c.spans }
