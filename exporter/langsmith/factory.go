package langsmith

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"

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
	return vendorhttp.NewTraces(ctx, set, cfg, vendorhttp.Sender{Push: e.push, Start: e.start, Shutdown: e.shutdown, Remember: []vendorhttp.Remembered{e.revisions}},
		c.RetryConfig, c.QueueConfig)
}

// newDisabled accepts and drops spans, and says so once at start (docs/contract.md#exporters).
func newDisabled(ctx context.Context, set exporter.Settings, cfg *Config) (exporter.Traces, error) {
	return vendorhttp.NewDisabled(ctx, set, cfg,
		"LangSmith tracing is disabled; the langsmith exporter accepts and drops all spans", cfg.disabledReason())
}
