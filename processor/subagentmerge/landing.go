package subagentmerge

// Queued delivery: a release on its way to its lane, and what follows it.
//
// A call places a trace under its shard's lock, and queues what it released on the
// trace's lane after, outside the lock (it encodes and stores it first). A later call
// that passes on spans of the same trace meanwhile (a correction, a late span) saw the
// release, but could reach the lane first: LangSmith then gets the patch of a run before
// its post, refuses it (the run does not exist yet), and keeps the post without the
// correction. So such spans follow the release: the later call hands its batch to the
// release, and whatever released the trace queues it right behind its own.

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// landing is a release on its way to its lane. follow are the batches of later calls
// with spans of the trace, in the order the calls placed them; done says the release is
// queued, so later batches go to the lane themselves.
type landing struct {
	follow []unsentBatch
	done   bool
}

// landingOf is a landing and its trace.
type landingOf struct {
	id pcommon.TraceID
	l  *landing
}

// following is what one call passes on of a trace whose release is on its way: its
// refs cut out of the batch's encoding (idx) and those that go as first emissions.
type following struct {
	id         pcommon.TraceID
	l          *landing
	idx, first []int32
}

// encodedFollow is a following, encoded.
type encodedFollow struct {
	id    pcommon.TraceID
	l     *landing
	enc   []byte
	spans int
}

// land marks the release of trace id, whose tombstone s holds (its lock held), as on its
// way, and returns the landing to pass to landed once it is queued. nil without queued
// delivery or a tombstone (late_span_window 0: nothing of the trace is placed as
// following it).
func (p *subagentMerge) land(s *shard, id pcommon.TraceID) *landing {
	if !p.queued {
		return nil
	}
	t := s.released[id]
	if t == nil {
		return nil
	}
	t.landing = &landing{}
	return t.landing
}

// landed is told that the release l of trace id is queued: the batches that follow it
// go on its lane now, under the trace's shard lock, so that a call that finds it done
// (and queues its own batch later) comes after them.
func (p *subagentMerge) landed(id pcommon.TraceID, l *landing) {
	if l == nil {
		return
	}
	s := &p.shards[shardIndex(id)]
	lane := laneOf(id)
	s.mu.Lock()
	l.done = true
	if t := s.released[id]; t != nil && t.landing == l {
		t.landing = nil
	}
	follow := l.follow
	l.follow = nil
	for _, b := range follow {
		p.deliver.queues[lane].push(b)
	}
	s.mu.Unlock()
	if len(follow) > 0 {
		p.deliver.poke(lane)
	}
}

// followRelease queues b, a call's spans of trace id, behind the release l: handed to it
// while it is on its way, or on the lane now that it is queued.
func (p *subagentMerge) followRelease(id pcommon.TraceID, l *landing, b unsentBatch) {
	s := &p.shards[shardIndex(id)]
	lane := laneOf(id)
	s.mu.Lock()
	waits := !l.done
	if waits {
		l.follow = append(l.follow, b)
	} else {
		p.deliver.queues[lane].push(b)
	}
	s.mu.Unlock()
	if !waits {
		p.deliver.poke(lane)
	}
}
