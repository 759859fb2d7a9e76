package subagentmerge

// Queued delivery: the calls on their way to a released trace's lane, in order.
//
// A call places a trace's spans under its shard's lock, and queues what goes on on the
// trace's lane after, outside the lock (it encodes and stores it first). Two calls with
// spans of the same released trace could so reach the lane in the other order than they
// were placed: a correction before the release it corrects, or before the late span it
// is a later version of. LangSmith then gets the patch of a run before its post, refuses
// it (the run does not exist yet), and keeps the post without the correction. So each
// call that releases a trace, or passes on spans of a released one, takes a slot on the
// trace's tombstone when it places them; a call that is ready fills its slot, and the
// filled slots at the front go on the lane, in the order taken.

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// landing is the calls on their way to a released trace's lane, in the order they
// placed its spans.
type landing struct {
	slots []*slot
}

// slot is one call's place in a landing: filled once the call is ready, with its batch
// of the trace's spans (none for a release, which the call queues with its other
// traces' and fills after).
type slot struct {
	l      *landing
	b      *unsentBatch
	filled bool
}

// landingOf is a slot and its trace.
type landingOf struct {
	id pcommon.TraceID
	s  *slot
}

// following is what one call passes on of a released trace (its slot s): its refs cut
// out of the batch's encoding (idx) and those that go as first emissions.
type following struct {
	id         pcommon.TraceID
	s          *slot
	idx, first []int32
}

// encodedFollow is a following, encoded.
type encodedFollow struct {
	id    pcommon.TraceID
	s     *slot
	enc   []byte
	spans int
}

// takeSlot takes the next slot of trace id, whose tombstone s holds (its lock held),
// for a call with spans of it to queue. nil without queued delivery or a tombstone
// (late_span_window 0: nothing of a released trace is known).
func (p *subagentMerge) takeSlot(s *shard, id pcommon.TraceID) *slot {
	if !p.queued {
		return nil
	}
	t := s.released[id]
	if t == nil {
		return nil
	}
	if t.landing == nil {
		t.landing = &landing{}
	}
	sl := &slot{l: t.landing}
	t.landing.slots = append(t.landing.slots, sl)
	return sl
}

// fill fills sl, a slot of trace id, with b (nil: what the call had is queued already),
// and queues the filled slots at the front of its landing on the trace's lane, under
// the trace's shard lock, so that a call that finds the landing empty (and queues later)
// comes after them.
func (p *subagentMerge) fill(id pcommon.TraceID, sl *slot, b *unsentBatch) {
	if sl == nil {
		return
	}
	s := &p.shards[shardIndex(id)]
	lane := laneOf(id)
	pushed := false
	s.mu.Lock()
	sl.b, sl.filled = b, true
	l := sl.l
	n := 0
	for n < len(l.slots) && l.slots[n].filled {
		if q := l.slots[n].b; q != nil {
			p.deliver.queues[lane].push(*q)
			pushed = true
		}
		l.slots[n].b = nil
		n++
	}
	l.slots = l.slots[n:]
	if t := s.released[id]; t != nil && t.landing == l && len(l.slots) == 0 {
		t.landing = nil
	}
	s.mu.Unlock()
	if pushed {
		p.deliver.poke(lane)
	}
}
