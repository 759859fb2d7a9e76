package storageclient

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
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
