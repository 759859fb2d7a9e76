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
// time out. It is bounded: when full, the oldest item is handed back for emission (Put,
// or Evictions ahead of a Hold), so
// memory never grows with clients that never send the update.
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

// Put stores v under id (keeping the first arrival time of an id already present) and
// returns the items evicted because the store is full (oldest first).
func (p *Store[T]) Put(id string, v T, now time.Time) []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.items[id]; ok {
		e.v = v
		return nil
	}
	var evicted []T
	for len(p.items) >= p.max && len(p.items) > 0 {
		oldestID, oldest := "", time.Time{}
		for k, e := range p.items {
			if oldestID == "" || e.added.Before(oldest) {
				oldestID, oldest = k, e.added
			}
		}
		evicted = append(evicted, p.items[oldestID].v)
		delete(p.items, oldestID)
	}
	p.items[id] = &entry[T]{v: v, added: now}
	return evicted
}

// Evictions returns what a full store would push out to make room for the ids of add
// once the ids of remove are gone: the oldest items, none of them in remove or add
// (ties by id, so the choice does not depend on map order). Nothing changes: the caller
// removes them when it commits, and holds add (Hold). short is how many of add's new
// ids still find no room when every other item is out: the caller hands that many on
// instead of holding them.
func (p *Store[T]) Evictions(remove, add []string) (ids []string, items []T, short int) {
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
	for _, id := range add {
		if _, ok := p.items[id]; !ok && !named[id] {
			size++
		}
		named[id] = true
	}
	over := size - p.max
	if over <= 0 {
		return nil, nil, 0
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
	short = max(over-len(ids), 0)
	ids = ids[:min(over, len(ids))]
	for _, id := range ids {
		items = append(items, p.items[id].v)
	}
	return ids, items, short
}

// Hold stores v under id as Put does, but evicts nothing: for items the caller made room
// for (Evictions), and for items that went back to the store after they could not be
// handed on, which must not be lost (they held room before).
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
