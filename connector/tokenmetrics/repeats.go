package tokenmetrics

import (
	"hash/maphash"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// repeats remembers the calls counted last, so that a version counted before is not
// counted again. Every model call is counted by exactly one of its versions
// (genai.IsCountedVersion), but the pipeline can hand that version over twice: the
// connector counts every batch it is given, and when another consumer of the same batch
// refuses it (an exporter's full sending queue during a vendor outage), the request is
// refused and its sender sends it again, to every consumer.
//
// A call is known by a 64-bit hash of its trace and span ids, seeded per process
// (hash/maphash), so ids an emitter chooses cannot pile onto one slot of the table; with
// a million remembered, a new call takes the key of one of them with a chance of about
// 1 in 2^44 (and is then not counted).
//
// The keys are in two generations of remembered_calls each: new keys go into the
// current one, and a full current one becomes the previous, whose keys are forgotten
// at once. A key found in the previous generation is put in the current one again, so
// a call handed over again and again (the merge resending a refused re-emission
// through a long outage) stays remembered. So at least the last remembered_calls calls
// are remembered, and at most twice as many. Each generation is a table of 8-byte
// slots, a power of two at least twice its keys, grown as calls come and kept: 16 MiB
// at the default 500,000 once both are full (BenchmarkRepeatsMemory). At 500 calls a
// second that is a retry up to 17 minutes later at least; a sender retries within
// minutes.
type repeats struct {
	max       int // keys per generation
	cur, prev keyTable
	seed      maphash.Seed
}

func newRepeats(max int) *repeats {
	return &repeats{max: max, seed: maphash.MakeSeed()}
}

// callIDs is what a call's key is hashed from.
type callIDs struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
}

// seen reports whether the call of span sid in trace tid was counted before, and
// remembers it. A call without ids is never taken for a repeat.
func (r *repeats) seen(tid pcommon.TraceID, sid pcommon.SpanID) bool {
	if sid.IsEmpty() {
		return false
	}
	k := maphash.Comparable(r.seed, callIDs{tid, sid})
	if k == 0 {
		k = 1 // 0 marks a free slot
	}
	if r.cur.has(k) {
		return true
	}
	again := r.prev.has(k)
	if r.cur.n == r.max {
		r.cur, r.prev = r.prev, r.cur
		r.cur.reset()
	}
	r.cur.add(k)
	return again
}

// keyTable is a set of non-zero keys: open addressing with linear probing, 0 a free
// slot. Keys are hashes already, so a key's low bits are its home slot. It is never
// more than half full, so a probe is short, and is only ever emptied whole (reset), so
// it needs no deletion.
type keyTable struct {
	slots []uint64
	n     int
}

func (t *keyTable) has(k uint64) bool {
	if t.n == 0 {
		return false
	}
	mask := uint64(len(t.slots) - 1)
	for i := k & mask; t.slots[i] != 0; i = (i + 1) & mask {
		if t.slots[i] == k {
			return true
		}
	}
	return false
}

// add puts k, not in t, into t, growing it first if it would be more than half full.
func (t *keyTable) add(k uint64) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	t.put(k)
	t.n++
}

func (t *keyTable) put(k uint64) {
	mask := uint64(len(t.slots) - 1)
	i := k & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = k
}

// grow doubles the table (to 1024 slots at first) and puts every key back.
func (t *keyTable) grow() {
	old := t.slots
	t.slots = make([]uint64, max(1024, 2*len(old)))
	for _, k := range old {
		if k != 0 {
			t.put(k)
		}
	}
}

// reset empties t, keeping its slots for the next generation.
func (t *keyTable) reset() {
	clear(t.slots)
	t.n = 0
}
