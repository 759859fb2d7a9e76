package runtree

import (
	"encoding/hex"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/internal/dottedorder"
)

// batchArena holds what the runs of one batch are cut from, so a batch costs a few
// allocations for them instead of several per run: the strings that are not remembered
// between batches (OpenTelemetry ids in hex, start and end times) from one string, the
// metadata entries from one slice, the caller tags from another.
type batchArena struct {
	infos   []spanInfo
	hex     []byte // the runs' id and time text, before it becomes their strings
	runs    []Run
	strings []runStrings
	kvs     []KV
	tags    []string
}

// runStrings are one run's strings from the batch arena.
type runStrings struct{ traceHex, spanHex, parentHex, start, end string }

// derivedEntries bounds the metadata entries buildRun adds to a span's attributes, and
// paramEntries its invocation_params entries.
const (
	derivedEntries = 13
	paramEntries   = 2
)

// arenas are batch arenas handed back by a Map's release, for the next batch: a batch's
// runs, the spans they are read from and their metadata entries are most of what
// mapping it allocates.
var arenas = sync.Pool{New: func() any { return new(batchArena) }}

// maxPooledKVs bounds the metadata entries an arena keeps for reuse (a batch of some
// 2,000 runs): a rare huge batch's are let go.
const maxPooledKVs = 1 << 15

// cut cuts the arena of the runs of a.infos, a batch's spans. An arena from arenas
// (the Map of a caller that hands it back with release once the runs are dead) reuses
// the slices of a batch before; the runs' strings are new.
func (a *batchArena) cut() {
	infos := a.infos
	const perRun = 2*len(pcommon.TraceID{}) + 4*len(pcommon.SpanID{}) + 2*dottedorder.TimeLen
	buf := slices.Grow(a.hex[:0], len(infos)*perRun)
	kvs := 0
	for i := range infos {
		s := &infos[i]
		buf = hex.AppendEncode(buf, s.traceID[:])
		buf = hex.AppendEncode(buf, s.spanID[:])
		if !s.parent.IsEmpty() {
			buf = hex.AppendEncode(buf, s.parent[:])
		}
		buf = dottedorder.AppendTime(buf, s.start)
		buf = dottedorder.AppendTime(buf, s.end)
		kvs += derivedEntries + paramEntries
	}
	all := string(buf) // the strings outlive the arena: a copy
	a.hex = buf
	a.strings = slices.Grow(a.strings[:0], len(infos))[:len(infos)]
	a.kvs = slices.Grow(a.kvs[:0], kvs)
	a.tags = slices.Grow(a.tags[:0], len(infos))
	off := 0
	cut := func(n int) string {
		s := all[off : off+n]
		off += n
		return s
	}
	for i := range infos {
		s, rs := &infos[i], &a.strings[i]
		rs.traceHex, rs.spanHex = cut(2*len(s.traceID)), cut(2*len(s.spanID))
		if !s.parent.IsEmpty() {
			rs.parentHex = cut(2 * len(s.parent))
		}
		rs.start, rs.end = cut(dottedorder.TimeLen), cut(dottedorder.TimeLen)
	}
}

// release hands a pooled arena back; nothing cut from it may be used after.
func (a *batchArena) release() {
	if cap(a.kvs) > maxPooledKVs {
		return
	}
	clear(a.infos) // the batch's spans can go
	clear(a.runs)
	clear(a.strings)
	clear(a.kvs[:cap(a.kvs)]) // the entries' strings and values can go
	clear(a.tags[:cap(a.tags)])
	arenas.Put(a)
}

// metadata is an empty Metadata with room for n entries, cut from the arena.
func (a *batchArena) metadata(n int) Metadata {
	if len(a.kvs)+n > cap(a.kvs) {
		return make(Metadata, 0, n)
	}
	lo := len(a.kvs)
	a.kvs = a.kvs[:lo+n]
	return Metadata(a.kvs[lo : lo : lo+n])
}

// tag is the one-element tag list {t}, cut from the arena.
func (a *batchArena) tag(t string) []string {
	if len(a.tags) == cap(a.tags) {
		return []string{t}
	}
	a.tags = append(a.tags, t)
	return a.tags[len(a.tags)-1 : len(a.tags) : len(a.tags)]
}
