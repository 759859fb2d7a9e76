package langfuse

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/internal/otlpwire"
)

// spans is what the sending queue holds: a batch as Langfuse gets it, shaped and
// encoded when it was queued (convert), so a queued span is encoded once, not decoded
// out of the queue to be shaped and encoded again. Its body is OTLP messages one after
// the other, which decode as their union: merging two requests is listing their parts,
// nothing is copied until the batch is sent (compressed part by part).
type spans struct {
	// parts are OTLP TracesData messages (the same fields as ExportTraceServiceRequest)
	// with every span's Langfuse attributes in them
	parts [][]byte
	bytes int // their bytes together
	// versions are the spans' keys and merge revisions, one per span in the parts' order
	versions []vendorhttp.Version
	// record is the request's stored form (queue_encoding.go) when convert spliced the
	// body straight behind its head, recorded under the context encoded as recordCtx: a
	// persistent queue then stores it without copying the body again. A merge drops it.
	record    []byte
	recordCtx []byte
}

// stored is the request's record, when it was made under the context encoded as rc.
func (r *spans) stored(rc []byte) ([]byte, bool) {
	if r.record == nil || !bytes.Equal(rc, r.recordCtx) {
		return nil, false
	}
	return r.record, true
}

// newSpans is a request of one encoded message.
func newSpans(body []byte, versions []vendorhttp.Version) *spans {
	return &spans{parts: [][]byte{body}, bytes: len(body), versions: versions}
}

// body is the parts as one message: the only part, or a copy of them all.
func (r *spans) body() []byte {
	if len(r.parts) == 1 {
		return r.parts[0]
	}
	return bytes.Join(r.parts, nil)
}

// index indexes r's body into x. The body holds one span for each of r's versions; one
// that does not (a queued batch damaged on disk) is an error, so that no part of it is
// cut by the wrong spans or sent short.
func (r *spans) index(x *otlpwire.Index) error {
	if err := x.Reset(r.body()); err != nil {
		return fmt.Errorf("langfuse: a queued batch is malformed: %w", err)
	}
	if x.Len() != len(r.versions) {
		return fmt.Errorf("langfuse: a queued batch holds %d spans, its head names %d", x.Len(), len(r.versions))
	}
	return nil
}

var (
	_ xexporterhelper.Request = (*spans)(nil)
	_ interface {
		OnError(error) xexporterhelper.Request
	} = (*spans)(nil)
)

// ItemsCount is the number of spans.
func (r *spans) ItemsCount() int { return len(r.versions) }

// BytesSize is the encoded size: what the queue's bytes bound counts.
func (r *spans) BytesSize() int { return r.bytes }

// MergeSplit appends r2 to r, then cuts what is over maxSize (spans or bytes) off the
// front into requests of at most maxSize each, r itself last with the rest.
func (r *spans) MergeSplit(_ context.Context, maxSize int, szt exporterhelper.RequestSizerType, r2 xexporterhelper.Request) ([]xexporterhelper.Request, error) {
	if szt != exporterhelper.RequestSizerTypeItems && szt != exporterhelper.RequestSizerTypeBytes {
		return nil, fmt.Errorf("langfuse: unknown sizer type %v", szt)
	}
	if r2 != nil {
		o, ok := r2.(*spans)
		if !ok {
			return nil, fmt.Errorf("langfuse: cannot merge a %T into the queue's requests", r2)
		}
		r.parts = append(r.parts, o.parts...)
		r.bytes += o.bytes
		r.versions = append(r.versions, o.versions...)
		r.record, r.recordCtx = nil, nil
	}
	if maxSize <= 0 || r.sizeBy(szt) <= maxSize {
		return []xexporterhelper.Request{r}, nil
	}
	var x otlpwire.Index
	if err := r.index(&x); err != nil {
		return nil, err
	}
	idx := make([]int32, len(r.versions))
	for i := range idx {
		idx[i] = int32(i)
	}
	var out []xexporterhelper.Request
	for len(idx) > 0 && pieceSize(&x, idx, szt) > maxSize {
		n := fits(&x, idx, maxSize, szt)
		if n == 0 {
			return out, fmt.Errorf("langfuse: a span of %d bytes is over the batch's max_size of %d; dropped", x.SpanLen(int(idx[0])), maxSize)
		}
		out = append(out, r.piece(&x, idx[:n]))
		idx = idx[n:]
	}
	*r = *r.piece(&x, idx)
	return append(out, r), nil
}

// fits is how many of the spans at idx, from the first, go in one request of at most
// maxSize (a piece's bytes grow with its spans, so a binary search finds it).
func fits(x *otlpwire.Index, idx []int32, maxSize int, szt exporterhelper.RequestSizerType) int {
	if szt == exporterhelper.RequestSizerTypeItems {
		return min(maxSize, len(idx))
	}
	lo, hi := 0, len(idx) // pieceSize(idx[:lo]) <= maxSize < pieceSize(idx[:hi+1])
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if x.Size(idx[:mid]) <= maxSize {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// pieceSize is the size of the spans at idx together, by the sizer's measure.
func pieceSize(x *otlpwire.Index, idx []int32, szt exporterhelper.RequestSizerType) int {
	if szt == exporterhelper.RequestSizerTypeItems {
		return len(idx)
	}
	return x.Size(idx)
}

func (r *spans) sizeBy(szt exporterhelper.RequestSizerType) int {
	if szt == exporterhelper.RequestSizerTypeItems {
		return r.ItemsCount()
	}
	return r.BytesSize()
}

// piece is a request of r's spans at idx (indexed by x).
func (r *spans) piece(x *otlpwire.Index, idx []int32) *spans {
	versions := make([]vendorhttp.Version, len(idx))
	for i, s := range idx {
		versions[i] = r.versions[s]
	}
	return newSpans(x.Append(make([]byte, 0, x.Size(idx)), idx), versions)
}

// OnError is what is left to send after err: the parts of a push a retryable error
// refused, when others went through (retryParts), else the whole request.
func (r *spans) OnError(err error) xexporterhelper.Request {
	var rest *retryParts
	if errors.As(err, &rest) {
		return rest.spans
	}
	return r
}

// retryParts is a retryable error of a push that delivered some of its spans: it
// carries the others, so a retry never sends again what went through.
type retryParts struct {
	err   error
	spans *spans
}

func (e *retryParts) Error() string { return e.err.Error() }
func (e *retryParts) Unwrap() error { return e.err }
