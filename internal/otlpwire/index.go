package otlpwire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Index picks spans out of an encoded TracesData without decoding it. A processor that
// may not change the batch it is given (its data is shared with other consumers) and
// must keep some of its spans encoded would otherwise copy them into a batch of their
// own only to encode that: with an Index the batch is encoded once, and each selection
// of its spans is assembled from the encoding's bytes, under its resource and scope.

// byteRange is a byte range of the encoding.
type byteRange struct{ from, to int32 }

func (s byteRange) len() int { return int(s.to - s.from) }

// Index is an encoded TracesData and where each of its spans is. Span i is the i-th in
// the message's order (resource, then scope, then span), which is pdata's iteration
// order of the decoded message.
type Index struct {
	buf []byte
	// other holds the fields of every resource and scope message besides their spans
	// (resource, scope, schema_url, any unknown field), each as a byte range of buf
	// with its tag; a resource's or scope's are other[otherFrom:otherTo].
	other  []byteRange
	res    []container // per ResourceSpans
	scopes []container // per ScopeSpans, in order
	scope  []int32     // per span: its index in scopes
	spans  []byteRange // per span: its field in ScopeSpans.spans, tag and length included
}

type container struct {
	otherFrom, otherTo int32
	parent             int32 // a scope's resource; unused for resources
}

// Reset indexes buf, an encoded TracesData (or ExportTraceServiceRequest: the same
// fields). buf must stay unchanged while x is used.
func (x *Index) Reset(buf []byte) error {
	if len(buf) > 1<<31-1 {
		return errors.New("otlpwire: message over 2 GiB")
	}
	x.buf = buf
	x.other, x.res, x.scopes, x.scope, x.spans = x.other[:0], x.res[:0], x.scopes[:0], x.scope[:0], x.spans[:0]
	return fields(buf, 0, func(num protowire.Number, typ protowire.Type, at, body, end int) error {
		if num != TracesResourceSpans || typ != protowire.BytesType {
			return nil // TracesData has no other field; an unknown one is not kept
		}
		return x.resource(body, end)
	})
}

