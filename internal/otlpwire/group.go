package otlpwire

import (
	"bytes"
	"hash/maphash"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Messages joined from several batches (a trace held over many requests) repeat their
// resource and scope once per batch, and a decoder builds each repeat again: for a trace
// that came a few spans a request, most of what its decoding allocates is those copies.
// AppendGrouped writes the same spans under each distinct resource and scope once.

// Grouping is AppendGrouped's reusable state.
type Grouping struct {
	resRep, scopeRep []int32  // per container: the first container equal to it
	resHash          []uint64 // per resource: the hash of its fields besides its scopes
	scopeHash        []uint64
	reps             []int32 // distinct resources (or scopes), in the order they first come
	scopeID          []int32 // per scope: its place in the output order if it is the first of its kind, else -1
	order            []int32 // distinct scopes in output order: by resource, then as they come
	start            []int32 // per output scope: where its spans start in spans
	fill             []int32 // counting sorts' positions
	rank             []int32 // per resource first of its kind: its place in the output order
	spans            []int32 // span indexes, grouped by output scope
}

var groupSeed = maphash.MakeSeed()

// AppendGrouped appends to dst a TracesData holding every indexed span once: one
// ResourceSpans per distinct resource (the resource, schema URL and any other field
// besides its scopes, compared as bytes), in the order they first come, and under each
// one ScopeSpans per distinct scope of it. Spans keep their order within a scope. It
// decodes as the indexed message does, but for the order of spans of different
// resources or scopes and for resources and scopes without spans, which it leaves out.
func (x *Index) AppendGrouped(dst []byte, g *Grouping) []byte {
	g.resRep, g.resHash, g.reps = g.resRep[:0], g.resHash[:0], g.reps[:0]
	for r := range x.res {
		h := x.hashOther(x.res[r])
		g.resHash = append(g.resHash, h)
		g.resRep = append(g.resRep, x.repOf(g.reps, g.resHash, x.res, int32(r), h, nil))
		if g.resRep[r] == int32(r) {
			g.reps = append(g.reps, int32(r))
		}
	}
	resReps := len(g.reps)
	g.scopeRep, g.scopeHash = g.scopeRep[:0], g.scopeHash[:0]
	for s := range x.scopes {
		h := x.hashOther(x.scopes[s])
		g.scopeHash = append(g.scopeHash, h)
		g.scopeRep = append(g.scopeRep, x.repOf(g.reps[resReps:], g.scopeHash, x.scopes, int32(s), h, g.resRep))
		if g.scopeRep[s] == int32(s) {
			g.reps = append(g.reps, int32(s))
		}
	}
	// output order: resources as they first come, then each one's scopes as they come
	g.scopeID = g.scopeID[:0]
	for range x.scopes {
		g.scopeID = append(g.scopeID, -1)
	}
	g.rank = slices.Grow(g.rank[:0], len(x.res))[:len(x.res)]
	for i, r := range g.reps[:resReps] {
		g.rank[r] = int32(i)
	}
	g.fill = append(g.fill[:0], make([]int32, resReps+1)...)
	scopeReps := g.reps[resReps:]
	for _, s := range scopeReps {
		g.fill[g.rank[g.resRep[x.scopes[s].parent]]+1]++
	}
	for i := 1; i < len(g.fill); i++ {
		g.fill[i] += g.fill[i-1]
	}
	g.order = slices.Grow(g.order[:0], len(scopeReps))[:len(scopeReps)]
	for _, s := range scopeReps {
		k := g.rank[g.resRep[x.scopes[s].parent]]
		g.scopeID[s] = g.fill[k]
		g.order[g.fill[k]] = s
		g.fill[k]++
	}
	// spans bucketed by their output scope (a counting sort keeps their order)
	g.start = g.start[:0]
	for range len(g.order) + 1 {
		g.start = append(g.start, 0)
	}
	for _, s := range x.scope {
		g.start[g.scopeID[g.scopeRep[s]]+1]++
	}
	for i := 1; i < len(g.start); i++ {
		g.start[i] += g.start[i-1]
	}
	g.spans = slices.Grow(g.spans[:0], len(x.spans))[:len(x.spans)]
	g.fill = append(g.fill[:0], g.start[:len(g.order)]...)
	for i, s := range x.scope {
		id := g.scopeID[g.scopeRep[s]]
		g.spans[g.fill[id]] = int32(i)
		g.fill[id]++
	}
	id := 0
	for _, r := range g.reps[:resReps] {
		from, any := id, false
		body := x.otherLen(x.res[r])
		for ; id < len(g.order) && g.resRep[x.scopes[g.order[id]].parent] == r; id++ {
			if g.start[id] < g.start[id+1] {
				l := x.groupedScopeLen(g, id)
				body += 1 + protowire.SizeVarint(uint64(l)) + l
				any = true
			}
		}
		if !any {
			continue
		}
		dst = AppendHeader(dst, TracesResourceSpans, body)
		dst = x.appendOther(dst, x.res[r])
		for k := from; k < id; k++ {
			if g.start[k] == g.start[k+1] {
				continue
			}
			dst = AppendHeader(dst, ResourceSpansScopeSpans, x.groupedScopeLen(g, k))
			dst = x.appendOther(dst, x.scopes[g.order[k]])
			for _, sp := range g.spans[g.start[k]:g.start[k+1]] {
				s := x.spans[sp]
				dst = append(dst, x.buf[s.from:s.to]...)
			}
		}
	}
	return dst
}

// groupedScopeLen is the body length of output scope k of g.
func (x *Index) groupedScopeLen(g *Grouping, k int) int {
	l := x.otherLen(x.scopes[g.order[k]])
	for _, sp := range g.spans[g.start[k]:g.start[k+1]] {
		l += x.spans[sp].len()
	}
	return l
}

// repOf is the first of reps equal to container c of cs (hash h; with parentRep, only
// those whose parents are the same), or c itself.
func (x *Index) repOf(reps []int32, hashes []uint64, cs []container, c int32, h uint64, parentRep []int32) int32 {
	for _, o := range reps {
		if hashes[o] != h {
			continue
		}
		if parentRep != nil && parentRep[cs[o].parent] != parentRep[cs[c].parent] {
			continue
		}
		if x.sameOther(cs[o], cs[c]) {
			return o
		}
	}
	return c
}

func (x *Index) hashOther(c container) uint64 {
	var h maphash.Hash
	h.SetSeed(groupSeed)
	for _, o := range x.other[c.otherFrom:c.otherTo] {
		_, _ = h.Write(x.buf[o.from:o.to])
	}
	return h.Sum64()
}

// sameOther reports whether a's and b's fields besides their children are the same bytes.
func (x *Index) sameOther(a, b container) bool {
	if x.otherLen(a) != x.otherLen(b) {
		return false
	}
	oa, ob := x.other[a.otherFrom:a.otherTo], x.other[b.otherFrom:b.otherTo]
	if len(oa) == len(ob) {
		for i := range oa {
			if !bytes.Equal(x.buf[oa[i].from:oa[i].to], x.buf[ob[i].from:ob[i].to]) {
				return false
			}
		}
		return true
	}
	return false // the same bytes split into other fields: a different message
}
