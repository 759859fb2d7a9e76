package storageclient

import (
	"bytes"
	"context"
	"strconv"

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

// Batch stores packed copies of the Set operations (the caller's are left as they
// were), large ones in pieces, deletes a value's pieces with it, and hands the Get
// operations what was stored, joined and unpacked, in place, as the interface says.
func (c *packingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if err := c.learn(ctx, ops); err != nil {
		return err
	}
	var bufs []*[]byte
	defer func() {
		for _, b := range bufs {
			putPackBuf(b)
		}
	}()
	sent := make([]*storage.Operation, 0, len(ops))
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
	c.mu.Lock()
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			sent = append(sent, op)
		case storage.Delete:
			sent = append(sent, op)
			for i := 1; i <= piecesNow(op.Key); i++ {
				sent = append(sent, storage.DeleteOperation(pieceKey(op.Key, i)))
			}
			setNow(op.Key, -1)
		case storage.Set:
			v := op.Value
			if len(v) >= packMin {
				buf := getPackBuf()
				*buf = packInto(*buf, v)
				bufs = append(bufs, buf)
				v = *buf
			}
			n, old := 0, piecesNow(op.Key)
			if len(v) <= segMax {
				sent = append(sent, storage.SetOperation(op.Key, v))
			} else {
				n = piecesOf(len(v))
				sent = append(sent, storage.SetOperation(op.Key, segHead(n)))
				for i := 1; i <= n; i++ {
					sent = append(sent, storage.SetOperation(pieceKey(op.Key, i), v[(i-1)*segMax:min(i*segMax, len(v))]))
				}
			}
			for i := n + 1; i <= old; i++ { // a shorter value's: the rest of the longer one's
				sent = append(sent, storage.DeleteOperation(pieceKey(op.Key, i)))
			}
			setNow(op.Key, n)
		}
	}
	c.mu.Unlock()
	if err := c.Client.Batch(ctx, sent...); err != nil {
		return err
	}
	c.mu.Lock()
	for key, n := range now {
		if n < 0 {
			delete(c.pieces, key)
		} else {
			c.pieces[key] = n
		}
	}
	c.mu.Unlock()
	return c.readPieces(ctx, ops)
}

// learn reads how many pieces the keys the operations write or delete are in, for the
// keys this client has not seen (new ones, or a previous process's), so that the write
// deletes every piece the key's value leaves behind in its own transaction.
func (c *packingClient) learn(ctx context.Context, ops []*storage.Operation) error {
	var heads []*storage.Operation
	c.mu.Lock()
	for _, op := range ops {
		if _, known := c.pieces[op.Key]; op.Type != storage.Get && !known {
			heads = append(heads, storage.GetOperation(op.Key))
		}
	}
	c.mu.Unlock()
	if len(heads) == 0 {
		return nil
	}
	if err := c.Client.Batch(ctx, heads...); err != nil {
		return err
	}
	c.mu.Lock()
	for _, h := range heads {
		c.pieces[h.Key] = segCount(h.Value)
	}
	c.mu.Unlock()
	return nil
}

// readPieces completes the Get operations: a value stored in pieces is read and joined
// (a missing piece leaves it short, and its reader's own check rejects it), then every
// value is unpacked.
func (c *packingClient) readPieces(ctx context.Context, ops []*storage.Operation) error {
	var pieces []*storage.Operation
	for _, op := range ops {
		if op.Type != storage.Get {
			continue
		}
		n := segCount(op.Value)
		if op.Value != nil {
			c.mu.Lock()
			c.pieces[op.Key] = n
			c.mu.Unlock()
		}
		for i := 1; i <= n; i++ {
			pieces = append(pieces, storage.GetOperation(pieceKey(op.Key, i)))
		}
	}
	if len(pieces) > 0 {
		if err := c.Client.Batch(ctx, pieces...); err != nil {
			return err
		}
	}
	at := 0
	for _, op := range ops {
		if op.Type != storage.Get {
			continue
		}
		n := segCount(op.Value)
		if n == 0 {
			op.Value = unpack(op.Value)
			continue
		}
		buf := getPackBuf()
		for _, p := range pieces[at : at+n] {
			*buf = append(*buf, p.Value...)
		}
		at += n
		v := unpack(*buf)
		if len(v) > 0 && &v[0] == &(*buf)[0] {
			v = bytes.Clone(v) // handed back as stored (torn): not the pooled buffer
		}
		putPackBuf(buf)
		op.Value = v
	}
	return nil
}
