package subagentmerge

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/metadata"
)

// Type is the component type, as written in collector configs.
var Type = metadata.Type

const stability = metadata.TracesStability

// NewFactory returns the subagentmerge processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(Type,
		func() component.Config { return createDefaultConfig() },
		processor.WithTraces(createTraces, stability))
}

func createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("subagentmerge: unexpected config type %T", cfg)
	}
	return newProcessor(set, c, next)
}
