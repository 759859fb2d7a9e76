package tokenmetrics

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/agentmeter/agentmeter/connector/tokenmetrics/internal/metadata"
)

// Type is the component type, as written in collector configs.
var Type = metadata.Type

// NewFactory returns the tokenmetrics connector factory (traces in, metrics out).
func NewFactory() connector.Factory {
	return connector.NewFactory(metadata.Type,
		func() component.Config { return createDefaultConfig() },
		connector.WithTracesToMetrics(createTracesToMetrics, metadata.TracesToMetricsStability))
}

func createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("tokenmetrics: unexpected config type %T", cfg)
	}
	return newConnector(set, c, next)
}
