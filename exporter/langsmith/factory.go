package langsmith

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/exporter/langsmith/internal/metadata"
	"github.com/agentmeter/agentmeter/internal/envconfig"
)

// componentType is the exporter's type in collector configuration.
var componentType = metadata.Type

const stability = metadata.TracesStability

// NewFactory returns the langsmith exporter factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(componentType, createDefaultConfig,
		exporter.WithTraces(createTraces, stability))
}

// createDefaultConfig reads DeerFlow's environment variables for the defaults.
func createDefaultConfig() component.Config { return newDefaultConfig(envconfig.OS) }

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*Config)
	if !c.Enabled {
		return newDisabled(ctx, set, c)
	}
	e := newExporter(c, set)
	return exporterhelper.NewTraces(ctx, set, cfg, e.push,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		// the HTTP client's timeout bounds each request; one export may send several chunks
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(c.RetryConfig),
		exporterhelper.WithQueue(c.QueueConfig),
	)
}

// newDisabled accepts and drops spans, and says so once at start (docs/contract.md#exporters).
func newDisabled(ctx context.Context, set exporter.Settings, cfg *Config) (exporter.Traces, error) {
	return vendorhttp.NewDisabled(ctx, set, cfg,
		"LangSmith tracing is disabled; the langsmith exporter accepts and drops all spans", cfg.disabledReason())
}
