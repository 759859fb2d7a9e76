package vendorhttp

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
)

// NewDisabled is the exporter of a disabled config: it accepts and drops spans, and says
// so once at start with why (reason), as DeerFlow does for a disabled provider. It has no
// queue, so no storage extension is touched.
func NewDisabled(ctx context.Context, set exporter.Settings, cfg component.Config, message, reason string) (exporter.Traces, error) {
	return exporterhelper.NewTraces(ctx, set, cfg,
		func(context.Context, ptrace.Traces) error { return nil },
		exporterhelper.WithStart(func(context.Context, component.Host) error {
			set.Logger.Info(message, zap.String("reason", reason))
			return nil
		}),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	)
}

// Sender is what a vendor exporter plugs into NewTraces.
type Sender struct {
	Push     func(context.Context, ptrace.Traces) error
	Start    func(context.Context, component.Host) error
	Shutdown func(context.Context) error
}

// NewTraces wraps a vendor exporter in exporterhelper the way both vendor exporters want
// it: the sending queue and retry policy of the config, MutatesData false (push reads
// the batch and never writes it; the parts of a 413 split are copies), and no overall
// timeout, because the HTTP client's timeout bounds each request and one push may send
// several (chunks, the halves of a split).
//
// With a queue sized in bytes, a batch larger than half of it is cut into pieces that fit
// before it is queued: a blocking queue would otherwise wait forever for room that a
// batch larger than the whole queue can never get.
func NewTraces(ctx context.Context, set exporter.Settings, cfg component.Config, s Sender,
	retry configretry.BackOffConfig, queue configoptional.Optional[exporterhelper.QueueBatchConfig],
) (exporter.Traces, error) {
	exp, err := exporterhelper.NewTraces(ctx, set, cfg, s.Push,
		exporterhelper.WithStart(s.Start),
		exporterhelper.WithShutdown(s.Shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(retry),
		exporterhelper.WithQueue(queue),
	)
	if err != nil || !queue.HasValue() || queue.Get().Sizer != exporterhelper.RequestSizerTypeBytes {
		return exp, err
	}
	return fitQueue{Traces: exp, max: int(queue.Get().QueueSize / 2)}, nil
}

// fitQueue cuts batches over max OTLP-encoded bytes into pieces of at most max bytes
// before they reach the queue.
type fitQueue struct {
	exporter.Traces
	max int
}

func (f fitQueue) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	var sizer ptrace.ProtoMarshaler
	size, n := sizer.TracesSize(td), td.SpanCount()
	if size <= f.max || n <= 1 || f.max <= 0 {
		return f.Traces.ConsumeTraces(ctx, td)
	}
	refs := SpanRefs(td)
	pieces := (size + f.max - 1) / f.max
	per := (n + pieces - 1) / pieces
	for lo := 0; lo < n; lo += per {
		hi := min(n, lo+per)
		// a piece can still be over max when spans differ in size: cut it again
		if err := f.ConsumeTraces(ctx, Subset(td, refs[lo:hi])); err != nil {
			if lo == 0 || consumererror.IsPermanent(err) {
				return err
			}
			return consumererror.NewTraces(err, Subset(td, refs[lo:]))
		}
	}
	return nil
}
