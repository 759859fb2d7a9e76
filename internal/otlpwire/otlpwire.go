// Package otlpwire writes and walks OTLP protobuf by hand, for the hot paths that would
// otherwise build pdata copies only to marshal them: the field numbers of the trace and
// common messages (opentelemetry-proto: collector/trace/v1, trace/v1, common/v1), field
// appenders, AnyValue and KeyValue encoders with their sizes (so a caller can write a
// length prefix without a temporary buffer), a walk that copies a message while
// rewriting one of its fields, and an index that picks spans out of an encoded batch
// (Index).
package otlpwire

import (
	"errors"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers.
const (
	// ExportTraceServiceRequest.resource_spans and TracesData.resource_spans: the two
	// messages have the same layout.
	TracesResourceSpans protowire.Number = 1

	ResourceSpansScopeSpans protowire.Number = 2 // ResourceSpans.scope_spans
	ScopeSpansSpans         protowire.Number = 2 // ScopeSpans.spans

	SpanTraceID      protowire.Number = 1
	SpanSpanID       protowire.Number = 2
	SpanParentSpanID protowire.Number = 4
	SpanName         protowire.Number = 5
	SpanKind         protowire.Number = 6
	SpanStart        protowire.Number = 7 // start_time_unix_nano, fixed64
	SpanEnd          protowire.Number = 8 // end_time_unix_nano, fixed64
	SpanAttributes   protowire.Number = 9
	SpanFlags        protowire.Number = 16 // fixed32

	KeyValueKey   protowire.Number = 1
	KeyValueValue protowire.Number = 2

	AnyString protowire.Number = 1
	AnyBool   protowire.Number = 2
	AnyInt    protowire.Number = 3
	AnyDouble protowire.Number = 4
	AnyArray  protowire.Number = 5

	ArrayValues protowire.Number = 1 // ArrayValue.values
)

// ErrMalformed reports protobuf bytes that do not parse.
var ErrMalformed = errors.New("otlpwire: malformed OTLP protobuf")

// AppendBytes appends field num holding b (a message, bytes or a string's bytes).
func AppendBytes(dst []byte, num protowire.Number, b []byte) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, b)
}

// AppendHeader starts length-delimited field num holding n bytes, which the caller
// appends next: its tag and length.
func AppendHeader(dst []byte, num protowire.Number, n int) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(n))
}

// AppendString appends string field num.
func AppendString(dst []byte, num protowire.Number, s string) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendString(dst, s)
}

// AppendVarint appends varint field num.
func AppendVarint(dst []byte, num protowire.Number, v uint64) []byte {
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}

