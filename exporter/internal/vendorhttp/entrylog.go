package vendorhttp

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// EntryLog keeps a bounded map that an exporter remembers (Remembered) on disk as a
// log: each write is one record appended under the next sequence number, holding the
// entries the map changed since the last write. A record goes to the end of the store's
// order, so a write touches the store's last page or so, where writing each entry under
// its own key (trace and span ids: random) rewrote a page per entry, and cost the
// sidecar a few percent of its CPU. Read back in order, the last value of a key wins,
// and the keys come in the order they were last written (an entry with no value says
// its key was used again: it moves the key without changing it), as the map's bound
// orders them. Once the records hold more than twice the map's bound of entries, or
// more than a sixteenth of it in records (a small record costs its key and page room:
// a record a push would otherwise let the file reach 32 MiB at the revisions' bound),
// the next write is the whole map again, in one transaction with the deletion of every
// older record. Not safe for concurrent use: its owner orders the writes.
type EntryLog struct {
	c       storage.Client
	records []uint64 // the numbers of the records on disk, ascending
	next    uint64   // the next record's number
	written int      // entries in the records
}

// ErrCannotList is why a store cannot hold an EntryLog: it cannot list its entries.
var ErrCannotList = errors.New("the storage extension cannot list its entries (file_storage can)")

// Entry is one key's value in an EntryLog.
type Entry struct {
	Key, Value []byte
}

// maxRecordEntries caps the entries of one record, so rewriting a large map is several
// values of at most some hundreds of KiB.
const maxRecordEntries = 4096

func recordKey(n uint64) string { return string(binary.BigEndian.AppendUint64(nil, n)) }

// OpenEntryLog reads the records of c in order and calls apply with each entry, the
// later after the earlier. A record that cannot be read, and a key that is not a record
// (a damaged file), is deleted. c must list its entries (file_storage's does).
func OpenEntryLog(ctx context.Context, c storage.Client, apply func(e Entry)) (*EntryLog, error) {
	w, ok := c.(storage.Walker)
	if !ok {
		return nil, ErrCannotList
	}
	type record struct {
		n uint64
		v []byte
	}
	var recs []record
	err := w.Walk(ctx, func(key string, v []byte) ([]*storage.Operation, error) {
		if len(key) != 8 {
			return []*storage.Operation{storage.DeleteOperation(key)}, nil
		}
		recs = append(recs, record{binary.BigEndian.Uint64([]byte(key)), append([]byte(nil), v...)})
		return nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading what was remembered before: %w", err)
	}
	slices.SortFunc(recs, func(a, b record) int { return cmp.Compare(a.n, b.n) })
	l := &EntryLog{c: c}
	var damaged []*storage.Operation
	for _, r := range recs {
		entries, ok := decodeRecord(r.v)
		if !ok {
			damaged = append(damaged, storage.DeleteOperation(recordKey(r.n)))
			continue
		}
		for _, e := range entries {
			apply(e)
		}
		l.written += len(entries)
		l.records = append(l.records, r.n)
		l.next = r.n + 1
	}
	if len(damaged) > 0 {
		if err := c.Batch(ctx, damaged...); err != nil {
			return nil, fmt.Errorf("deleting damaged records: %w", err)
		}
	}
	return l, nil
}

// Due reports whether the next write should be the whole map (Rewrite), for a map of at
// most bound keys.
func (l *EntryLog) Due(bound int) bool {
	return l.written > 2*bound || len(l.records) > max(minRecords, bound/16)
}

// minRecords is the fewest records a log holds before it is rewritten for their number.
const minRecords = 64

// Append writes entries as one record, in one transaction.
func (l *EntryLog) Append(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	if err := l.c.Batch(ctx, storage.SetOperation(recordKey(l.next), encodeRecord(entries))); err != nil {
		return err
	}
	l.records = append(l.records, l.next)
	l.next++
	l.written += len(entries)
	return nil
}

// Rewrite writes all, the whole map, as new records and deletes every older record, in
// one transaction.
func (l *EntryLog) Rewrite(ctx context.Context, all []Entry) error {
	var ops []*storage.Operation
	var records []uint64
	n := l.next
	for lo := 0; lo < len(all); lo += maxRecordEntries {
		ops = append(ops, storage.SetOperation(recordKey(n), encodeRecord(all[lo:min(len(all), lo+maxRecordEntries)])))
		records = append(records, n)
		n++
	}
	for _, r := range l.records {
		ops = append(ops, storage.DeleteOperation(recordKey(r)))
	}
	if err := l.c.Batch(ctx, ops...); err != nil {
		return err
	}
	l.records, l.next, l.written = records, n, len(all)
	return nil
}

// Close closes the store.
func (l *EntryLog) Close(ctx context.Context) error { return l.c.Close(ctx) }

func encodeRecord(entries []Entry) []byte {
	size := 0
	for _, e := range entries {
		size += 2*binary.MaxVarintLen32 + len(e.Key) + len(e.Value)
	}
	b := make([]byte, 0, size)
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e.Key)))
		b = append(b, e.Key...)
		b = binary.AppendUvarint(b, uint64(len(e.Value)))
		b = append(b, e.Value...)
	}
	return b
}

func decodeRecord(b []byte) ([]Entry, bool) {
	var out []Entry
	next := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, true
	}
	for len(b) > 0 {
		k, ok := next()
		if !ok {
			return nil, false
		}
		v, ok := next()
		if !ok {
			return nil, false
		}
		out = append(out, Entry{k, v})
	}
	return out, true
}