func (x *Index) resource(from, to int) error {
	r := int32(len(x.res))
	x.res = append(x.res, container{})
	start := int32(len(x.other))
	var scopes []int // scope_spans bodies, indexed after the resource's own fields
	err := fields(x.buf[:to], from, func(num protowire.Number, typ protowire.Type, at, body, end int) error {
		if num == ResourceSpansScopeSpans && typ == protowire.BytesType {
			scopes = append(scopes, body, end)
			return nil
		}
		x.other = append(x.other, byteRange{int32(at), int32(end)})
		return nil
	})
	if err != nil {
		return err
	}
	x.res[r].otherFrom, x.res[r].otherTo = start, int32(len(x.other))
	for i := 0; i < len(scopes); i += 2 {
		if err := x.scopeSpans(r, scopes[i], scopes[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func (x *Index) scopeSpans(r int32, from, to int) error {
	si := int32(len(x.scopes))
	start := int32(len(x.other))
	err := fields(x.buf[:to], from, func(num protowire.Number, typ protowire.Type, at, body, end int) error {
		if num == ScopeSpansSpans && typ == protowire.BytesType {
			x.spans = append(x.spans, byteRange{int32(at), int32(end)})
			x.scope = append(x.scope, si)
			return nil
		}
		x.other = append(x.other, byteRange{int32(at), int32(end)})
		return nil
	})
	x.scopes = append(x.scopes, container{otherFrom: start, otherTo: int32(len(x.other)), parent: r})
	return err
}

// fields calls f for each field of the message in b[from:]: its number and type, where
// its tag starts, where its value (a length-delimited field's body) starts, and its end.
func fields(b []byte, from int, f func(num protowire.Number, typ protowire.Type, at, body, end int) error) error {
	for i := from; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return fmt.Errorf("%w: field tag at byte %d: %w", ErrMalformed, i, protowire.ParseError(n))
		}
		body := i + n
		if typ == protowire.BytesType {
			l, m := protowire.ConsumeVarint(b[body:])
			if m < 0 {
				return fmt.Errorf("%w: field %d length at byte %d: %w", ErrMalformed, num, body, protowire.ParseError(m))
			}
			body += m
			if l > uint64(len(b)-body) {
				return fmt.Errorf("%w: field %d at byte %d runs past its message", ErrMalformed, num, i)
			}
			if err := f(num, typ, i, body, body+int(l)); err != nil {
				return err
			}
			i = body + int(l)
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[body:])
		if m < 0 {
			return fmt.Errorf("%w: field %d at byte %d: %w", ErrMalformed, num, i, protowire.ParseError(m))
		}
		if err := f(num, typ, i, body, body+m); err != nil {
			return err
		}
		i = body + m
	}
	return nil
}

// Len is the number of spans indexed.
func (x *Index) Len() int { return len(x.spans) }

// SpanLen is the length of span i's field, tag and length included: what it adds to an
// Append besides its resource's and scope's headers.
func (x *Index) SpanLen(i int) int { return x.spans[i].len() }

// Append appends to dst a TracesData holding the spans at idx (indexes in increasing
// order), each under its resource and scope as in the indexed message: one
// ResourceSpans per run of spans from the same resource, one ScopeSpans per run from
// the same scope. Concatenated with other TracesData messages it decodes as their
// union.
func (x *Index) Append(dst []byte, idx []int32) []byte {
	for i := 0; i < len(idx); {
		r := x.scopes[x.scope[idx[i]]].parent
		j := i
		for j < len(idx) && x.scopes[x.scope[idx[j]]].parent == r {
			j++
		}
		body := x.otherLen(x.res[r])
		for k := i; k < j; {
			l, next := x.scopeRun(idx, k, j)
			body += 1 + protowire.SizeVarint(uint64(l)) + l
			k = next
		}
		dst = AppendHeader(dst, TracesResourceSpans, body)
		dst = x.appendOther(dst, x.res[r])
		for k := i; k < j; {
			l, next := x.scopeRun(idx, k, j)
			dst = AppendHeader(dst, ResourceSpansScopeSpans, l)
			dst = x.appendOther(dst, x.scopes[x.scope[idx[k]]])
			for ; k < next; k++ {
				s := x.spans[idx[k]]
				dst = append(dst, x.buf[s.from:s.to]...)
			}
		}
		i = j
	}
	return dst
}

// Size is the length of what Append appends for idx.
func (x *Index) Size(idx []int32) int {
	n := 0
	for i := 0; i < len(idx); {
		r := x.scopes[x.scope[idx[i]]].parent
		body := x.otherLen(x.res[r])
		for i < len(idx) && x.scopes[x.scope[idx[i]]].parent == r {
			l, next := x.scopeRun(idx, i, len(idx))
			body += 1 + protowire.SizeVarint(uint64(l)) + l
			i = next
		}
		n += 1 + protowire.SizeVarint(uint64(body)) + body
	}
	return n
}

// scopeRun is the length of the ScopeSpans body for the run of idx[k:j] in the scope of
// idx[k], and where the run ends.
func (x *Index) scopeRun(idx []int32, k, j int) (int, int) {
	s := x.scope[idx[k]]
	l := x.otherLen(x.scopes[s])
	for ; k < j && x.scope[idx[k]] == s; k++ {
		l += x.spans[idx[k]].len()
	}
	return l, k
}

func (x *Index) otherLen(c container) int {
	n := 0
	for _, o := range x.other[c.otherFrom:c.otherTo] {
		n += o.len()
	}
	return n
}

func (x *Index) appendOther(dst []byte, c container) []byte {
	for _, o := range x.other[c.otherFrom:c.otherTo] {
		dst = append(dst, x.buf[o.from:o.to]...)
	}
	return dst
}
