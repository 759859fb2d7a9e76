package storageclient

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// countingStore counts the transactions (Batch calls) of the store it wraps.
type countingStore struct {
	*storagetest.Storage
	batches atomic.Int64
}

func (s *countingStore) Batch(ctx context.Context, ops ...*storage.Operation) error {
	s.batches.Add(1)
	return s.Storage.Batch(ctx, ops...)
}

// A batch's operations on one key apply in their order, as storage.Client says, whatever
// pieces the values before and after are in: each Get reads what the operations before
// it left, and what the batch leaves is deleted whole later, by this client or by one
// that never saw the key.
func TestPackedBatchAppliesInOrder(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	small, three, six := []byte("small"), incompressible(r, 3*segMax-100), incompressible(r, 6*segMax-100)
	type step struct {
		op   storage.OpType
		v    []byte // Set's value
		want []byte // Get's value (nil: missing)
	}
	set := func(v []byte) step { return step{op: storage.Set, v: v} }
	get := func(want []byte) step { return step{op: storage.Get, want: want} }
	del := step{op: storage.Delete}
	for _, tc := range []struct {
		name   string
		before []byte // stored before the batch (nil: nothing)
		steps  []step
	}{
		{"get then set more pieces", small, []step{get(small), set(six)}},
		{"get then delete", three, []step{get(three), del}},
		{"set, get, set small", nil, []step{set(three), get(three), set(small)}},
		{"set, get, delete", nil, []step{set(three), get(three), del, get(nil)}},
		{"set, get, set more pieces, get", nil, []step{set(three), get(three), set(six), get(six)}},
		{"get then set as many pieces", three, []step{get(three), set(incompressible(r, 3*segMax-200))}},
		{"get then set more pieces than before", three, []step{get(three), set(six), get(six)}},
		{"get then set fewer pieces", six, []step{get(six), set(three), get(three), set(small)}},
	} {
		for _, fresh := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fresh=%v", tc.name, fresh), func(t *testing.T) {
				st := storagetest.New()
				c := Packed(st)
				if tc.before != nil {
					require.NoError(t, c.Set(ctx, "k", tc.before))
				}
				if fresh {
					c = Packed(st) // a previous process wrote it
				}
				ops := make([]*storage.Operation, len(tc.steps))
				last := tc.before
				for i, s := range tc.steps {
					switch s.op {
					case storage.Set:
						ops[i], last = storage.SetOperation("k", s.v), s.v
					case storage.Get:
						ops[i] = storage.GetOperation("k")
					default:
						ops[i], last = storage.DeleteOperation("k"), nil
					}
				}
				require.NoError(t, c.Batch(ctx, ops...))
				for i, s := range tc.steps {
					if s.op == storage.Get {
						assert.Equal(t, s.want, ops[i].Value, "Get #%d", i)
					}
				}
				got, err := Packed(st).Get(ctx, "k")
				require.NoError(t, err)
				assert.Equal(t, last, got, "what the batch left, read by a new client")
				require.NoError(t, c.Delete(ctx, "k"))
				assert.Zero(t, st.Count(""), "the key and every piece deleted")
			})
		}
	}
}

// Batches of several goroutines on the same keys run one at a time: a Get returns a
// value written under its key (or none), never a torn or empty one, and once every key
// is deleted no piece is left behind.
func TestPackedConcurrentBatchesOnSameKeys(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	c := Packed(st)
	values := make([][]byte, 6)
	r := rand.New(rand.NewPCG(9, 10))
	for i := range values {
		values[i] = incompressible(r, []int{10, 600, segMax / 2, 2 * segMax, 4 * segMax, 7 * segMax}[i])
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 11))
			for range 300 {
				key := fmt.Sprint("k", r.IntN(3))
				var err error
				switch r.IntN(4) {
				case 0, 1:
					err = c.Set(ctx, key, values[r.IntN(len(values))])
				case 2:
					err = c.Delete(ctx, key)
				default:
					var v []byte
					if v, err = c.Get(ctx, key); err == nil && v != nil && !isOneOf(v, values) {
						bad.Add(1)
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, bad.Load(), "Gets that returned no value ever written")
	for i := range 3 {
		require.NoError(t, Packed(st).Delete(ctx, fmt.Sprint("k", i)))
	}
	assert.Zero(t, st.Count(""), "no orphan pieces")
}

func isOneOf(v []byte, values [][]byte) bool {
	for _, w := range values {
		if bytes.Equal(v, w) {
			return true
		}
	}
	return false
}

// A value whose head names pieces that are not there is torn: it is handed back as
// stored (the head, which no reader takes for a value), not as an empty value, which a
// queue would take for an empty batch and delete.
func TestPackedTornHeadReadsAsStored(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	big := incompressible(rand.New(rand.NewPCG(12, 13)), 3*segMax-100)
	w := Packed(st) // the writer knows the key's pieces; a fresh client learns them
	require.NoError(t, w.Set(ctx, "k", big))
	head, err := st.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, 3, segCount(head))
	for i := 1; i <= 3; i++ {
		require.NoError(t, st.Delete(ctx, pieceKey("k", i)))
	}
	for _, c := range []storage.Client{w, Packed(st)} {
		got, err := c.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, head, got)
	}
	// one piece of three missing
	require.NoError(t, Packed(st).Set(ctx, "k", big))
	require.NoError(t, st.Delete(ctx, pieceKey("k", 2)))
	got, err := Packed(st).Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, head, got)
}

