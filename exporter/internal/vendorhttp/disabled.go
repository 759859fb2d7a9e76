package vendorhttp

import (
	"context"

	"go.opentelemetry.io/collector/component"
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
