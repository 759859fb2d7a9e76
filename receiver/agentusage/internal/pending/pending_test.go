package pending

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// item is a stored value with its key, so that an update can change the value.
type item struct {
	id string
	v  int
}

func itemKey(it item) string { return it.id }

func TestPendingAndRecent(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewStore[item](time.Minute, 2)
	assert.Empty(t, p.Admit(itemKey, []item{{"a", 1}}, t0))
	assert.Empty(t, p.Admit(itemKey, []item{{"b", 2}}, t0.Add(time.Second)))
	assert.Empty(t, p.Admit(itemKey, []item{{"a", 3}}, t0.Add(2*time.Second)), "an update keeps its place")
	v, _ := p.Get("a")
	assert.Equal(t, 3, v.v)
	assert.Equal(t, []item{{"a", 3}}, p.Admit(itemKey, []item{{"c", 4}}, t0.Add(3*time.Second)), "full: the oldest is handed back")
	assert.Equal(t, []item{{"b", 2}}, p.Expired(t0.Add(61*time.Second)))
	assert.Equal(t, []item{{"c", 4}}, p.Select(func(it item) bool { return it.v == 4 }))
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
	p := NewStore[item](time.Minute, 1)
	assert.Empty(t, p.Admit(itemKey, []item{{"a", 1}}, t0))
	p.Hold("b", item{"b", 2}, t0.Add(time.Second))
	assert.Equal(t, 2, p.Len())
	p.Hold("b", item{"b", 3}, t0.Add(2*time.Second))
	v, _ := p.Get("b")
	assert.Equal(t, 3, v.v, "an update keeps its place")
	assert.Equal(t, []item{{"a", 1}, {"b", 3}}, p.Admit(itemKey, []item{{"c", 4}}, t0.Add(3*time.Second)), "it makes room for itself")
	assert.Empty(t, p.Expired(t0.Add(62*time.Second)))
	assert.Equal(t, []item{{"c", 4}}, p.Expired(t0.Add(63*time.Second)))
}

func self(s string) string { return s }

// A store past its bound (what a restart could not hand on was held again) that a
// request names in full has room for none of the request's new items, and pushes out
// nothing it names.
func TestMakeRoomPastTheBound(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewStore[string](time.Minute, 1)
	p.Hold("a", "a", t0)
	p.Hold("b", "b", t0)
	kept, moved := p.MakeRoom(self, nil, []string{"a", "b"}, nil)
	assert.Equal(t, []string{"a", "b"}, kept, "nothing new")
	assert.Empty(t, moved)
	kept, moved = p.MakeRoom(self, nil, []string{"a", "b", "c"}, nil)
	assert.Equal(t, []string{"a", "b"}, kept)
	assert.Equal(t, []string{"c"}, moved, "c goes on at once")
	kept, moved = p.MakeRoom(self, nil, []string{"a", "c"}, nil)
	assert.Equal(t, []string{"a"}, kept, "a alone fills the store")
	assert.Equal(t, []string{"b", "c"}, moved, "b is not named: out, and c")
}

// MakeRoom pushes out the oldest (ties by key) of what is not named, to make room for
// want's new items once gone has left; when that is not enough, the first new items of
// want go on too. Admit does the same at once.
func TestMakeRoomAndAdmit(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewStore[string](time.Minute, 3)
	assert.Empty(t, p.Admit(self, []string{"a", "b", "c"}, t0))
	assert.True(t, p.fits(0))
	assert.False(t, p.fits(1))

	kept, moved := p.MakeRoom(self, []string{"a"}, []string{"b", "d"}, nil)
	assert.Equal(t, []string{"b", "d"}, kept)
	assert.Empty(t, moved, "a leaves: room for d")
	kept, moved = p.MakeRoom(self, nil, []string{"d", "b", "e"}, []string{"x"})
	assert.Equal(t, []string{"d", "b", "e"}, kept)
	assert.Equal(t, []string{"x", "a", "c"}, moved, "after out's own: a and c, by key at the same age; b is named")
	kept, moved = p.MakeRoom(self, nil, []string{"d", "e", "f", "g", "b"}, nil)
	assert.Equal(t, []string{"f", "g", "b"}, kept)
	assert.Equal(t, []string{"a", "c", "d", "e"}, moved, "b held; of d, e, f, g only two fit: d and e go on")
	assert.Equal(t, 3, p.Len(), "MakeRoom changes nothing")

	kept, moved = moveRefused([]string{"d", "e", "f", "g"}, []string{"x"}, []int{0, 2})
	assert.Equal(t, []string{"e", "g"}, kept)
	assert.Equal(t, []string{"x", "d", "f"}, moved)

	assert.Equal(t, []string{"a", "b", "c", "d"}, p.Admit(self, []string{"d", "e", "f", "g"}, t0.Add(time.Second)),
		"all three held ones out, and d")
	assert.Equal(t, 3, p.Len())
	for _, id := range []string{"e", "f", "g"} {
		got, ok := p.Get(id)
		assert.True(t, ok, id)
		assert.Equal(t, id, got, id)
	}
}
