package storageclient

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"google.golang.org/protobuf/encoding/protowire"
)

// bbolt (file_storage) keeps a value in the leaf node of its key, and splits no node of
// four keys or fewer: every put or delete writes the key's whole node again, its
// neighbours' values with it, into a buffer allocated for that write whenever the node
// spans more than one page. A queue's batch or a merge's chunk is tens to hundreds of
// KiB, so each write and each delete copied a few such values: in the shipped sidecar
// under load, a sixth of all the bytes the process allocated. A packed client stores a
// value over segMax bytes (as stored: compressed) in pieces of segMax under keys of
// their own (the key, a zero byte, the piece's number), and under the key only how many
// pieces there are: a write fills new nodes with its own pieces and a delete empties
// them, so no write copies more than a few pages of anyone else's bytes. A value's
// pieces are written, and deleted, in the same transaction as its key.

// segMax is the most bytes of a value under one key: a piece with its key and element
// header fits one 4 KiB page.
const segMax = 3968

// maxPieces bounds what a head may say: a value of 4 GiB.
const maxPieces = 1 << 20

// segMagic starts the value under a key whose value is in pieces, followed by the
// number of pieces (a varint). Like packMagic it begins with a zero byte.
var segMagic = []byte("\x00asg\x01")

func pieceKey(key string, i int) string { return key + "\x00" + strconv.Itoa(i) }

func segHead(n int) []byte {
	return protowire.AppendVarint(append(make([]byte, 0, len(segMagic)+4), segMagic...), uint64(n))
}

// segCount is how many pieces head v says its value is in, or 0 when v is a value.
func segCount(v []byte) int {
	if !bytes.HasPrefix(v, segMagic) {
		return 0
	}
	n, w := protowire.ConsumeVarint(v[len(segMagic):])
	if w < 0 || len(segMagic)+w != len(v) || n == 0 || n > maxPieces {
		return 0
	}
	return int(n)
}

func piecesOf(n int) int { return (n + segMax - 1) / segMax }

