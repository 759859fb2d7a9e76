package tokenmetrics

import (
	"encoding/binary"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// repeats remembers the last calls counted, so that a version counted before is not
// counted again. Every model call is counted by exactly one of its versions
// (genai.IsCountedVersion), but the pipeline can hand that version over twice: the
// connector counts every batch it is given, and when another consumer of the same batch
// refuses it (an exporter's full sending queue during a vendor outage), the request is
// refused and its sender sends it again, to every consumer. A call is known by a 64-bit
// hash of its trace and span ids: with a million remembered, a new call takes the key of
// one of them with a chance of about 1 in 2^44 (and is then not counted).
//
// It holds the keys of the last max calls counted: 8 bytes each in the order counted,
// and a table of them with at least half its slots free (BenchmarkRepeatsMemory: 25
// bytes a call, 24 MiB at the default 1,000,000, filled as calls come). At 500 calls a
// second that is a retry up to half an hour later; a sender retries within minutes.
type repeats struct {
	max   int
	order []uint64 // keys as counted; once full, a ring whose oldest is at next
	next  int
	// slots is an open-addressing table of the keys (linear probing, 0 is free); its
	// length is a power of two at least twice the keys it holds, so a probe is short.
	// Keys are already well mixed, so a key's own low bits are its home slot.
	slots []uint64
}

func newRepeats(max int) *repeats {
	return &repeats{max: max, slots: make([]uint64, 1024)}
}

// seen reports whether the call of span sid in trace tid was counted before, and
// remembers it when not. A call without ids is never taken for a repeat.
func (r *repeats) seen(tid pcommon.TraceID, sid pcommon.SpanID) bool {
	if sid.IsEmpty() {
		return false
	}
	k := callKey(tid, sid)
	if r.find(k) >= 0 {
		return true
	}
	if len(r.order) < r.max {
		r.order = append(r.order, k)
		if 2*len(r.order) > len(r.slots) {
			r.grow()
		}
	} else {
		r.remove(r.order[r.next])
		r.order[r.next] = k
		r.next = (r.next + 1) % r.max
	}
	r.insert(k)
	return false
}

// find is k's slot, or -1.
func (r *repeats) find(k uint64) int {
	mask := uint64(len(r.slots) - 1)
	for i := k & mask; ; i = (i + 1) & mask {
		switch r.slots[i] {
		case k:
			return int(i)
		case 0:
			return -1
		}
	}
}

func (r *repeats) insert(k uint64) {
	mask := uint64(len(r.slots) - 1)
	i := k & mask
	for r.slots[i] != 0 {
		i = (i + 1) & mask
	}
	r.slots[i] = k
}

// remove frees k's slot and moves later keys of its probe run back into the gap, so no
// free slot ever breaks a run (deletion without tombstones).
func (r *repeats) remove(k uint64) {
	i := r.find(k)
	if i < 0 {
		return
	}
	mask := len(r.slots) - 1
	for j := (i + 1) & mask; r.slots[j] != 0; j = (j + 1) & mask {
		home := int(r.slots[j]) & mask
		// the key at j may fill the gap at i unless its home lies cyclically in (i, j]
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			r.slots[i] = r.slots[j]
			i = j
		}
	}
	r.slots[i] = 0
}

// grow doubles the table and puts every key back.
func (r *repeats) grow() {
	old := r.slots
	r.slots = make([]uint64, 2*len(old))
	for _, k := range old {
		if k != 0 {
			r.insert(k)
		}
	}
}

// callKey mixes the ids' three words (splitmix64's finaliser on each, chained), so keys
// of ids that differ in one byte, or are counters, spread over all 64 bits.
func callKey(tid pcommon.TraceID, sid pcommon.SpanID) uint64 {
	h := mix(binary.LittleEndian.Uint64(tid[:8]))
	h = mix(h ^ binary.LittleEndian.Uint64(tid[8:]))
	if h = mix(h ^ binary.LittleEndian.Uint64(sid[:])); h == 0 {
		return 1 // 0 marks a free slot
	}
	return h
}

func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
