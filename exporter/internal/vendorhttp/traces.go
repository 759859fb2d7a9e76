package vendorhttp

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Sender is what a vendor exporter plugs into NewTraces.
type Sender struct {
	Push     func(context.Context, ptrace.Traces) error
	Start    func(context.Context, component.Host) error
	Shutdown func(context.Context) error
	// Remember is what Push remembers that is kept on the persistent queue's storage
	// too (Remembered).
	Remember []Remembered
}

// NewTraces wraps a vendor exporter in exporterhelper the way both vendor exporters want
// it: the sending queue and retry policy of the config, MutatesData false (push reads
// the batch and never writes it; the parts of a 413 split are copies; with a batching
// queue only a persistent one keeps that promise, packedQueue), and no overall
// timeout, because the HTTP client's timeout bounds each request and one push may send
// several (chunks, the halves of a split).
//
// A full blocking queue makes a caller wait for room at most MaxQueueWait (less when the
// caller's own deadline is nearer), then refuses it with a retryable error: a queue that
// stays full (a vendor down) answers fast, never hangs a sender.
//
// A persistent queue stores large values compressed (queuestore.go).
//
// With a queue sized in bytes, a batch larger than half of it is cut into pieces that fit
// before it is queued: a blocking queue would otherwise wait for room that a batch larger
// than the whole queue can never get.
func NewTraces(ctx context.Context, set exporter.Settings, cfg component.Config, s Sender,
	retry configretry.BackOffConfig, queue configoptional.Optional[exporterhelper.QueueBatchConfig],
) (exporter.Traces, error) {
	exp, err := exporterhelper.NewTraces(ctx, set, cfg, s.Push,
		append(options(s.Start, s.Shutdown, retry), exporterhelper.WithQueue(queue))...)
	if err != nil {
		return nil, err
	}
	return wrap(exp, queue, set, s.Remember), nil
}

// Requests is what a vendor exporter that queues a request type of its own (a batch
// already in the form it sends) plugs into NewTracesRequest.
type Requests struct {
	// Convert makes the request of a batch, in the caller's goroutine, before it is
	// queued; it must not change or keep the batch.
	Convert xexporterhelper.RequestConverterFunc[ptrace.Traces]
	// Push sends a request (a batch of them, merged by the queue's batcher).
	Push xexporterhelper.RequestConsumeFunc
	// Encoding stores a request in a persistent queue and reads it back, including what
	// an earlier version of the exporter stored there.
	Encoding exporterhelper.QueueBatchEncoding[xexporterhelper.Request]
	Start    func(context.Context, component.Host) error
	Shutdown func(context.Context) error
	// Remember, as in Sender.
	Remember []Remembered
}

// NewTracesRequest is NewTraces for an exporter whose sending queue holds its own
// requests (Requests): the same queue config, retry policy, bounded wait, admission
// cut and packed store.
func NewTracesRequest(ctx context.Context, set exporter.Settings, r Requests,
	retry configretry.BackOffConfig, queue configoptional.Optional[exporterhelper.QueueBatchConfig],
) (exporter.Traces, error) {
	exp, err := xexporterhelper.NewTracesRequest(ctx, set, r.Convert, r.Push,
		append(options(r.Start, r.Shutdown, retry),
			xexporterhelper.WithQueueBatch(queue, xexporterhelper.QueueBatchSettings{Encoding: r.Encoding}))...)
	if err != nil {
		return nil, err
	}
	return wrap(exp, queue, set, r.Remember), nil
}

func options(start func(context.Context, component.Host) error, shutdown func(context.Context) error, retry configretry.BackOffConfig) []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithStart(start),
		exporterhelper.WithShutdown(shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(retry),
	}
}

// wrap puts the packed store (with what exporter set.ID remembers) and the admission in
// front of a queued exporter.
func wrap(exp exporter.Traces, queue configoptional.Optional[exporterhelper.QueueBatchConfig], set exporter.Settings, remembered []Remembered) exporter.Traces {
	if !queue.HasValue() {
		return exp
	}
	q := queue.Get()
	if q.StorageID != nil {
		exp = packedQueue{Traces: exp, storageID: *q.StorageID, self: set.ID, remembered: remembered, logger: set.Logger}
	}
	a := admission{Traces: exp}
	if q.BlockOnOverflow {
		a.wait = MaxQueueWait
	}
	if q.Sizer == exporterhelper.RequestSizerTypeBytes {
		a.max = int(q.QueueSize / 2)
	}
	if a.wait == 0 && a.max == 0 {
		return exp
	}
	return a
}

// MaxQueueWait is the longest a caller waits for room in a full blocking sending queue
// before it is refused, retryably (an OTLP receiver answers 503 / Unavailable, and the
// sender retries). It absorbs a burst; a vendor that stays down is answered fast.
const MaxQueueWait = 2 * time.Second

// admission is what happens before a batch enters the sending queue: the wait for room
// is bounded (wait > 0), and batches over max OTLP-encoded bytes (max > 0) are cut into
// pieces of at most max bytes.
type admission struct {
	exporter.Traces
	max  int
	wait time.Duration
}

func (a admission) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if a.wait > 0 {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > a.wait {
			var cancel context.CancelFunc
			// the queue keeps the request without this deadline (it stores
			// context.WithoutCancel), so the export is not bound by it
			ctx, cancel = context.WithTimeout(ctx, a.wait)
			defer cancel()
		}
	}
	return a.cut(ctx, td)
}

func (a admission) cut(ctx context.Context, td ptrace.Traces) error {
	n := td.SpanCount()
	if a.max <= 0 || n <= 1 {
		return a.Traces.ConsumeTraces(ctx, td)
	}
	var sizer ptrace.ProtoMarshaler
	size := sizer.TracesSize(td)
	if size <= a.max {
		return a.Traces.ConsumeTraces(ctx, td)
	}
	refs := SpanRefs(td)
	pieces := (size + a.max - 1) / a.max
	per := (n + pieces - 1) / pieces
	for lo := 0; lo < n; lo += per {
		hi := min(n, lo+per)
		// a piece can still be over max when spans differ in size: cut it again
		if err := a.cut(ctx, Subset(td, refs[lo:hi])); err != nil {
			if consumererror.IsPermanent(err) {
				return err
			}
			// A partial refusal names what was not taken, so a caller sends only that
			// again: what this piece's own cut did not take, and every later piece.
			var partial consumererror.Traces
			if errors.As(err, &partial) {
				rest := partial.Data()
				Subset(td, refs[hi:]).ResourceSpans().MoveAndAppendTo(rest.ResourceSpans())
				return consumererror.NewTraces(err, rest)
			}
			if lo == 0 {
				return err // nothing taken
			}
			return consumererror.NewTraces(err, Subset(td, refs[lo:]))
		}
	}
	return nil
}
