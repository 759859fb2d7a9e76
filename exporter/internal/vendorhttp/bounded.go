package vendorhttp

// Bounded is a map that holds at most max keys; past that, the key put least recently
// leaves first (a put of a key held refreshes it). It is what both exporters remember per
// span or per trace between batches: a trace still being written to, or a span
// re-emitted again, stays. Not safe for concurrent use: its owner locks.
type Bounded[K comparable, V any] struct {
	max int
	m   map[K]*boundedEntry[K, V]
	// the entries from the one put least recently (oldest) to the newest
	oldest, newest *boundedEntry[K, V]
}

type boundedEntry[K comparable, V any] struct {
	k          K
	v          V
	prev, next *boundedEntry[K, V] // prev is older, next newer
}

// NewBounded holds at most max keys (max ≥ 1).
func NewBounded[K comparable, V any](max int) *Bounded[K, V] {
	return &Bounded[K, V]{max: max, m: map[K]*boundedEntry[K, V]{}}
}

// Get returns the value of k.
func (b *Bounded[K, V]) Get(k K) (V, bool) {
	if e, ok := b.m[k]; ok {
		return e.v, true
	}
	var zero V
	return zero, false
}

// Put sets the value of k and makes it the newest; a new key may evict the oldest,
// which it returns (evicted reports whether it did).
func (b *Bounded[K, V]) Put(k K, v V) (old K, evicted bool) {
	if e, ok := b.m[k]; ok {
		e.v = v
		b.unlink(e)
		b.append(e)
		return old, false
	}
	if len(b.m) >= b.max {
		o := b.oldest
		b.unlink(o)
		delete(b.m, o.k)
		old, evicted = o.k, true
	}
	e := &boundedEntry[K, V]{k: k, v: v}
	b.m[k] = e
	b.append(e)
	return old, evicted
}

// Len is the number of keys held.
func (b *Bounded[K, V]) Len() int { return len(b.m) }

// Cap is the most keys b holds.
func (b *Bounded[K, V]) Cap() int { return b.max }

// Each calls f with every key and value, from the one put least recently to the newest.
func (b *Bounded[K, V]) Each(f func(k K, v V)) {
	for e := b.oldest; e != nil; e = e.next {
		f(e.k, e.v)
	}
}

func (b *Bounded[K, V]) unlink(e *boundedEntry[K, V]) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		b.oldest = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		b.newest = e.prev
	}
	e.prev, e.next = nil, nil
}

func (b *Bounded[K, V]) append(e *boundedEntry[K, V]) {
	e.prev = b.newest
	if b.newest != nil {
		b.newest.next = e
	} else {
		b.oldest = e
	}
	b.newest = e
}
