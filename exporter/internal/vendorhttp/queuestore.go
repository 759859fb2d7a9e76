package vendorhttp

import (
	"bytes"
	"context"
	"fmt"
	"maps"

	"github.com/klauspost/compress/s2"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// A persistent sending queue stores each queued request whole, and bbolt (file_storage)
// rewrites the whole leaf a value sits in, its neighbours' values too, each time the
// queue writes, reads or deletes an item: a request's bytes are copied several times
// over, and the file's pages count in the pod's memory. Agent spans repeat their
// attribute keys and values, so both exporters hand their queue a client that stores
// large values S2-compressed (a Snappy-compatible block, some GB/s each way): the queue
// and its config are exporterhelper's, only the bytes on disk are fewer.
//
// A compressed value is packMagic and the block. What an older version stored is read
// as it was: an item or the queue's metadata is protobuf, which never begins with a
// zero byte, and values under packMin bytes (the queue's indices) are never compressed.

// packMagic starts a compressed value: a zero byte, which no protobuf message begins
// with, then a name and a format version.
var packMagic = []byte("\x00as2\x01")

// packMin is the smallest value compressed: below it the block's overhead is not worth it.
const packMin = 512

func pack(v []byte) []byte {
	if len(v) < packMin {
		return v
	}
	out := make([]byte, len(packMagic)+s2.MaxEncodedLen(len(v)))
	copy(out, packMagic)
	return out[:len(packMagic)+len(s2.Encode(out[len(packMagic):], v))]
}

func unpack(key string, v []byte) ([]byte, error) {
	if !bytes.HasPrefix(v, packMagic) {
		return v, nil
	}
	out, err := s2.Decode(nil, v[len(packMagic):])
	if err != nil {
		return nil, fmt.Errorf("queue storage: value of %q does not decompress: %w", key, err)
	}
	return out, nil
}

// packedQueue starts the exporter with a packingHost.
type packedQueue struct {
	exporter.Traces
	storageID component.ID
}

func (q packedQueue) Start(ctx context.Context, host component.Host) error {
	return q.Traces.Start(ctx, packingHost{Host: host, storageID: q.storageID})
}

// packingHost is the host a queued exporter starts with: the same extensions, except
// that the queue's storage extension hands out packing clients.
type packingHost struct {
	component.Host
	storageID component.ID
}

func (h packingHost) GetExtensions() map[component.ID]component.Component {
	exts := h.Host.GetExtensions()
	ext, ok := exts[h.storageID].(storage.Extension)
	if !ok {
		return exts // exporterhelper reports a missing or wrong extension itself
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
	return packingClient{c}, nil
}

// packingClient compresses the values it stores and decompresses the values it reads.
type packingClient struct{ storage.Client }

func (c packingClient) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := c.Client.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return unpack(key, v)
}

func (c packingClient) Set(ctx context.Context, key string, value []byte) error {
	return c.Client.Set(ctx, key, pack(value))
}

// Batch stores packed copies of the Set operations (the caller's are left as they
// were) and unpacks what the Get operations read, in place, as the interface says.
func (c packingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	sent, copied := ops, false
	for i, op := range ops {
		if op.Type != storage.Set || len(op.Value) < packMin {
			continue
		}
		if !copied {
			sent, copied = append([]*storage.Operation(nil), ops...), true
		}
		sent[i] = storage.SetOperation(op.Key, pack(op.Value))
	}
	if err := c.Client.Batch(ctx, sent...); err != nil {
		return err
	}
	for _, op := range ops {
		if op.Type != storage.Get {
			continue
		}
		v, err := unpack(op.Key, op.Value)
		if err != nil {
			return err
		}
		op.Value = v
	}
	return nil
}
