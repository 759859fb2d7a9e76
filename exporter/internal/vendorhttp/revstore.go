package vendorhttp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Behind a persistent sending queue the revisions an exporter let out are on disk too,
// in a storage client of their own next to the queue's (file_storage: a file of its
// own). A version can wait in the queue across a restart (a push retried when the
// process was killed, or queued behind an outage) while a newer one of the same span
// was delivered before: without the record the restarted exporter would send the older
// one last, and the vendor would keep it. A push writes the re-emissions it lets out
// before it is sent, so whatever a vendor may have received is on disk first; a write
// that fails fails the push, retryably, and nothing of it is sent.
//
// One entry per span: the key is its trace id and span id, the value its newest
// revision. An entry forgotten from memory (past the bound) is deleted in the same
// write; at start every entry is read back (in the store's order, not the order they
// were let out, so past the bound it is not the least recently re-emitted that goes).

// revisionsClient names the storage client of the revisions.
const revisionsClient = "revisions"

// ClientName is the name of r's storage client (Remembered).
func (r *Revisions) ClientName() string { return revisionsClient }

// revKeyLen is a stored key's length: a trace id and a span id.
const revKeyLen = 16 + 8

func revKey(k SpanKey) string {
	var b [revKeyLen]byte
	copy(b[:16], k.Trace[:])
	copy(b[16:], k.Span[:])
	return string(b[:])
}

func revValue(rev int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(rev)) }

// Attach reads what c holds into r and makes every re-emission r lets out from now on
// written to c before its push is sent (Remembered). c must list its entries
// (file_storage's does); an entry that is not one of r's (a damaged file) is deleted.
func (r *Revisions) Attach(ctx context.Context, c storage.Client) error {
	w, ok := c.(storage.Walker)
	if !ok {
		return errors.New("the storage extension cannot list its entries (file_storage can)")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := w.Walk(ctx, func(key string, v []byte) ([]*storage.Operation, error) {
		if len(key) != revKeyLen || len(v) != 8 {
			return []*storage.Operation{storage.DeleteOperation(key)}, nil
		}
		var k SpanKey
		copy(k.Trace[:], key[:16])
		copy(k.Span[:], key[16:])
		rev := int64(binary.BigEndian.Uint64(v))
		if known, ok := r.revs.Get(k); ok && known >= rev {
			return nil, nil
		}
		if old, evicted := r.revs.Put(k, rev); evicted {
			return []*storage.Operation{storage.DeleteOperation(revKey(old))}, nil
		}
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("reading the revisions sent before: %w", err)
	}
	r.store = c
	return nil
}

// Detach closes r's store, once a write in progress is over; r goes on in memory only.
func (r *Revisions) Detach(ctx context.Context) error {
	r.mu.Lock() // then wmu, as Begin takes them
	r.wmu.Lock()
	c := r.store
	r.store = nil
	r.wmu.Unlock()
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close(ctx)
}

// put records rev as key's newest revision let out, and with a store appends the write
// (and the deletion of the entry the bound forgets) to ops. r.mu is held.
func (r *Revisions) put(key SpanKey, rev int64, ops []*storage.Operation) []*storage.Operation {
	old, evicted := r.revs.Put(key, rev)
	if r.store == nil {
		return ops
	}
	if evicted {
		ops = append(ops, storage.DeleteOperation(revKey(old)))
	}
	return append(ops, storage.SetOperation(revKey(key), revValue(rev)))
}
