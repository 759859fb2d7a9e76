package telemetry

import (
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// OTLP's strings are protobuf strings, which must be valid UTF-8: the OTLP exporter
// refuses to encode a batch holding one that is not ("string field contains invalid
// UTF-8"), and every span of the batch is lost, the model calls' usage with them. A
// tool's output (a page in another encoding, a binary file, a message cut at a byte
// count) can carry such bytes into a span. So spans leave the process as valid UTF-8:
// in a string that is not, each run of invalid bytes becomes U+FFFD (as encoding/json
// and the run store do), and the rest of the span, and of the batch, goes as it is.

// validUTF8 returns spans with every string in them valid UTF-8: spans itself when
// they all are (the common case costs a scan), else a copy in which the spans that were
// not are wrapped.
func validUTF8(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for i, s := range spans {
		if spanValid(s) {
			if out != nil {
				out = append(out, s)
			}
			continue
		}
		if out == nil {
			out = append(make([]sdktrace.ReadOnlySpan, 0, len(spans)), spans[:i]...)
		}
		out = append(out, cleaned(s))
	}
	if out == nil {
		return spans
	}
	return out
}

func spanValid(s sdktrace.ReadOnlySpan) bool {
	if !utf8.ValidString(s.Name()) || !utf8.ValidString(s.Status().Description) || !attrsValid(s.Attributes()) {
		return false
	}
	for _, e := range s.Events() {
		if !utf8.ValidString(e.Name) || !attrsValid(e.Attributes) {
			return false
		}
	}
	for _, l := range s.Links() {
		if !attrsValid(l.Attributes) {
			return false
		}
	}
	return true
}

func attrsValid(kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		if !utf8.ValidString(string(kv.Key)) || !valueValid(kv.Value) {
			return false
		}
	}
	return true
}

func valueValid(v attribute.Value) bool {
	switch v.Type() {
	case attribute.STRING:
		return utf8.ValidString(v.AsString())
	case attribute.STRINGSLICE:
		for _, s := range v.AsStringSlice() {
			if !utf8.ValidString(s) {
				return false
			}
		}
	case attribute.SLICE:
		for _, e := range v.AsSlice() {
			if !valueValid(e) {
				return false
			}
		}
	case attribute.MAP:
		return attrsValid(v.AsMap())
	}
	return true
}

// cleanSpan is a span with its strings made valid; what it does not override is the
// span's own.
type cleanSpan struct {
	sdktrace.ReadOnlySpan
	name   string
	status sdktrace.Status
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	links  []sdktrace.Link
}

func cleaned(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	c := &cleanSpan{ReadOnlySpan: s, name: valid(s.Name()), status: s.Status(), attrs: validAttrs(s.Attributes())}
	c.status.Description = valid(c.status.Description)
	for _, e := range s.Events() {
		e.Name, e.Attributes = valid(e.Name), validAttrs(e.Attributes)
		c.events = append(c.events, e)
	}
	for _, l := range s.Links() {
		l.Attributes = validAttrs(l.Attributes)
		c.links = append(c.links, l)
	}
	return c
}

func (c *cleanSpan) Name() string                     { return c.name }
func (c *cleanSpan) Status() sdktrace.Status          { return c.status }
func (c *cleanSpan) Attributes() []attribute.KeyValue { return c.attrs }
func (c *cleanSpan) Events() []sdktrace.Event         { return c.events }
func (c *cleanSpan) Links() []sdktrace.Link           { return c.links }

func valid(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func validAttrs(kvs []attribute.KeyValue) []attribute.KeyValue {
	if kvs == nil {
		return nil
	}
	out := make([]attribute.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = attribute.KeyValue{Key: attribute.Key(valid(string(kv.Key))), Value: validValue(kv.Value)}
	}
	return out
}

func validValue(v attribute.Value) attribute.Value {
	switch v.Type() {
	case attribute.STRING:
		return attribute.StringValue(valid(v.AsString()))
	case attribute.STRINGSLICE:
		vs := v.AsStringSlice() // a copy
		for i := range vs {
			vs[i] = valid(vs[i])
		}
		return attribute.StringSliceValue(vs)
	case attribute.SLICE:
		vs := v.AsSlice()
		out := make([]attribute.Value, len(vs))
		for i := range vs {
			out[i] = validValue(vs[i])
		}
		return attribute.SliceValue(out...)
	case attribute.MAP:
		return attribute.MapValue(validAttrs(v.AsMap())...)
	}
	return v
}
