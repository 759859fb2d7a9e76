package langfuse

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/exporter/langfuse/internal/metadata"
	"github.com/agentmeter/agentmeter/internal/envconfig"
)

// componentType is the exporter's type in collector configs: `exporters: langfuse:`.
var componentType = metadata.Type

const (
	stability      = metadata.TracesStability
	defaultTimeout = 30 * time.Second
)

// NewFactory returns the langfuse exporter factory; defaults read the process environment.
func NewFactory() exporter.Factory { return newFactory(envconfig.OS) }

// newFactory lets tests inject the environment.
func newFactory(env envconfig.Lookup) exporter.Factory {
	return exporter.NewFactory(componentType,
		func() component.Config { return newConfig(env) },
		exporter.WithTraces(createTraces, stability))
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*Config)
	if !c.Enabled {
		return newDisabled(ctx, set, c)
	}
	e, err := newExporter(c, set)
	if err != nil {
		return nil, err
	}
	// The sending queue holds batches already shaped and encoded (convert): the batch
	// itself is never changed, nor kept.
	return vendorhttp.NewTracesRequest(ctx, set, vendorhttp.Requests{
		Convert: e.convert, Push: e.push, Encoding: queueEncoding{e},
		Start: e.start, Shutdown: e.shutdown, Remember: []vendorhttp.Remembered{e.revisions, e.shaper},
	}, c.RetryConfig, c.QueueConfig)
}

// newDisabled is the exporter of a disabled config (docs/contract.md#exporters).
func newDisabled(ctx context.Context, set exporter.Settings, c *Config) (exporter.Traces, error) {
	return vendorhttp.NewDisabled(ctx, set, c, "Langfuse exporter is disabled; spans sent to it are dropped", c.disabledReason())
}
