package runtree

import (
	"container/list"

	"go.opentelemetry.io/collector/pdata/pcommon"
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

// traceChains remembers the runs of one trace that were already mapped, so spans that
// arrive in a later batch than their parent still get the full ancestor chain.
type traceChains struct {
	traceID pcommon.TraceID
	// trueRoot is the span without a parent; its run id is the trace UUID.
	trueRoot    pcommon.SpanID
	trueRootSet bool
	// root is where orphans are attached: the true root, or else the first re-rooted
	// orphan (see Mapper).
	root    chainEntry
	rootSet bool
	spans   map[pcommon.SpanID]chainEntry
	elem    *list.Element
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
	tc := &traceChains{traceID: id, spans: map[pcommon.SpanID]chainEntry{}}
	tc.elem = c.lru.PushFront(tc)
	c.traces[id] = tc
	return tc
}

func (c *chainCache) put(tc *traceChains, span pcommon.SpanID, e chainEntry) {
	if _, had := tc.spans[span]; !had {
		c.spans++
	}
	tc.spans[span] = e
}

// evict drops least recently used traces until the span bound holds. A bound of 0 keeps
// nothing between batches.
func (c *chainCache) evict() {
	for c.spans > c.maxSpans && c.lru.Len() > 0 {
		tc := c.lru.Remove(c.lru.Back()).(*traceChains)
		delete(c.traces, tc.traceID)
		c.spans -= len(tc.spans)
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
