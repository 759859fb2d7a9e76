package storageclient

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// random bytes do not compress: a value of n bytes is stored in about n/segMax pieces
func incompressible(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// unlisted hides the Walk of the store it wraps: a store that cannot list its entries.
type unlisted struct{ storage.Client }

// A large value goes in pieces, in the transaction that writes its key, and comes back
// whole; deleting it deletes its pieces; writing it again shorter (or small) leaves no
// piece behind, whether this client wrote it or a previous process did, on a store that
// lists its entries and on one that cannot.
func TestPackedPieces(t *testing.T) {
	for _, listing := range []bool{true, false} {
		t.Run(fmt.Sprintf("listing=%v", listing), func(t *testing.T) {
			ctx := context.Background()
			r := rand.New(rand.NewPCG(1, 2))
			st := storagetest.New()
			// a client of a process: the store is its alone while it runs
			process := func() storage.Client {
				if listing {
					return Packed(st)
				}
				return Packed(unlisted{st})
			}
			c := process()
			big := incompressible(r, 5*segMax+17)
			require.NoError(t, c.Set(ctx, "big", big))
			assert.Equal(t, 7, st.Count(""), "the key and its 6 pieces")
			head, _ := st.Get(ctx, "big")
			assert.Equal(t, 6, segCount(head))
			got, err := c.Get(ctx, "big")
			require.NoError(t, err)
			assert.Equal(t, big, got)

			// a previous process's value: a new client does not know its pieces
			got, err = process().Get(ctx, "big")
			require.NoError(t, err)
			assert.Equal(t, big, got)
			require.NoError(t, process().Delete(ctx, "big"))
			assert.Zero(t, st.Count(""), "the pieces went with the key")

			require.NoError(t, process().Set(ctx, "k", incompressible(r, 4*segMax)))
			shorter := incompressible(r, 2*segMax-100) // 2 pieces with the block's overhead
			require.NoError(t, process().Set(ctx, "k", shorter), "a client that never saw k")
			assert.Equal(t, 3, st.Count(""))
			c = process()
			got, err = c.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, shorter, got)
			require.NoError(t, c.Set(ctx, "k", []byte("small")))
			assert.Equal(t, 1, st.Count(""))
			got, err = process().Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, []byte("small"), got)

			// in one batch with other operations, in their order
			a, b := incompressible(r, 3*segMax-100), incompressible(r, 100)
			ga, gb := storage.GetOperation("a"), storage.GetOperation("b")
			require.NoError(t, c.Batch(ctx, storage.SetOperation("a", a), storage.SetOperation("b", b), ga, gb, storage.DeleteOperation("k")))
			assert.Equal(t, a, ga.Value)
			assert.Equal(t, b, gb.Value)
			assert.Equal(t, 5, st.Count(""), "a, its 3 pieces, b")

			// a missing piece leaves the value short: its reader's own check rejects it
			require.NoError(t, st.Delete(ctx, pieceKey("a", 2)))
			got, err = process().Get(ctx, "a")
			require.NoError(t, err)
			assert.NotEqual(t, a, got)
		})
	}
}

// A key written twice in one batch, or written and deleted, ends as the last operation
// left it, with no piece left over, for a client that knew it and one that did not.
func TestPackedPiecesSameKeyTwiceInABatch(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	st := storagetest.New()
	require.NoError(t, Packed(st).Set(ctx, "k", incompressible(r, 6*segMax-100)))
	for _, c := range []storage.Client{Packed(st), Packed(st)} {
		long, short := incompressible(r, 4*segMax-100), incompressible(r, 2*segMax-100)
		require.NoError(t, c.Batch(ctx, storage.SetOperation("k", short), storage.SetOperation("k", long)))
		got, err := Packed(st).Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, long, got)
		assert.Equal(t, 5, st.Count(""), "k and its 4 pieces")
		require.NoError(t, c.Batch(ctx, storage.SetOperation("k", long), storage.SetOperation("k", short)))
		got, err = c.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, short, got)
		assert.Equal(t, 3, st.Count(""), "k and its 2 pieces")
	}
	c := Packed(st)
	require.NoError(t, c.Batch(ctx, storage.SetOperation("k", incompressible(r, 3*segMax)), storage.DeleteOperation("k")))
	assert.Zero(t, st.Count(""))
	require.NoError(t, c.Set(ctx, "k", []byte("x")))
	require.NoError(t, c.Delete(ctx, "k"))
	assert.Zero(t, st.Count(""))
}

// A failed write changes nothing the client knows: the next one is the same write.
func TestPackedPiecesFailedWrite(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	c := Packed(st)
	big := incompressible(rand.New(rand.NewPCG(3, 4)), 3*segMax)
	st.Fail(fmt.Errorf("disk full"))
	require.Error(t, c.Set(ctx, "big", big))
	st.Fail(nil)
	require.NoError(t, c.Set(ctx, "big", big))
	got, err := c.Get(ctx, "big")
	require.NoError(t, err)
	assert.Equal(t, big, got)
	require.NoError(t, c.Delete(ctx, "big"))
	assert.Zero(t, st.Count(""))
}

// On a real file_storage, random writes, reads and deletes of values of every size,
// with restarts between rounds, read back as written, and leave nothing behind.
func TestPackedPiecesFileStorage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	open := func() (storage.Client, func()) {
		c, ext := openFileStorage(t, dir)
		return c, func() {
			require.NoError(t, c.Close(ctx))
			require.NoError(t, ext.Shutdown(ctx))
		}
	}
	want := map[string][]byte{}
	for round := range 4 {
		c, closeIt := open()
		for key, v := range want {
			got, err := c.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, v, got, "round %d key %s", round, key)
		}
		for range 60 {
			key := fmt.Sprint(r.IntN(20))
			switch r.IntN(3) {
			case 0:
				v := incompressible(r, r.IntN(12*segMax))
				if r.IntN(2) == 0 {
					v = []byte(fmt.Sprintf("%0*d", r.IntN(20*segMax), 7)) // compresses well
				}
				require.NoError(t, c.Batch(ctx, storage.SetOperation(key, v)))
				want[key] = v
			case 1:
				require.NoError(t, c.Delete(ctx, key))
				delete(want, key)
			default:
				got, err := c.Get(ctx, key)
				require.NoError(t, err)
				if v, ok := want[key]; ok {
					require.Equal(t, v, got)
				} else {
					require.Nil(t, got)
				}
			}
		}
		closeIt()
	}
	c, closeIt := open()
	defer closeIt()
	for key := range want {
		require.NoError(t, c.Delete(ctx, key))
	}
	w, ok := c.(*packingClient).Client.(storage.Walker)
	require.True(t, ok)
	left := 0
	require.NoError(t, w.Walk(ctx, func(string, []byte) ([]*storage.Operation, error) { left++; return nil, nil }))
	assert.Zero(t, left, "every piece deleted with its key")
}
