package attrsplit

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/agentmeter/agentmeter/connector/attrsplit/internal/metadata"
)

// Type is the component type, as written in collector configs.
var Type = metadata.Type

// NewFactory returns the attrsplit connector factory (traces in, traces out).
func NewFactory() connector.Factory {
	return connector.NewFactory(metadata.Type,
		func() component.Config { return createDefaultConfig() },
		connector.WithTracesToTraces(createTracesToTraces, metadata.TracesToTracesStability))
}

func createTracesToTraces(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Traces) (connector.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("attrsplit: unexpected config type %T", cfg)
	}
	router, ok := next.(connector.TracesRouterAndConsumer)
	if !ok {
		return nil, fmt.Errorf("attrsplit: the collector gave no pipeline router (%T)", next)
	}
	return newConnector(set, c, router)
}
