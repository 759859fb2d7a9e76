package pending

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPendingAndRecent(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewStore[int](time.Minute, 2)
	assert.Empty(t, p.Admit([]string{"a"}, []int{1}, t0))
	assert.Empty(t, p.Admit([]string{"b"}, []int{2}, t0.Add(time.Second)))
	assert.Empty(t, p.Admit([]string{"a"}, []int{3}, t0.Add(2*time.Second)), "an update keeps its place")
	v, _ := p.Get("a")
	assert.Equal(t, 3, v)
	assert.Equal(t, []int{3}, p.Admit([]string{"c"}, []int{4}, t0.Add(3*time.Second)), "full: the oldest is handed back")
	assert.Equal(t, []int{2}, p.Expired(t0.Add(61*time.Second)))
	assert.Equal(t, []int{4}, p.Select(func(v int) bool { return v == 4 }))
	p.Remove("c")
	assert.Equal(t, 0, p.Len())

	r := NewRecent[string](2)
	r.Put("a", "1")
	r.Put("b", "2")
	r.Put("c", "3")
	_, ok := r.Get("a")
	assert.False(t, ok)
	v2, _ := r.Get("c")
	assert.Equal(t, "3", v2)
	r.Put("b", "2b") // an update keeps its place
	r.Put("d", "4")  // so b, the oldest, goes
	_, ok = r.Get("b")
	assert.False(t, ok)
	for id, want := range map[string]string{"c": "3", "d": "4"} {
		got, ok := r.Get(id)
		assert.True(t, ok, id)
		assert.Equal(t, want, got)
	}
	assert.Len(t, r.m, 2, "bounded")
}

// Hold keeps an item past the bound and evicts nothing; the next Admit evicts down to it.
func TestHoldPassesTheBound(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewStore[int](time.Minute, 1)
	assert.Empty(t, p.Admit([]string{"a"}, []int{1}, t0))
	p.Hold("b", 2, t0.Add(time.Second))
	assert.Equal(t, 2, p.Len())
	p.Hold("b", 3, t0.Add(2*time.Second))
	v, _ := p.Get("b")
	assert.Equal(t, 3, v, "an update keeps its place")
	assert.Equal(t, []int{1, 3}, p.Admit([]string{"c"}, []int{4}, t0.Add(3*time.Second)), "it makes room for itself")
	assert.Empty(t, p.Expired(t0.Add(62*time.Second)))
	assert.Equal(t, []int{4}, p.Expired(t0.Add(63*time.Second)))
}

// A store past its bound (what a restart could not hand on was held again) that a
// request names in full has room for none of the request's new ids, and evicts nothing
// it names.
func TestEvictionsPastTheBound(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewStore[int](time.Minute, 1)
	p.Hold("a", 1, t0)
	p.Hold("b", 2, t0)
	items, refused := p.Evictions(nil, []string{"a", "b"})
	assert.Empty(t, items)
	assert.Empty(t, refused, "nothing new")
	items, refused = p.Evictions(nil, []string{"a", "b", "c"})
	assert.Empty(t, items)
	assert.Equal(t, []int{2}, refused, "c goes on at once")
	items, refused = p.Evictions(nil, []string{"a", "c"})
	assert.Equal(t, []int{2}, items, "b is not named: out")
	assert.Equal(t, []int{1}, refused, "a alone fills the store")
}

// Evictions pushes out the oldest (ties by id) of what is not named, to make room for
// add's new ids once remove has gone; when that is not enough, the first new ids of add
// are refused. Admit does the same at once.
func TestEvictionsAndAdmit(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewStore[int](time.Minute, 3)
	assert.Empty(t, p.Admit([]string{"a", "b", "c"}, []int{1, 2, 3}, t0))
	assert.True(t, p.Fits(0))
	assert.False(t, p.Fits(1))

	items, refused := p.Evictions([]string{"a"}, []string{"b", "d"})
	assert.Empty(t, items, "a leaves: room for d")
	assert.Empty(t, refused)
	items, refused = p.Evictions(nil, []string{"d", "b", "e"})
	assert.Equal(t, []int{1, 3}, items, "a and c, by id at the same age; b is named")
	assert.Empty(t, refused)
	items, refused = p.Evictions(nil, []string{"d", "e", "f", "g", "b"})
	assert.Equal(t, []int{1, 3}, items)
	assert.Equal(t, []int{0, 1}, refused, "b held; of d, e, f, g only two fit: d and e are refused")
	assert.Equal(t, 3, p.Len(), "Evictions changes nothing")

	kept, moved := Refused([]string{"d", "e", "f", "g"}, []string{"x"}, []int{0, 2})
	assert.Equal(t, []string{"e", "g"}, kept)
	assert.Equal(t, []string{"x", "d", "f"}, moved)

	assert.Equal(t, []int{1, 2, 3, 10}, p.Admit([]string{"d", "e", "f", "g"}, []int{10, 11, 12, 13}, t0.Add(time.Second)),
		"all three held ones out, and d")
	assert.Equal(t, 3, p.Len())
	for id, want := range map[string]int{"e": 11, "f": 12, "g": 13} {
		got, ok := p.Get(id)
		assert.True(t, ok, id)
		assert.Equal(t, want, got, id)
	}
}
