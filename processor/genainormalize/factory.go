package genainormalize

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/agentmeter/agentmeter/processor/genainormalize/internal/metadata"
)

// Type is the component type, as written in collector configs.
var Type = metadata.Type

const stability = metadata.TracesStability

// NewFactory returns the genainormalize processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(Type,
		func() component.Config { return createDefaultConfig() },
		processor.WithTraces(createTraces, stability))
}

func createTraces(_ context.Context, _ processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("genainormalize: unexpected config type %T", cfg)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return newProcessor(c, next), nil
}