// AppendFixed64 appends fixed64 field num.
func AppendFixed64(dst []byte, num protowire.Number, v uint64) []byte {
	dst = protowire.AppendTag(dst, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(dst, v)
}

// AppendFixed32 appends fixed32 field num.
func AppendFixed32(dst []byte, num protowire.Number, v uint32) []byte {
	dst = protowire.AppendTag(dst, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(dst, v)
}

// AnyValue encoders: each appends the body of an AnyValue message (no tag, no length);
// the matching ...ValueLen is the size it appends.

// StringValueLen is the size AppendStringValue appends.
func StringValueLen(s string) int { return protowire.SizeTag(AnyString) + protowire.SizeBytes(len(s)) }

// AppendStringValue appends AnyValue{string_value: s}.
func AppendStringValue(dst []byte, s string) []byte { return AppendString(dst, AnyString, s) }

// IntValueLen is the size AppendIntValue appends.
func IntValueLen(v int64) int { return protowire.SizeTag(AnyInt) + protowire.SizeVarint(uint64(v)) }

// AppendIntValue appends AnyValue{int_value: v}.
func AppendIntValue(dst []byte, v int64) []byte { return AppendVarint(dst, AnyInt, uint64(v)) }

// BoolValueLen is the size AppendBoolValue appends.
func BoolValueLen() int { return protowire.SizeTag(AnyBool) + 1 }

// AppendBoolValue appends AnyValue{bool_value: v}.
func AppendBoolValue(dst []byte, v bool) []byte {
	return AppendVarint(dst, AnyBool, protowire.EncodeBool(v))
}

// DoubleValueLen is the size AppendDoubleValue appends.
func DoubleValueLen() int { return protowire.SizeTag(AnyDouble) + protowire.SizeFixed64() }

// AppendDoubleValue appends AnyValue{double_value: v}.
func AppendDoubleValue(dst []byte, v float64) []byte {
	return AppendFixed64(dst, AnyDouble, math.Float64bits(v))
}

// StringArrayValueLen is the size AppendStringArrayValue appends.
func StringArrayValueLen(vs []string) int {
	return protowire.SizeTag(AnyArray) + protowire.SizeBytes(stringArrayLen(vs))
}

// stringArrayLen is the size of the ArrayValue message of vs.
func stringArrayLen(vs []string) int {
	n := 0
	for _, v := range vs {
		n += protowire.SizeTag(ArrayValues) + protowire.SizeBytes(StringValueLen(v))
	}
	return n
}

// AppendStringArrayValue appends AnyValue{array_value: [string_value...]}.
func AppendStringArrayValue(dst []byte, vs []string) []byte {
	dst = protowire.AppendTag(dst, AnyArray, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(stringArrayLen(vs)))
	for _, v := range vs {
		dst = protowire.AppendTag(dst, ArrayValues, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(StringValueLen(v)))
		dst = AppendStringValue(dst, v)
	}
	return dst
}

// AppendKeyValueHeader starts field num (Span.attributes, for one) holding
// KeyValue{key, value}, where the encoded AnyValue of valueLen bytes is what the caller
// appends next.
func AppendKeyValueHeader(dst []byte, num protowire.Number, key string, valueLen int) []byte {
	kvLen := protowire.SizeTag(KeyValueKey) + protowire.SizeBytes(len(key)) +
		protowire.SizeTag(KeyValueValue) + protowire.SizeBytes(valueLen)
	dst = AppendHeader(dst, num, kvLen)
	dst = AppendString(dst, KeyValueKey, key)
	return AppendHeader(dst, KeyValueValue, valueLen)
}

// AppendKeyValue appends field num holding KeyValue{key, value}, value being an encoded
// AnyValue body.
func AppendKeyValue(dst []byte, num protowire.Number, key string, value []byte) []byte {
	dst = AppendKeyValueHeader(dst, num, key, len(value))
	return append(dst, value...)
}

// EachField copies the protobuf message src into dst field by field, except that every
// length-delimited field num is handed to fn, which appends its replacement (tag
// included) to dst. Nested calls walk nested messages.
func EachField(dst, src []byte, num protowire.Number, fn func(dst, field []byte) ([]byte, error)) ([]byte, error) {
	for len(src) > 0 {
		n, typ, k := protowire.ConsumeTag(src)
		if k < 0 {
			return nil, ErrMalformed
		}
		if n != num || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(n, typ, src[k:])
			if m < 0 {
				return nil, ErrMalformed
			}
			dst = append(dst, src[:k+m]...)
			src = src[k+m:]
			continue
		}
		field, m := protowire.ConsumeBytes(src[k:])
		if m < 0 {
			return nil, ErrMalformed
		}
		var err error
		if dst, err = fn(dst, field); err != nil {
			return nil, err
		}
		src = src[k+m:]
	}
	return dst, nil
}

// EachFieldSize is the size of what EachField writes for src when fn replaces each
// length-delimited field num with one of the same field number holding as many bytes
// as size returns for it: a caller measures a rewrite first, so that it can write each
// enclosing length before the message.
func EachFieldSize(src []byte, num protowire.Number, size func(field []byte) (int, error)) (int, error) {
	n := 0
	for len(src) > 0 {
		f, typ, k := protowire.ConsumeTag(src)
		if k < 0 {
			return 0, ErrMalformed
		}
		if f != num || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(f, typ, src[k:])
			if m < 0 {
				return 0, ErrMalformed
			}
			n += k + m
			src = src[k+m:]
			continue
		}
		field, m := protowire.ConsumeBytes(src[k:])
		if m < 0 {
			return 0, ErrMalformed
		}
		l, err := size(field)
		if err != nil {
			return 0, err
		}
		n += protowire.SizeTag(num) + protowire.SizeBytes(l)
		src = src[k+m:]
	}
	return n, nil
}
