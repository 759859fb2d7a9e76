package storageclient

import (
	"bytes"
	"context"
	"maps"
	"sync"

	"github.com/klauspost/compress/s2"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// A packed client stores large values S2-compressed (a Snappy-compatible block, some
// GB/s each way). bbolt (file_storage) rewrites the whole page run a value sits in, its
// neighbours' values too, on every write, so a store of spans copies each value's bytes
// several times over, and the file's pages count in the process's memory; agent spans
// repeat their attribute keys and values, so they take a fraction of their bytes.
// subagentmerge's chunks and the vendor exporters' persistent sending queues are stored
// so, and a value still large once compressed goes in pieces (segment.go).
//
// A compressed value is packMagic and the block. What an older version stored is read
// as it was: the values stored so are protobuf (or start with a length prefix ahead of
// protobuf), which never begins with the magic, and values under packMin bytes (a
// queue's indices, a store's bounds) are never compressed. A value that starts with
// the magic but does not decompress is handed back as stored: the reader's own check
// of a torn value rejects it (no protobuf message starts with a zero byte). A small
// value that itself begins like a stored form (storedMagic) goes behind rawMagic, so
// that every value reads back as written, whatever its bytes.

// packMagic starts a compressed value: a zero byte, which no protobuf message begins
// with, then a name and a format version.
var packMagic = []byte("\x00as2\x01")

// rawMagic starts a small value stored as it is that would otherwise read as a stored
// form: one that begins with storedMagic, as packMagic, segMagic and rawMagic do.
var rawMagic = []byte("\x00asr\x01")

// storedMagic is what every magic of a stored form begins with.
var storedMagic = []byte("\x00as")

// packMin is the smallest value compressed: below it the block's overhead is not worth it.
const packMin = 512

// packInto appends v's stored form to dst[:0]: v compressed behind packMagic.
func packInto(dst, v []byte) []byte {
	n := len(packMagic) + s2.MaxEncodedLen(len(v))
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	copy(dst, packMagic)
	return dst[:len(packMagic)+len(s2.Encode(dst[len(packMagic):], v))]
}

// storedForm is v as it is stored (before going in pieces): compressed when it is large,
// behind rawMagic when it is small and begins like a stored form, else v itself. buf,
// when not nil, holds the stored form: put it back (putPackBuf) once it is stored.
func storedForm(v []byte) (_ []byte, buf *[]byte) {
	switch {
	case len(v) >= packMin:
		buf = getPackBuf()
		*buf = packInto(*buf, v)
	case bytes.HasPrefix(v, storedMagic):
		buf = getPackBuf()
		*buf = append(append((*buf)[:0], rawMagic...), v...)
	default:
		return v, nil
	}
	return *buf, buf
}

// plain is the value stored as v (whole, not a head): unpacked, or out from behind
// rawMagic.
func plain(v []byte) []byte {
	if bytes.HasPrefix(v, rawMagic) {
		return v[len(rawMagic):]
	}
	return unpack(v)
}

// packBufs hold compressed values while a write is under way. A store has the value in
// its own pages when Set or Batch returns (file_storage commits its bbolt transaction
// before), so a buffer serves the next write: every value of a queue or a merge chunk
// compressed into a new buffer was as many bytes of garbage as the value.
var packBufs = sync.Pool{New: func() any { return new([]byte) }}

// packMaxPooled is the largest buffer kept for reuse: a rare giant value is not pinned.
const packMaxPooled = 16 << 20

func getPackBuf() *[]byte { return packBufs.Get().(*[]byte) }

func putPackBuf(b *[]byte) {
	if cap(*b) <= packMaxPooled {
		*b = (*b)[:0]
		packBufs.Put(b)
	}
}

func unpack(v []byte) []byte {
	if !bytes.HasPrefix(v, packMagic) {
		return v
	}
	out, err := s2.Decode(nil, v[len(packMagic):])
	if err != nil {
		return v // torn: the reader's decoding says so
	}
	return out
}

// Packed returns a client that stores c's large values compressed, and in pieces
// (segment.go). The compressed bytes are built in buffers reused once Set or Batch
// returned, so c must not keep a value it was handed past the call: file_storage copies
// it into its pages before it returns.
func Packed(c storage.Client) storage.Client {
	return &packingClient{Client: c, pieces: map[string]int{}}
}

// PackingHost is host with the storage extension id handing out packed clients: what a
// component starts a persistent sending queue of exporterhelper with.
func PackingHost(host component.Host, id component.ID) component.Host {
	return packingHost{Host: host, storageID: id}
}

// packingHost has the same extensions as its host, except that the storage extension
// storageID hands out packed clients.
type packingHost struct {
	component.Host
	storageID component.ID
}

func (h packingHost) GetExtensions() map[component.ID]component.Component {
	exts := h.Host.GetExtensions()
	ext, ok := exts[h.storageID].(storage.Extension)
	if !ok {
		return exts // whoever opens it reports a missing or wrong extension
	}
	exts = maps.Clone(exts)
	exts[h.storageID] = packingExtension{Extension: ext}
	return exts
}

type packingExtension struct{ storage.Extension }

func (e packingExtension) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c, err := e.Extension.GetClient(ctx, kind, id, name)
	if err != nil {
		return nil, err
	}
	return Packed(c), nil
}

// packingClient compresses the values it stores and decompresses the values it reads;
// a large value goes in pieces (segment.go).
type packingClient struct {
	storage.Client
	// mu is held through a whole Batch (segment.go), from learning keys to recording
	// what the batch left
	mu sync.Mutex
	// pieces is, for the keys this client has read, written or looked up since it
	// opened, how many pieces their value is stored in besides the key itself (0: whole
	// under the key, or none). A key it has not seen may hold pieces a previous process
	// wrote: a write or delete looks it up first (learn), unless the store was listed.
	pieces map[string]int
	// listed: learn listed the store (at the first batch, when it can), and pieces holds
	// every key with pieces, so a key not in it has none
	listed bool
}

func (c *packingClient) Get(ctx context.Context, key string) ([]byte, error) {
	op := storage.GetOperation(key)
	if err := c.Batch(ctx, op); err != nil {
		return nil, err
	}
	return op.Value, nil
}

func (c *packingClient) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

func (c *packingClient) Delete(ctx context.Context, key string) error {
	return c.Batch(ctx, storage.DeleteOperation(key))
}
