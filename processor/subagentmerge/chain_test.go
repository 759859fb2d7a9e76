package subagentmerge

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type chainItem struct {
	key int64
	l   link[chainItem]
}

func itemLink(it *chainItem) *link[chainItem] { return &it.l }

// walk returns the keys head to tail, checking every back link on the way.
func walk(t *testing.T, c *chain[chainItem]) []int64 {
	t.Helper()
	var keys []int64
	var prev *chainItem
	for e := c.head; e != nil; e = c.next(e) {
		require.Same(t, prev, e.l.prev, "back link of %d", e.key)
		keys = append(keys, e.key)
		prev = e
	}
	require.Same(t, prev, c.tail)
	return keys
}

// Random pushes, ordered inserts, moves and removals against a slice model.
func TestChainAgainstASlice(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 7))
		c := chain[chainItem]{of: itemLink}
		items := make([]*chainItem, 12)
		for i := range items {
			items[i] = &chainItem{key: int64(rnd.IntN(20))}
		}
		var model []*chainItem
		for step := 0; step < 60; step++ {
			it := items[rnd.IntN(len(items))]
			in := slices.Contains(model, it)
			require.Equal(t, in, c.has(it), "seed %d step %d", seed, step)
			switch rnd.IntN(4) {
			case 0:
				if !in {
					c.pushBack(it)
					model = append(model, it)
				}
			case 1:
				if !in {
					c.insertOrdered(it, func(e *chainItem) int64 { return e.key })
					at := len(model)
					for at > 0 && model[at-1].key > it.key {
						at--
					}
					model = slices.Insert(model, at, it)
				}
			case 2:
				c.moveToBack(it)
				model = append(slices.DeleteFunc(model, func(e *chainItem) bool { return e == it }), it)
			case 3:
				c.remove(it)
				model = slices.DeleteFunc(model, func(e *chainItem) bool { return e == it })
			}
			var want []int64
			for _, e := range model {
				want = append(want, e.key)
			}
			assert.Equal(t, want, walk(t, &c), "seed %d step %d", seed, step)
		}
	}
}
