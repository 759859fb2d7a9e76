package subagentmerge

import (
	"encoding/binary"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// numShards spreads traces over independently locked maps so concurrent
// ConsumeTraces calls rarely wait for each other.
const numShards = 64

// linearLimit is the span count up to which a trace's span ids are searched linearly;
// above it a map index is built (most agent traces stay below it, and a short slice is
// both smaller and faster than a map).
const linearLimit = 32

// Span flag bits (OTLP): bit 8 says whether bit 9 is known, bit 9 that the parent is remote.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// spanKey is all the buffer keeps per span besides its bytes.
type spanKey struct {
	id, parent pcommon.SpanID
	root       bool // no parent, or a parent in another process
}

// isLocalRoot reports whether sp roots this process's part of the trace: it has no parent,
// or its parent is remote (the gateway request that started a run, CONTRACT §1).
func isLocalRoot(sp ptrace.Span) bool {
	if sp.ParentSpanID().IsEmpty() {
		return true
	}
	f := sp.Flags()
	return f&flagHasIsRemote != 0 && f&flagIsRemote != 0
}

// spanSet holds the span ids of one trace.
type spanSet struct {
	keys []spanKey
	idx  map[pcommon.SpanID]struct{} // nil until len(keys) > linearLimit
}

func (s *spanSet) has(id pcommon.SpanID) bool {
	if s.idx != nil {
		_, ok := s.idx[id]
		return ok
	}
	for i := range s.keys {
		if s.keys[i].id == id {
			return true
		}
	}
	return false
}

func (s *spanSet) add(k spanKey) {
	s.keys = append(s.keys, k)
	if s.idx != nil {
		s.idx[k.id] = struct{}{}
	} else if len(s.keys) > linearLimit {
		s.idx = make(map[pcommon.SpanID]struct{}, 2*len(s.keys))
		for i := range s.keys {
			s.idx[s.keys[i].id] = struct{}{}
		}
	}
}

// complete reports whether every span's parent is present (roots excepted).
func (s *spanSet) complete() bool {
	for i := range s.keys {
		if !s.keys[i].root && !s.has(s.keys[i].parent) {
			return false
		}
	}
	return true
}

// entry is one buffered trace.
type entry struct {
	id      pcommon.TraceID
	spans   spanSet
	hasRoot bool
	// buf holds the buffered spans as OTLP TracesData protobuf. Each batch's spans are
	// marshalled and appended: concatenated messages decode as one message whose
	// resource_spans are the concatenation, so release needs a single unmarshal. Bytes
	// are several times smaller than the same spans in pdata.
	buf        []byte
	lastSeen   int64 // unix nanos of the last span added
	prev, next *entry
}

// tombstone remembers a released trace's span ids for late-span and duplicate checks.
type tombstone struct {
	spans spanSet
}

type releasedAt struct {
	id pcommon.TraceID
	at int64
}

type shard struct {
	mu sync.Mutex
	// traces are the buffered traces; head..tail is their order by lastSeen (oldest
	// first), so idle and capacity release pop from the head: one list per shard instead
	// of one timer per trace.
	traces     map[pcommon.TraceID]*entry
	head, tail *entry
	// released are the tombstones; relQueue is their release order, for expiry.
	released map[pcommon.TraceID]*tombstone
	relQueue []releasedAt
	relHead  int
}

func shardIndex(id pcommon.TraceID) int {
	h := binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:])
	h ^= h >> 29
	return int(h % numShards)
}

func (s *shard) pushBack(e *entry) {
	e.prev, e.next = s.tail, nil
	if s.tail != nil {
		s.tail.next = e
	} else {
		s.head = e
	}
	s.tail = e
}

func (s *shard) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// touch marks e as just extended.
func (s *shard) touch(e *entry, now int64) {
	e.lastSeen = now
	if s.tail != e {
		s.unlink(e)
		s.pushBack(e)
	}
}

// remove takes e out of the buffer and, when window > 0, leaves a tombstone with its
// span ids. The caller owns e.buf afterwards.
func (s *shard) remove(e *entry, now int64, window int64, maxTombstones int) {
	delete(s.traces, e.id)
	s.unlink(e)
	if window > 0 {
		s.released[e.id] = &tombstone{spans: e.spans}
		s.relQueue = append(s.relQueue, releasedAt{e.id, now})
		s.expireTombstones(now, window, maxTombstones)
	}
}

// addTombstone records a trace that was released without ever being buffered.
func (s *shard) addTombstone(id pcommon.TraceID, spans spanSet, now, window int64, maxTombstones int) {
	if window <= 0 {
		return
	}
	s.released[id] = &tombstone{spans: spans}
	s.relQueue = append(s.relQueue, releasedAt{id, now})
	s.expireTombstones(now, window, maxTombstones)
}

// expireTombstones forgets released traces older than window, and the oldest ones
// beyond maxTombstones, so the memory of released traces stays bounded.
func (s *shard) expireTombstones(now, window int64, maxTombstones int) {
	for s.relHead < len(s.relQueue) {
		r := s.relQueue[s.relHead]
		if r.at > now-window && len(s.relQueue)-s.relHead <= maxTombstones {
			break
		}
		delete(s.released, r.id)
		s.relQueue[s.relHead] = releasedAt{}
		s.relHead++
	}
	// compact the queue once its consumed head is the larger half
	if s.relHead > 64 && s.relHead*2 > len(s.relQueue) {
		n := copy(s.relQueue, s.relQueue[s.relHead:])
		clear(s.relQueue[n:])
		s.relQueue = s.relQueue[:n]
		s.relHead = 0
	}
}
