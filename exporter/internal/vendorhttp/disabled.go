package vendorhttp

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
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
func NewTraces(ctx context.Context, set exporter.Settings, cfg component.Config, s Sender,
	retry configretry.BackOffConfig, queue configoptional.Optional[exporterhelper.QueueBatchConfig],
) (exporter.Traces, error) {
	return exporterhelper.NewTraces(ctx, set, cfg, s.Push,
		exporterhelper.WithStart(s.Start),
		exporterhelper.WithShutdown(s.Shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(retry),
		exporterhelper.WithQueue(queue),
	)
}
