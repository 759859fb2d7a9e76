package shape

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
)

// Behind a persistent sending queue the trace values a Shaper remembers are on disk too
// (vendorhttp.Remembered, an EntryLog): a dispatcher re-emitted after a restart is
// shaped with its trace's name, tags, user and session as before the restart, and
// Langfuse's row keeps them (it replaces the row whole). The exporter writes what a
// batch taught the memory (Write) before the batch is queued, so a batch the collector
// acknowledged never leaves the values it brought only in memory; a write that fails is
// tried again with the next one.
//
// An entry's key is the trace id, its value the trace's values before defaults
// (traceInfo without what finish derives).

// traceValuesClient names the storage client of the trace values.
const traceValuesClient = "trace_values"

// traceValuesFormat is the first byte of a stored entry: its layout.
const traceValuesFormat = 1

// ClientName is the name of the Shaper's storage client (vendorhttp.Remembered).
func (s *Shaper) ClientName() string { return traceValuesClient }

// Attach reads what c holds into the memory and keeps it in c from now on
// (vendorhttp.Remembered).
func (s *Shaper) Attach(ctx context.Context, c storage.Client) error {
	m := s.mem
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := vendorhttp.OpenEntryLog(ctx, c, func(e vendorhttp.Entry) {
		if len(e.Value) == 0 && len(e.Key) == len(pcommon.TraceID{}) {
			// seen again: the trace moves up, as it did in memory
			if t, ok := m.traces.Get(pcommon.TraceID(e.Key)); ok {
				m.traces.Put(t.id, t)
			}
			return
		}
		if t, err := decodeTraceValues(e.Key, e.Value); err == nil {
			m.traces.Put(t.id, t)
		} // else not one of ours: the next rewrite leaves it out
	})
	if err != nil {
		return err
	}
	m.log = l
	return nil
}

// Detach writes what is not on disk yet, once a write in progress is over, and closes
// the store; the memory goes on in memory only.
func (s *Shaper) Detach(ctx context.Context) error {
	m := s.mem
	m.wmu.Lock()
	defer m.wmu.Unlock()
	err := s.write(ctx)
	m.mu.Lock()
	l := m.log
	m.log = nil
	m.mu.Unlock()
	if l == nil {
		return err
	}
	return errors.Join(err, l.Close(ctx))
}

// Write puts on disk what the plans so far taught the memory and it did not write yet,
// and which traces they saw again, in the order the memory took them. It waits for a write in progress, so what a batch
// brought is on disk when it returns, whoever wrote it. Writes go one at a time, each
// with the values held when it is made, so the last write of a trace holds all the
// memory knew of it; one that fails is tried again with the next.
func (s *Shaper) Write(ctx context.Context) error {
	m := s.mem
	m.mu.Lock()
	attached := m.log != nil
	m.mu.Unlock()
	if !attached {
		return nil
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	return s.write(ctx)
}

// write is Write with m.wmu held.
func (s *Shaper) write(ctx context.Context) error {
	m := s.mem
	m.mu.Lock()
	l := m.log
	if l == nil || (len(m.seen) == 0 && !m.whole) {
		m.mu.Unlock()
		return nil
	}
	seen, dirty := m.seen, m.dirty
	m.seen, m.dirty = nil, map[pcommon.TraceID]struct{}{}
	var entries []vendorhttp.Entry
	rewrite := m.whole || l.Due(m.traces.Cap())
	m.whole = false
	if rewrite {
		entries = make([]vendorhttp.Entry, 0, m.traces.Len())
		m.traces.Each(func(_ pcommon.TraceID, t traceInfo) { entries = append(entries, traceValuesEntry(&t)) })
	} else {
		// Each trace once, where the memory took it last. A trace taken only there with
		// nothing new is its key alone: read back, it is still held at that point, as in
		// memory (no more traces came since its last entry than in memory). One taken
		// more than once since the last write may have been kept by a take the log
		// leaves out, so it goes whole.
		type taken struct{ last, times int }
		takes := make(map[pcommon.TraceID]taken, len(seen))
		for i, id := range seen {
			takes[id] = taken{i, takes[id].times + 1}
		}
		entries = make([]vendorhttp.Entry, 0, len(takes))
		for i, id := range seen {
			t, ok := m.traces.Get(id)
			tk := takes[id]
			if tk.last != i || !ok {
				continue // taken again later, or forgotten since
			}
			if _, d := dirty[id]; d || tk.times > 1 {
				entries = append(entries, traceValuesEntry(&t))
			} else {
				entries = append(entries, vendorhttp.Entry{Key: append([]byte(nil), id[:]...)})
			}
		}
	}
	m.mu.Unlock()
	var err error
	if rewrite {
		err = l.Rewrite(ctx, entries)
	} else {
		err = l.Append(ctx, entries)
	}
	if err != nil {
		// the next write is the whole memory: nothing piles up while the disk fails
		m.mu.Lock()
		m.whole, m.seen = true, nil
		clear(m.dirty)
		m.mu.Unlock()
		return fmt.Errorf("storage: recording the trace values of the batch: %w", err)
	}
	return nil
}

func traceValuesEntry(t *traceInfo) vendorhttp.Entry {
	return vendorhttp.Entry{Key: append([]byte(nil), t.id[:]...), Value: encodeTraceValues(t)}
}

// encodeTraceValues is t as stored: what the memory keeps of it (no derived values).
func encodeTraceValues(t *traceInfo) []byte {
	b := make([]byte, 0, 64+len(t.name)+len(t.rootName)+len(t.session)+len(t.user)+len(t.env)+len(t.leadModel))
	b = append(b, traceValuesFormat)
	for _, s := range [...]string{t.name, t.rootName, t.session, t.user, t.env, t.leadModel} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(t.leadModelAt))
	has := byte(0)
	if t.hasLeadModel {
		has = 1
	}
	b = append(b, has)
	if t.tags == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(t.tags))+1)
	for _, tag := range t.tags {
		b = binary.AppendUvarint(b, uint64(len(tag)))
		b = append(b, tag...)
	}
	return b
}

var errDamaged = errors.New("damaged trace values")

// decodeTraceValues reads an entry written by encodeTraceValues.
func decodeTraceValues(key, v []byte) (traceInfo, error) {
	var t traceInfo
	if len(key) != len(t.id) || len(v) == 0 || v[0] != traceValuesFormat {
		return t, errDamaged
	}
	copy(t.id[:], key)
	r := v[1:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(r)
		if k <= 0 || n > uint64(len(r)-k) {
			return "", false
		}
		s := string(r[k : k+int(n)])
		r = r[k+int(n):]
		return s, true
	}
	for _, dst := range [...]*string{&t.name, &t.rootName, &t.session, &t.user, &t.env, &t.leadModel} {
		s, ok := str()
		if !ok {
			return t, errDamaged
		}
		*dst = s
	}
	at, k := binary.Uvarint(r)
	if k <= 0 || len(r) < k+2 {
		return t, errDamaged
	}
	t.leadModelAt, t.hasLeadModel = pcommon.Timestamp(at), r[k] == 1
	r = r[k+1:]
	n, k := binary.Uvarint(r)
	if k <= 0 || n > uint64(len(r)) {
		return t, errDamaged
	}
	r = r[k:]
	if n > 0 {
		t.tags = make([]string, 0, n-1)
		for range n - 1 {
			s, ok := str()
			if !ok {
				return t, errDamaged
			}
			t.tags = append(t.tags, s)
		}
	}
	if len(r) != 0 {
		return t, errDamaged
	}
	return t, nil
}
