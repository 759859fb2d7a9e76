package pending

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPendingAndRecent(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewStore[int](time.Minute, 2)
	assert.Empty(t, p.Put("a", 1, t0))
	assert.Empty(t, p.Put("b", 2, t0.Add(time.Second)))
	assert.Empty(t, p.Put("a", 3, t0.Add(2*time.Second)), "an update keeps its place")
	v, _ := p.Get("a")
	assert.Equal(t, 3, v)
	assert.Equal(t, []int{3}, p.Put("c", 4, t0.Add(3*time.Second)), "full: the oldest is handed back")
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

// Hold keeps an item past the bound and evicts nothing; the next Put evicts down to it.
func TestHoldPassesTheBound(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewStore[int](time.Minute, 1)
	assert.Empty(t, p.Put("a", 1, t0))
	p.Hold("b", 2, t0.Add(time.Second))
	assert.Equal(t, 2, p.Len())
	p.Hold("b", 3, t0.Add(2*time.Second))
	v, _ := p.Get("b")
	assert.Equal(t, 3, v, "an update keeps its place")
	assert.Equal(t, []int{1, 3}, p.Put("c", 4, t0.Add(3*time.Second)), "a Put makes room for itself")
	assert.Empty(t, p.Expired(t0.Add(62*time.Second)))
	assert.Equal(t, []int{4}, p.Expired(t0.Add(63*time.Second)))
}
