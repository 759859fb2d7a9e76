package storageclient

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/agentmeter/agentmeter/internal/storagetest"
)

func TestPacked(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	c := Packed(st)
	big := []byte(fmt.Sprintf("%0600d", 7))
	set := storage.SetOperation("big", big)
	require.NoError(t, c.Batch(ctx, set, storage.SetOperation("small", []byte("12345678"))))
	assert.Equal(t, big, set.Value, "the caller's operation is left as it was")
	stored, _ := st.Get(ctx, "big")
	assert.Less(t, len(stored), len(big))
	small, _ := st.Get(ctx, "small")
	assert.Equal(t, []byte("12345678"), small, "small values (indices, bounds) are stored as they are")
	require.NoError(t, c.Set(ctx, "set", big))
	stored, _ = st.Get(ctx, "set")
	assert.Less(t, len(stored), len(big), "Set packs as Batch does")

	get, getSmall := storage.GetOperation("big"), storage.GetOperation("small")
	require.NoError(t, c.Batch(ctx, get, getSmall))
	assert.Equal(t, big, get.Value)
	assert.Equal(t, []byte("12345678"), getSmall.Value)
	got, err := c.Get(ctx, "set")
	require.NoError(t, err)
	assert.Equal(t, big, got)
	missing, err := c.Get(ctx, "none")
	require.NoError(t, err)
	assert.Nil(t, missing)

	// what an older version stored as it was is read as it is
	require.NoError(t, st.Set(ctx, "older", []byte("\x0a\x05older spans")))
	got, err = c.Get(ctx, "older")
	require.NoError(t, err)
	assert.Equal(t, []byte("\x0a\x05older spans"), got)

	// torn: handed back as stored, for the reader's own check to reject
	torn := append(append([]byte(nil), packMagic...), 0xff, 0xff, 0xff, 0x0f)
	require.NoError(t, st.Set(ctx, "torn", torn))
	got, err = c.Get(ctx, "torn")
	require.NoError(t, err)
	assert.Equal(t, torn, got)
}

// PackingHost hands out packed clients of the one extension it names, the others as
// they are.
func TestPackingHost(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	id := component.MustNewID("file_storage")
	host := PackingHost(st.Host(id), id)
	c, err := Open(ctx, host, id, component.KindExporter, component.MustNewID("vendor"))
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, "big", make([]byte, 4096)))
	stored, _ := st.Get(ctx, "big")
	assert.Less(t, len(stored), 4096, "the queue's client packs")
	other := PackingHost(st.Host(id), component.MustNewIDWithName("file_storage", "other"))
	assert.Equal(t, st.Host(id).GetExtensions(), other.GetExtensions(), "another extension's host is left as it is")
}

// Compressed values are built in reused buffers: what a real file_storage holds after
// many writes, by Set and by Batch, and after a restart, is each value as written.
func TestPackedBuffersAreReusedOnlyOnceStored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() (storage.Client, extension.Extension) { return openFileStorage(t, dir) }
	value := func(i int) []byte { return []byte(strings.Repeat(fmt.Sprintf("value %d;", i), 100+i)) }
	c, ext := open()
	for i := 0; i < 50; i += 2 {
		require.NoError(t, c.Set(ctx, fmt.Sprint(i), value(i)))
		require.NoError(t, c.Batch(ctx, storage.SetOperation(fmt.Sprint(i+1), value(i+1)), storage.SetOperation("x", value(99))))
	}
	check := func(c storage.Client) {
		for i := 0; i < 50; i++ {
			got, err := c.Get(ctx, fmt.Sprint(i))
			require.NoError(t, err)
			require.Equal(t, value(i), got, "value %d", i)
		}
	}
	check(c)
	require.NoError(t, c.Close(ctx))
	require.NoError(t, ext.Shutdown(ctx))
	c, ext = open()
	check(c)
	require.NoError(t, c.Close(ctx))
	require.NoError(t, ext.Shutdown(ctx))
}

// openFileStorage starts a file_storage in dir and returns a packed client of it.
func openFileStorage(t *testing.T, dir string) (storage.Client, extension.Extension) {
	ctx := context.Background()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory, cfg.Compaction.Directory = dir, dir
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	c, err := ext.(storage.Extension).GetClient(ctx, component.KindExporter, component.MustNewID("vendor"), "traces")
	require.NoError(t, err)
	return Packed(c), ext
}

func BenchmarkPackedBatch(b *testing.B) {
	ctx := context.Background()
	c := Packed(discard{})
	v := []byte(strings.Repeat("gen_ai.usage.input_tokens=1234;", 4096))
	b.ReportAllocs()
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		_ = c.Batch(ctx, storage.SetOperation("k", v), storage.SetOperation("i", []byte("8")))
	}
}

// discard is a store that takes every write and keeps nothing.
type discard struct{ storage.Client }

func (discard) Batch(context.Context, ...*storage.Operation) error { return nil }
