package vendorhttp

// Bounded is a map that holds at most max keys; past that, the key added first leaves
// first. It is what both exporters remember per span or per trace between batches. Not
// safe for concurrent use: its owner locks.
type Bounded[K comparable, V any] struct {
	max  int
	m    map[K]V
	ring []K // keys in the order added, for eviction
	next int
}

// NewBounded holds at most max keys (max ≥ 1).
func NewBounded[K comparable, V any](max int) *Bounded[K, V] {
	return &Bounded[K, V]{max: max, m: map[K]V{}}
}

// Get returns the value of k.
func (b *Bounded[K, V]) Get(k K) (V, bool) {
	v, ok := b.m[k]
	return v, ok
}

// Put sets the value of k; a new key may evict the oldest.
func (b *Bounded[K, V]) Put(k K, v V) {
	if _, ok := b.m[k]; ok {
		b.m[k] = v
		return
	}
	b.m[k] = v
	if len(b.ring) < b.max {
		b.ring = append(b.ring, k)
		return
	}
	delete(b.m, b.ring[b.next])
	b.ring[b.next] = k
	b.next = (b.next + 1) % b.max
}

// Len is the number of keys held.
func (b *Bounded[K, V]) Len() int { return len(b.m) }
