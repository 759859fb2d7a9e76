package subagentmerge

// link is an element's place in one chain. Elements take part in several chains at once
// (a buffered trace is ordered by its last span, by its hot spans' age and by when it
// settles), each through a link of its own.
type link[T any] struct{ prev, next *T }

// chain is an intrusive doubly linked list: the sweeper pops due elements from the head
// of an ordered chain instead of keeping a timer per trace. of returns an element's link
// in this chain.
type chain[T any] struct {
	head, tail *T
	of         func(*T) *link[T]
}

// has reports whether e is in c.
func (c *chain[T]) has(e *T) bool { return c.of(e).prev != nil || c.head == e }

// next is the element after e, nil at the tail.
func (c *chain[T]) next(e *T) *T { return c.of(e).next }

func (c *chain[T]) pushBack(e *T) { c.insertAfter(e, c.tail) }

// insertAfter puts e after at; at nil puts it at the head.
func (c *chain[T]) insertAfter(e, at *T) {
	n := c.of(e)
	n.prev = at
	if at == nil {
		n.next, c.head = c.head, e
	} else {
		a := c.of(at)
		n.next, a.next = a.next, e
	}
	if n.next != nil {
		c.of(n.next).prev = e
	} else {
		c.tail = e
	}
}

// insertOrdered puts e after the last element whose key is not above e's. Keys mostly
// grow, so the walk from the tail is short.
func (c *chain[T]) insertOrdered(e *T, key func(*T) int64) {
	k := key(e)
	at := c.tail
	for at != nil && key(at) > k {
		at = c.of(at).prev
	}
	c.insertAfter(e, at)
}

// remove takes e out of c; an element not in c is left alone.
func (c *chain[T]) remove(e *T) {
	if !c.has(e) {
		return
	}
	n := c.of(e)
	if n.prev != nil {
		c.of(n.prev).next = n.next
	} else {
		c.head = n.next
	}
	if n.next != nil {
		c.of(n.next).prev = n.prev
	} else {
		c.tail = n.prev
	}
	n.prev, n.next = nil, nil
}

// moveToBack makes e the tail, adding it if it was not in c.
func (c *chain[T]) moveToBack(e *T) {
	if c.tail == e {
		return
	}
	c.remove(e)
	c.pushBack(e)
}
