package otlpwire

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// A TracesData message written with the package decodes in pdata to what was written:
// the field numbers, the AnyValue encoders and their sizes, and both KeyValue forms.
func TestWrittenSpansDecode(t *testing.T) {
	var span []byte
	span = AppendBytes(span, SpanTraceID, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	span = AppendBytes(span, SpanSpanID, []byte{1, 1, 1, 1, 1, 1, 1, 1})
	span = AppendBytes(span, SpanParentSpanID, []byte{2, 2, 2, 2, 2, 2, 2, 2})
	span = AppendString(span, SpanName, "chat gpt-4o")
	span = AppendVarint(span, SpanKind, uint64(ptrace.SpanKindClient))
	span = AppendFixed64(span, SpanStart, 1_000)
	span = AppendFixed64(span, SpanEnd, 2_000)
	attr := func(key string, size int, value func([]byte) []byte) {
		before := len(span)
		span = AppendKeyValueHeader(span, SpanAttributes, key, size)
		at := len(span)
		span = value(span)
		assert.Equal(t, size, len(span)-at, "%s: the size matches what is appended", key)
		assert.Greater(t, at, before)
	}
	attr("s", StringValueLen("héllo"), func(b []byte) []byte { return AppendStringValue(b, "héllo") })
	attr("i", IntValueLen(-7), func(b []byte) []byte { return AppendIntValue(b, -7) })
	attr("big", IntValueLen(1<<40), func(b []byte) []byte { return AppendIntValue(b, 1<<40) })
	attr("d", DoubleValueLen(), func(b []byte) []byte { return AppendDoubleValue(b, 0.25) })
	attr("b", BoolValueLen(), func(b []byte) []byte { return AppendBoolValue(b, true) })
	attr("a", StringArrayValueLen([]string{"x", "", "zz"}), func(b []byte) []byte { return AppendStringArrayValue(b, []string{"x", "", "zz"}) })
	span = AppendKeyValue(span, SpanAttributes, "kv", AppendStringValue(nil, "whole"))
	span = AppendFixed32(span, SpanFlags, 0x101)

	scope := AppendBytes(nil, ScopeSpansSpans, span)
	rs := AppendBytes(nil, ResourceSpansScopeSpans, scope)
	msg := AppendBytes(nil, TracesResourceSpans, rs)

	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(msg)
	require.NoError(t, err)
	require.Equal(t, 1, td.SpanCount())
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, sp.TraceID())
	assert.Equal(t, pcommon.SpanID{1, 1, 1, 1, 1, 1, 1, 1}, sp.SpanID())
	assert.Equal(t, pcommon.SpanID{2, 2, 2, 2, 2, 2, 2, 2}, sp.ParentSpanID())
	assert.Equal(t, "chat gpt-4o", sp.Name())
	assert.Equal(t, ptrace.SpanKindClient, sp.Kind())
	assert.EqualValues(t, 1_000, sp.StartTimestamp())
	assert.EqualValues(t, 2_000, sp.EndTimestamp())
	assert.EqualValues(t, 0x101, sp.Flags())
	assert.Equal(t, map[string]any{
		"s": "héllo", "i": int64(-7), "big": int64(1 << 40), "d": 0.25, "b": true,
		"a": []any{"x", "", "zz"}, "kv": "whole",
	}, sp.Attributes().AsRaw())
}

// EachField copies every other field as it is and hands the chosen one to fn; bad input
// is ErrMalformed, never a panic.
func TestEachField(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	rs.SetSchemaUrl("https://schema")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("one")
	var m ptrace.ProtoMarshaler
	src, err := m.MarshalTraces(td)
	require.NoError(t, err)

	// the identity rewrite gives the same bytes
	same, err := EachField(nil, src, TracesResourceSpans, func(dst, field []byte) ([]byte, error) {
		return AppendBytes(dst, TracesResourceSpans, field), nil
	})
	require.NoError(t, err)
	assert.Equal(t, src, same)

	// a rewrite of a nested field: the span gets a name field appended (protobuf keeps
	// the last), everything else is untouched
	renamed, err := EachField(nil, src, TracesResourceSpans, func(dst, rsb []byte) ([]byte, error) {
		out, err := EachField(nil, rsb, ResourceSpansScopeSpans, func(dst, ssb []byte) ([]byte, error) {
			out, err := EachField(nil, ssb, ScopeSpansSpans, func(dst, spb []byte) ([]byte, error) {
				return AppendBytes(dst, ScopeSpansSpans, AppendString(append([]byte(nil), spb...), SpanName, "two")), nil
			})
			return AppendBytes(dst, ResourceSpansScopeSpans, out), err
		})
		return AppendBytes(dst, TracesResourceSpans, out), err
	})
	require.NoError(t, err)
	var u ptrace.ProtoUnmarshaler
	back, err := u.UnmarshalTraces(renamed)
	require.NoError(t, err)
	got := back.ResourceSpans().At(0)
	assert.Equal(t, "two", got.ScopeSpans().At(0).Spans().At(0).Name())
	assert.Equal(t, "https://schema", got.SchemaUrl())
	v, _ := got.Resource().Attributes().Get("service.name")
	assert.Equal(t, "svc", v.Str())

	for _, bad := range [][]byte{{0xff}, protowire.AppendTag(nil, TracesResourceSpans, protowire.BytesType), {0x0a, 0x05, 1}} {
		_, err := EachField(nil, bad, TracesResourceSpans, func(dst, f []byte) ([]byte, error) { return dst, nil })
		assert.ErrorIs(t, err, ErrMalformed, "%x", bad)
	}
}

// EachFieldSize is the length of what EachField writes for the same rewrite: fields it
// keeps are counted as they are (an unknown field, a tag written in more bytes than it
// needs), rewritten ones as the minimal tag AppendHeader writes and the size given.
func TestEachFieldSizeIsWhatEachFieldWrites(t *testing.T) {
	td := ptrace.NewTraces()
	for i := range 3 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "svc")
		rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName(strings.Repeat("s", 100*i))
	}
	var m ptrace.ProtoMarshaler
	src, err := m.MarshalTraces(td)
	require.NoError(t, err)
	src = protowire.AppendVarint(append(src, 0x80|0x50, 0x00), 7) // field 10 as a two-byte tag, unknown
	src = protowire.AppendBytes(protowire.AppendTag(src, 99, protowire.BytesType), []byte("unknown"))
	src = protowire.AppendBytes(append(src, 0x8a, 0x00), nil)  // a ResourceSpans under a two-byte tag: rewritten with one
	grow := func(field []byte) int { return len(field) + 200 } // past a one-byte length
	out, err := EachField(nil, src, TracesResourceSpans, func(dst, field []byte) ([]byte, error) {
		dst = append(AppendHeader(dst, TracesResourceSpans, grow(field)), field...)
		return append(dst, make([]byte, 200)...), nil
	})
	require.NoError(t, err)
	n, err := EachFieldSize(src, TracesResourceSpans, func(field []byte) (int, error) { return grow(field), nil })
	require.NoError(t, err)
	assert.Equal(t, len(out), n)

	for _, bad := range [][]byte{{0xff}, protowire.AppendTag(nil, TracesResourceSpans, protowire.BytesType), {0x0a, 0x05, 1}} {
		_, err := EachFieldSize(bad, TracesResourceSpans, func([]byte) (int, error) { return 0, nil })
		assert.ErrorIs(t, err, ErrMalformed, "%x", bad)
	}
}
