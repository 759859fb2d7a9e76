package genaicost

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/agentmeter/agentmeter/processor/genaicost/internal/metadata"
)

// Type is the component type, as written in collector configs.
var Type = metadata.Type

// NewFactory returns the genaicost processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(Type,
		func() component.Config { return createDefaultConfig() },
		processor.WithTraces(createTraces, metadata.TracesStability))
}

func createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("genaicost: unexpected config type %T", cfg)
	}
	p, err := newCoster(set, c)
	if err != nil {
		return nil, err
	}
	return &tracesProcessor{coster: p, next: next}, nil
}

// tracesProcessor prices each batch in place and hands it on.
type tracesProcessor struct {
	*coster
	next consumer.Traces
}

// Start begins the price refresh, when configured; it never waits for a fetch.
func (p *tracesProcessor) Start(context.Context, component.Host) error {
	p.start()
	return nil
}

func (p *tracesProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

func (p *tracesProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	p.processTraces(ctx, td)
	return p.next.ConsumeTraces(ctx, td)
}

func (p *tracesProcessor) Shutdown(ctx context.Context) error { return p.shutdown(ctx) }