// Every value reads back as written, also a small one that begins like a stored form.
func TestPackedValuesThatLookStored(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	c := Packed(st)
	for i, v := range [][]byte{
		append(append([]byte{}, packMagic...), "not a block"...),
		segHead(2),
		append(append([]byte{}, rawMagic...), "x"...),
		[]byte("\x00as"),
		[]byte("\x00a"),
	} {
		key := fmt.Sprint("v", i)
		require.NoError(t, c.Set(ctx, key, v))
		for _, r := range []storage.Client{c, Packed(st)} {
			got, err := r.Get(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, v, got, "value %q", v)
		}
		require.NoError(t, c.Delete(ctx, key))
	}
	assert.Zero(t, st.Count(""))
}

// Piece keys are the key, a zero byte and a number: a key of the caller's with a zero
// byte could be one, so it is refused, and nothing of its batch is stored.
func TestPackedRefusesKeysWithZeroByte(t *testing.T) {
	ctx := context.Background()
	st := storagetest.New()
	err := Packed(st).Batch(ctx, storage.SetOperation("ok", []byte("v")), storage.SetOperation("a\x001", []byte("v")))
	require.ErrorContains(t, err, `"a\x001"`)
	assert.Zero(t, st.Count(""))
}

// A read of a value in pieces is one transaction of the store, the pieces read with
// their key, once the client knows the key (it wrote it or read it before).
func TestPackedReadOfPiecesIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{Storage: storagetest.New()}
	c := Packed(st)
	big := incompressible(rand.New(rand.NewPCG(14, 15)), 4*segMax)
	require.NoError(t, c.Set(ctx, "k", big))
	before := st.batches.Load()
	got, err := c.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, big, got)
	assert.Equal(t, int64(1), st.batches.Load()-before)

	// a new client lists the store once, then reads the key whole in one transaction
	c2 := Packed(st)
	before = st.batches.Load()
	got, err = c2.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, big, got)
	assert.Equal(t, int64(1), st.batches.Load()-before)
	// on a store that cannot list its entries, it looks the key up first
	c3 := Packed(unlisted{st})
	before = st.batches.Load()
	got, err = c3.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, big, got)
	assert.Equal(t, int64(2), st.batches.Load()-before)
}

// Once it listed the store, a client writes a key it has not seen, and deletes it, in
// one transaction each: no lookup first.
func TestPackedNewKeysAfterListing(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{Storage: storagetest.New()}
	r := rand.New(rand.NewPCG(16, 17))
	require.NoError(t, Packed(st).Set(ctx, "old", incompressible(r, 3*segMax)), "a previous process's value")
	c := Packed(st)
	require.NoError(t, c.Set(ctx, "first", []byte("x")))
	for i := range 5 {
		key := fmt.Sprint("new", i)
		before := st.batches.Load()
		require.NoError(t, c.Set(ctx, key, incompressible(r, (i+1)*segMax)))
		require.NoError(t, c.Delete(ctx, key))
		assert.Equal(t, int64(2), st.batches.Load()-before, key)
	}
	require.NoError(t, c.Set(ctx, "old", []byte("short")), "the previous process's pieces are known from the listing")
	require.NoError(t, c.Delete(ctx, "first"))
	assert.Equal(t, 1, st.Count(""), "old, whole under its key")
}
