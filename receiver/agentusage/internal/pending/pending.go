// Package pending holds what the stateful faces keep between requests: half-finished
// runs and observations waiting for their update, and facts about recent ones.
package pending

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Store holds half-finished items (a LangSmith run POSTed without end_time, a
// Langfuse observation created without endTime) until their update arrives or they
// time out. It is bounded: when full, the oldest item is handed back for emission
// (MakeRoom ahead of a Hold, or Admit), so memory never grows with clients that never
// send the update.
//
// Items are removed only by the caller (Remove after a successful hand-off to the
// pipeline, or Expired/Drain which remove and return), so a refused update leaves the
// original data in place for the client's retry.
type Store[T any] struct {
	mu      sync.Mutex
	items   map[string]*entry[T]
	timeout time.Duration
	max     int
}

type entry[T any] struct {
	v     T
	added time.Time
}

// NewStore returns a store whose items expire after timeout, holding at most max.
func NewStore[T any](timeout time.Duration, max int) *Store[T] {
	return &Store[T]{items: map[string]*entry[T]{}, timeout: timeout, max: max}
}

// Get returns the item stored under id.
func (p *Store[T]) Get(id string) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.items[id]
	if !ok {
		var zero T
		return zero, false
	}
	return e.v, true
}

// fits reports whether n more items fit without pushing any out: most requests hold
// few runs, and skip evictions.
func (p *Store[T]) fits(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.items)+n <= p.max
}

// MakeRoom is what a request does to hold want (items by key) once gone has left the
// store, so that it never holds more than its bound. It appends to out what the store
// pushes out for them: the oldest items, none of them in gone or want (ties by key, so
// the choice does not depend on map order). When want has more new items than there is
// room for with every other item out, the first of them are moved from want to out too:
// they go on now, as they are. A store already past its bound (what could not be handed
// on was held again) that want names in full keeps none of want's new items. Nothing
// changes here: once the request went on, the caller removes gone and out and holds
// kept (Hold).
func (p *Store[T]) MakeRoom(key func(T) string, gone, want, out []T) (kept, moved []T) {
	if len(want) == 0 || p.fits(len(want)) {
		return want, out
	}
	_, pushed, refused := p.evictions(keysOf(key, gone), keysOf(key, want))
	return moveRefused(want, append(out, pushed...), refused)
}

func keysOf[T any](key func(T) string, items []T) []string {
	ks := make([]string, len(items))
	for i, it := range items {
		ks[i] = key(it)
	}
	return ks
}

// Admit holds vs (by key) now, pushing out what MakeRoom would, and returns what it
// pushed out and the new items that found no room (at start, before anything else uses
// the store: its two steps are not one).
func (p *Store[T]) Admit(key func(T) string, vs []T, now time.Time) []T {
	out, pushed, refused := p.evictions(nil, keysOf(key, vs))
	p.Remove(out...)
	kept, moved := moveRefused(vs, pushed, refused)
	for _, v := range kept {
		p.Hold(key(v), v, now)
	}
	return moved
}

// evictions returns what the store pushes out to make room for the ids of add once the
// ids of remove are gone (MakeRoom), with their ids, and the indexes in add of the new
// ids that still find no room.
func (p *Store[T]) evictions(remove, add []string) (ids []string, items []T, refused []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	named := make(map[string]bool, len(remove)+len(add))
	size := len(p.items)
	for _, id := range remove {
		if _, ok := p.items[id]; ok && !named[id] {
			size--
		}
		named[id] = true
	}
	var fresh []int // add's new ids, by index
	for i, id := range add {
		if _, ok := p.items[id]; !ok && !named[id] {
			size++
			fresh = append(fresh, i)
		}
		named[id] = true
	}
	over := size - p.max
	if over <= 0 {
		return nil, nil, nil
	}
	for id := range p.items {
		if !named[id] {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := p.items[a].added.Compare(p.items[b].added); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	// the items of add already held count against the bound too, so more of them than
	// max leaves room for none of the new
	refused = fresh[:min(max(over-len(ids), 0), len(fresh))]
	ids = ids[:min(over, len(ids))]
	for _, id := range ids {
		items = append(items, p.items[id].v)
	}
	return ids, items, refused
}

// moveRefused moves the items of want at the indexes refused (ascending, from
// evictions) to out, keeping the others in order.
func moveRefused[T any](want, out []T, refused []int) (kept, moved []T) {
	if len(refused) == 0 {
		return want, out
	}
	kept = want[:0:0]
	r := 0
	for i, v := range want {
		if r < len(refused) && refused[r] == i {
			out = append(out, v)
			r++
			continue
		}
		kept = append(kept, v)
	}
	return kept, out
}

// Hold stores v under id (an item already there keeps its arrival time), and evicts
// nothing: for items the caller made room for (MakeRoom), and for items that went back
// to the store after they could not be handed on, which must not be lost (they held
// room before).
func (p *Store[T]) Hold(id string, v T, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.items[id]; ok {
		e.v = v
		return
	}
	p.items[id] = &entry[T]{v: v, added: now}
}

// Select returns (without removing) the items for which keep is true.
func (p *Store[T]) Select(keep func(T) bool) []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []T
	for _, e := range p.items {
		if keep(e.v) {
			out = append(out, e.v)
		}
	}
	return out
}

// Touch restarts the timeout of id, if held: the store then expires items that have
// been quiet for the timeout rather than old ones.
func (p *Store[T]) Touch(id string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.items[id]; ok {
		e.added = now
	}
}

// Remove deletes ids.
func (p *Store[T]) Remove(ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		delete(p.items, id)
	}
}

// Expired removes and returns the items older than the timeout.
func (p *Store[T]) Expired(now time.Time) []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []T
	for k, e := range p.items {
		if now.Sub(e.added) >= p.timeout {
			out = append(out, e.v)
			delete(p.items, k)
		}
	}
	return out
}

// Drain removes and returns everything (shutdown).
func (p *Store[T]) Drain() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]T, 0, len(p.items))
	for k, e := range p.items {
		out = append(out, e.v)
		delete(p.items, k)
	}
	return out
}

// Len is the number of items held.
func (p *Store[T]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.items)
}

// Recent is a bounded FIFO cache of facts about items already seen (a run's trace id,
// type and caller), so a later child or update can be placed without its parent.
type Recent[T any] struct {
	mu   sync.Mutex
	m    map[string]T
	ring []string // insertion order; grows to size, then the oldest is overwritten
	next int      // the oldest entry once the ring is full
	size int
}

// NewRecent returns a cache of at most size entries. It grows as entries come, so the
// cache of an SDK face nobody sends to costs nothing.
func NewRecent[T any](size int) *Recent[T] {
	return &Recent[T]{m: map[string]T{}, size: max(size, 1)}
}

// Get returns the entry for id.
func (r *Recent[T]) Get(id string) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[id]
	return v, ok
}

// Put stores v under id, evicting the oldest entry when full.
func (r *Recent[T]) Put(id string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[id]; ok {
		r.m[id] = v
		return
	}
	if len(r.ring) < r.size {
		r.ring = append(r.ring, id)
		r.m[id] = v
		return
	}
	delete(r.m, r.ring[r.next])
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	r.m[id] = v
}