// Batch runs ops as one transaction of the wrapped client, in their order, as
// storage.Client says: a Get sees what the batch's earlier operations left under its key,
// the Set operations store packed copies of their values (the caller's are left as they
// were), large ones in pieces, a Delete deletes a value's pieces with it, and each Get
// reads the pieces its key has at that point in the same transaction. One batch runs at a
// time, from looking up the keys it does not know to recording what it left: a store
// applies one write transaction at a time anyway, and what the client knows of a key's
// pieces is only right if no other batch runs between (compressing is done before, by
// callers at once).
func (c *packingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		if strings.IndexByte(op.Key, 0) >= 0 {
			return fmt.Errorf("storage key %q: a zero byte is reserved for the pieces of stored values", op.Key)
		}
	}
	stored := make([][]byte, len(ops))
	var bufs []*[]byte
	defer func() {
		for _, b := range bufs {
			putPackBuf(b)
		}
	}()
	for i, op := range ops {
		if op.Type == storage.Set {
			var buf *[]byte
			stored[i], buf = storedForm(op.Value)
			if buf != nil {
				bufs = append(bufs, buf)
			}
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.learn(ctx, ops); err != nil {
		return err
	}
	sent := make([]*storage.Operation, 0, len(ops))
	// a Get's operations in sent: its key's, then its pieces'
	type read struct {
		op     *storage.Operation
		at, to int
	}
	var reads []read
	// what the batch's earlier operations leave under a key (a key set twice in one batch)
	var now map[string]int
	piecesNow := func(key string) int {
		if n, ok := now[key]; ok {
			return max(n, 0) // -1: deleted
		}
		return c.pieces[key] // learnt above
	}
	setNow := func(key string, n int) {
		if now == nil {
			now = map[string]int{}
		}
		now[key] = n
	}
	for i, op := range ops {
		switch op.Type {
		case storage.Get:
			r := read{op: op, at: len(sent)}
			sent = append(sent, storage.GetOperation(op.Key))
			for j := 1; j <= piecesNow(op.Key); j++ {
				sent = append(sent, storage.GetOperation(pieceKey(op.Key, j)))
			}
			r.to = len(sent)
			reads = append(reads, r)
		case storage.Delete:
			sent = append(sent, storage.DeleteOperation(op.Key))
			for j := 1; j <= piecesNow(op.Key); j++ {
				sent = append(sent, storage.DeleteOperation(pieceKey(op.Key, j)))
			}
			setNow(op.Key, -1)
		case storage.Set:
			v := stored[i]
			n, old := 0, piecesNow(op.Key)
			if len(v) <= segMax {
				sent = append(sent, storage.SetOperation(op.Key, v))
			} else {
				n = piecesOf(len(v))
				sent = append(sent, storage.SetOperation(op.Key, segHead(n)))
				for j := 1; j <= n; j++ {
					sent = append(sent, storage.SetOperation(pieceKey(op.Key, j), v[(j-1)*segMax:min(j*segMax, len(v))]))
				}
			}
			for j := n + 1; j <= old; j++ { // a shorter value's: the rest of the longer one's
				sent = append(sent, storage.DeleteOperation(pieceKey(op.Key, j)))
			}
			setNow(op.Key, n)
		}
	}
	if err := c.Client.Batch(ctx, sent...); err != nil {
		return err
	}
	for key, n := range now {
		if n < 0 {
			delete(c.pieces, key)
		} else {
			c.pieces[key] = n
		}
	}
	for _, r := range reads {
		r.op.Value = joinPieces(sent[r.at].Value, sent[r.at+1:r.to])
	}
	return nil
}

// learn reads how many pieces the keys of ops are in, for the keys this client has not
// seen (new ones, or a previous process's), so that a write deletes every piece the
// key's value leaves behind in its own transaction and a read reads them in its own.
// A store that lists its entries (file_storage) is walked once instead, at the first
// batch: every key it holds is then known, and a key it does not hold has no pieces, so
// no later batch needs a transaction of its own to look up the keys it writes (almost
// every batch writes new ones). That relies on the client being the store's only writer
// while it is open, as file_storage's clients are (a file per component). The caller
// holds c.mu.
func (c *packingClient) learn(ctx context.Context, ops []*storage.Operation) error {
	if c.listed {
		return nil
	}
	if w, ok := c.Client.(storage.Walker); ok {
		err := w.Walk(ctx, func(key string, v []byte) ([]*storage.Operation, error) {
			if strings.IndexByte(key, 0) < 0 {
				if n := segCount(v); n > 0 {
					c.pieces[key] = n
				}
			}
			return nil, nil
		})
		if err != nil {
			return fmt.Errorf("storage: listing stored values: %w", err)
		}
		c.listed = true
		return nil
	}
	var heads []*storage.Operation
	var asked map[string]bool // a key twice in ops is looked up once
	for _, op := range ops {
		if _, known := c.pieces[op.Key]; known || asked[op.Key] {
			continue
		}
		if asked == nil {
			asked = map[string]bool{}
		}
		asked[op.Key] = true
		heads = append(heads, storage.GetOperation(op.Key))
	}
	if len(heads) == 0 {
		return nil
	}
	if err := c.Client.Batch(ctx, heads...); err != nil {
		return err
	}
	for _, h := range heads {
		c.pieces[h.Key] = segCount(h.Value)
	}
	return nil
}

// joinPieces is the value stored as head and, when the head says the value is in
// pieces, the pieces read with it: joined and unpacked. A head that names other pieces
// than were read, or one missing, is a torn value (a bug or a damaged file, never a
// write cut short: a value and its pieces are written in one transaction): the head is
// handed back as it is, and, like a torn compressed value, its reader's own check
// rejects it (no value stored begins with a zero byte, and a head does).
func joinPieces(head []byte, pieces []*storage.Operation) []byte {
	n := segCount(head)
	if n != len(pieces) {
		return head // torn: the head, as plain hands back a value not in pieces
	}
	if n == 0 {
		return plain(head)
	}
	for _, p := range pieces {
		if p.Value == nil {
			return head // torn
		}
	}
	buf := getPackBuf()
	defer putPackBuf(buf)
	for _, p := range pieces {
		*buf = append(*buf, p.Value...)
	}
	v := unpack(*buf) // a value in pieces is always compressed
	if len(v) > 0 && &v[0] == &(*buf)[0] {
		v = bytes.Clone(v) // handed back as stored (torn): not the pooled buffer
	}
	return v
}
