package storageclient

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/agentmeter/agentmeter/internal/storagetest"
)

var (
	storageID = component.MustNewID("file_storage")
	self      = component.MustNewID("agentusage")
)

func TestOpenReturnsTheExtensionsClient(t *testing.T) {
	st := storagetest.New()
	c, err := OpenWalker(context.Background(), st.Host(storageID), storageID, component.KindReceiver, self)
	require.NoError(t, err)
	require.NoError(t, c.Set(context.Background(), "k", []byte("v")))
	assert.Equal(t, 1, st.Count("k"), "the client writes to the extension")
	c2, err := Open(context.Background(), st.Host(storageID), storageID, component.KindProcessor, self)
	require.NoError(t, err)
	v, err := c2.Get(context.Background(), "k")
	require.NoError(t, err)
	assert.Equal(t, []byte("v"), v)
}

func TestOpenMissingExtension(t *testing.T) {
	_, err := Open(context.Background(), componenttest.NewNopHost(), storageID, component.KindReceiver, self)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `extension "file_storage" not found`)
}

// notStorage is a component that is not a storage extension.
type notStorage struct{ component.Component }

type hostWith map[component.ID]component.Component

func (h hostWith) GetExtensions() map[component.ID]component.Component { return h }

func TestOpenNotAStorageExtension(t *testing.T) {
	h := hostWith{storageID: notStorage{}}
	_, err := Open(context.Background(), h, storageID, component.KindReceiver, self)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a storage extension")
}

// plainStorage gives clients that cannot list their entries.
type plainStorage struct {
	component.Component
	closed *bool
	err    error
}

type plainClient struct {
	storage.Client
	closed *bool
}

func (c plainClient) Close(context.Context) error { *c.closed = true; return nil }

func (s plainStorage) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	if s.err != nil {
		return nil, s.err
	}
	return plainClient{closed: s.closed}, nil
}

func TestOpenWalkerRefusesAClientThatCannotList(t *testing.T) {
	closed := false
	h := hostWith{storageID: plainStorage{closed: &closed}}
	_, err := OpenWalker(context.Background(), h, storageID, component.KindReceiver, self)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot list its entries")
	assert.True(t, closed, "the refused client is closed")
}

func TestOpenWrapsTheClientError(t *testing.T) {
	boom := errors.New("disk gone")
	h := hostWith{storageID: plainStorage{err: boom}}
	_, err := Open(context.Background(), h, storageID, component.KindReceiver, self)
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), `getting a client of "file_storage"`)
}
