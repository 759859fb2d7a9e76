package langfuse

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/internal/otlpwire"
)

// queueEncoding stores a queued request (spans) in a persistent sending queue:
//
//	0xA7 'L' | uvarint len | context | uvarint spans | per span: trace id (16), span id (8), varint revision | body
//
// The context is the request's, as the collector stores it with a batch of its own
// (client metadata, the span context), in the collector's encoding of an empty batch.
// The first byte can never start what the queue held before: the collector's request
// encoding starts with 0x0D, a bare OTLP message with 0x0A. Those (a queue filled by an
// earlier version of this exporter) are decoded and shaped as they are read.
type queueEncoding struct{ e *langfuseExporter }

var queueMagic = [2]byte{0xA7, 'L'}

// versionLen is the fixed part of a stored version: trace and span id.
const versionLen = 16 + 8

func (q queueEncoding) Marshal(ctx context.Context, req xexporterhelper.Request) ([]byte, error) {
	r, ok := req.(*spans)
	if !ok {
		return nil, fmt.Errorf("langfuse: cannot store a %T in the sending queue", req)
	}
	rc, err := recordContext(ctx)
	if err != nil {
		return nil, err
	}
	if rec, ok := r.stored(rc); ok {
		return rec, nil
	}
	out := appendRecordHead(make([]byte, 0, recordHeadLen(rc, r.versions)+r.bytes), rc, r.versions)
	for _, p := range r.parts {
		out = append(out, p...)
	}
	return out, nil
}

// recordContext is ctx as a stored request carries it.
func recordContext(ctx context.Context) ([]byte, error) {
	rc, err := pdatareq.MarshalTraces(ctx, ptrace.NewTraces())
	if err != nil {
		return nil, fmt.Errorf("langfuse: encoding a queued request's context: %w", err)
	}
	return rc, nil
}

// recordHeadLen is at least the length of the head appendRecordHead appends.
func recordHeadLen(rc []byte, versions []vendorhttp.Version) int {
	return len(queueMagic) + 2*binary.MaxVarintLen64 + len(rc) + len(versions)*(versionLen+binary.MaxVarintLen64)
}

// appendRecordHead appends a stored request's head, what comes before its body: the
// magic, its context (rc, recordContext) and its spans' versions.
func appendRecordHead(dst, rc []byte, versions []vendorhttp.Version) []byte {
	dst = append(dst, queueMagic[:]...)
	dst = binary.AppendUvarint(dst, uint64(len(rc)))
	dst = append(dst, rc...)
	dst = binary.AppendUvarint(dst, uint64(len(versions)))
	for _, v := range versions {
		dst = append(dst, v.Key.Trace[:]...)
		dst = append(dst, v.Key.Span[:]...)
		dst = binary.AppendVarint(dst, v.Rev)
	}
	return dst
}

func (q queueEncoding) Unmarshal(b []byte) (context.Context, xexporterhelper.Request, error) {
	if len(b) < len(queueMagic) || [2]byte(b[:2]) != queueMagic {
		return q.unmarshalBatch(b)
	}
	ctx := context.Background()
	rest := b[len(queueMagic):]
	n, rc, err := chunk(rest)
	if err != nil {
		return ctx, nil, fmt.Errorf("langfuse: a queued request's context: %w", err)
	}
	if c, _, cerr := pdatareq.UnmarshalTraces(rc); cerr == nil {
		ctx = c
	}
	rest = rest[n:]
	count, m := binary.Uvarint(rest)
	if m <= 0 || count > uint64(len(rest)/versionLen) {
		return ctx, nil, errors.New("langfuse: a queued request's span count is malformed")
	}
	rest = rest[m:]
	versions := make([]vendorhttp.Version, count)
	for i := range versions {
		if len(rest) < versionLen+1 {
			return ctx, nil, errors.New("langfuse: a queued request's span versions are cut short")
		}
		v := &versions[i]
		copy(v.Key.Trace[:], rest[:16])
		copy(v.Key.Span[:], rest[16:versionLen])
		rev, k := binary.Varint(rest[versionLen:])
		if k <= 0 {
			return ctx, nil, errors.New("langfuse: a queued request's span revision is malformed")
		}
		v.Rev = rev
		rest = rest[versionLen+k:]
	}
	// the body is kept as it is read: the queue does not reuse what it hands out
	r := newSpans(rest, versions)
	x := bodyIndexes.Get().(*otlpwire.Index)
	err = r.index(x) // a damaged body is refused here, not sent short later
	_ = x.Reset(nil)
	bodyIndexes.Put(x)
	if err != nil {
		return ctx, nil, err
	}
	return ctx, r, nil
}

// bodyIndexes index the bodies of queued requests as they are read.
var bodyIndexes = sync.Pool{New: func() any { return new(otlpwire.Index) }}

// chunk reads a uvarint length and that many bytes: how much it read, and the bytes.
func chunk(b []byte) (int, []byte, error) {
	l, m := binary.Uvarint(b)
	if m <= 0 || l > uint64(len(b)-m) {
		return 0, nil, errors.New("malformed length")
	}
	return m + int(l), b[m : m+int(l)], nil
}

// unmarshalBatch reads what an earlier version queued (a batch in the collector's
// request encoding, or older, a bare OTLP message) and shapes it now.
func (q queueEncoding) unmarshalBatch(b []byte) (context.Context, xexporterhelper.Request, error) {
	ctx, td, err := pdatareq.UnmarshalTraces(b)
	if errors.Is(err, pdatareq.ErrInvalidFormat) {
		ctx = context.Background()
		td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	}
	if err != nil {
		return ctx, nil, fmt.Errorf("langfuse: a queued batch does not decode: %w", err)
	}
	r, err := q.e.convert(ctx, td)
	return ctx, r, err
}
