package runtree

import (
	"encoding/hex"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/internal/dottedorder"
)

// batchArena holds what the runs of one batch are cut from, so a batch costs a few
// allocations for them instead of several per run: the strings that are not remembered
// between batches (OpenTelemetry ids in hex, start and end times) from one string, the
// metadata entries from one slice, the caller tags from another.
type batchArena struct {
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

func newBatchArena(infos []spanInfo) *batchArena {
	const perRun = 2*len(pcommon.TraceID{}) + 4*len(pcommon.SpanID{}) + 2*dottedorder.TimeLen
	buf := make([]byte, 0, len(infos)*perRun)
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
	all := string(buf)
	a := &batchArena{strings: make([]runStrings, len(infos)), kvs: make([]KV, 0, kvs), tags: make([]string, 0, len(infos))}
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
	return a
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
