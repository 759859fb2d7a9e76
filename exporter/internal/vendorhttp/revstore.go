package vendorhttp

import (
	"context"
	"encoding/binary"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Behind a persistent sending queue the revisions an exporter let out are on disk too
// (Remembered, an EntryLog). A version can wait in the queue across a restart (a push
// retried when the process was killed, or queued behind an outage) while a newer one of
// the same span was delivered before: without the record the restarted exporter would
// send the older one last, and the vendor would keep it. A push writes the re-emissions
// it lets out before it is sent, so whatever a vendor may have received is on disk
// first; a write that fails fails the push, retryably, and nothing of it is sent.
//
// An entry's key is the span's trace id and span id, its value the revision.

// revisionsClient names the storage client of the revisions.
const revisionsClient = "revisions"

// revKeyLen is an entry key's length: a trace id and a span id.
const revKeyLen = 16 + 8

func revEntry(k SpanKey, rev int64) Entry {
	key := make([]byte, revKeyLen, revKeyLen+8)
	copy(key, k.Trace[:])
	copy(key[16:], k.Span[:])
	v := binary.BigEndian.AppendUint64(key[revKeyLen:], uint64(rev))
	return Entry{Key: key, Value: v}
}

// ClientName is the name of r's storage client (Remembered).
func (r *Revisions) ClientName() string { return revisionsClient }

// Attach reads what c holds into r and makes every re-emission r lets out from now on
// written to c before its push is sent (Remembered).
func (r *Revisions) Attach(ctx context.Context, c storage.Client) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := OpenEntryLog(ctx, c, func(e Entry) {
		if len(e.Key) != revKeyLen || len(e.Value) != 8 {
			return // not one of ours: the next rewrite leaves it out
		}
		var k SpanKey
		copy(k.Trace[:], e.Key[:16])
		copy(k.Span[:], e.Key[16:])
		r.revs.Put(k, int64(binary.BigEndian.Uint64(e.Value)))
	})
	if err != nil {
		return err
	}
	r.log = l
	return nil
}

// Detach closes r's store, once a write in progress is over; r goes on in memory only.
func (r *Revisions) Detach(ctx context.Context) error {
	r.mu.Lock() // then wmu, as Begin takes them
	r.wmu.Lock()
	l := r.log
	r.log = nil
	r.wmu.Unlock()
	r.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.Close(ctx)
}

// put records rev as key's newest revision let out, and with a store appends its entry
// to written. r.mu is held.
func (r *Revisions) put(key SpanKey, rev int64, written []Entry) []Entry {
	r.revs.Put(key, rev)
	if r.log == nil {
		return written
	}
	return append(written, revEntry(key, rev))
}

// all is every revision r holds, as entries, oldest first. r.mu is held.
func (r *Revisions) all() []Entry {
	out := make([]Entry, 0, r.revs.Len())
	r.revs.Each(func(k SpanKey, rev int64) { out = append(out, revEntry(k, rev)) })
	return out
}
