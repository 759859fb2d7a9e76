package tokenmetrics

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentmeter/agentmeter/connector/tokenmetrics/internal/metadata"
)

// telemetry is the connector's own metrics: the instruments mdatagen generates from
// metadata.yaml. Counters are added once per flush, never per span or trace, to keep
// them off the hot path.
type telemetry struct {
	tb           *metadata.TelemetryBuilder
	outcomeAttrs [len(outcomes)]metric.AddOption
	setAttrs     map[string]metric.MeasurementOption
}

func newTelemetry(set component.TelemetrySettings, sets []string, series func() map[string]int64) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, fmt.Errorf("tokenmetrics: create metrics: %w", err)
	}
	t := &telemetry{tb: tb, setAttrs: map[string]metric.MeasurementOption{}}
	for i, o := range outcomes {
		if o != "" {
			t.outcomeAttrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
		}
	}
	for _, s := range []string{setAgentmeter, setGenAIInference, setGenAITokenUsage} {
		t.setAttrs[s] = metric.WithAttributeSet(attribute.NewSet(attribute.String("metric_set", s)))
	}
	// Every counter series exists from the start at 0: an alert on increase() sees the
	// first overflow or invalid call, which it would miss on a series born at 1.
	ctx := context.Background()
	for i := range outcomes {
		if t.outcomeAttrs[i] != nil {
			tb.ConnectorTokenmetricsModelCalls.Add(ctx, 0, t.outcomeAttrs[i])
		}
	}
	for _, s := range sets {
		tb.ConnectorTokenmetricsOverflowCalls.Add(ctx, 0, t.setAttrs[s])
	}
	err = tb.RegisterConnectorTokenmetricsSeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		for s, n := range series() {
			o.Observe(n, t.setAttrs[s])
		}
		return nil
	})
	if err != nil {
		tb.Shutdown()
		return nil, fmt.Errorf("tokenmetrics: register metrics callback: %w", err)
	}
	return t, nil
}

// record adds the outcomes and overflow counts since the last flush, and logs a set's
// first overflow.
func (t *telemetry) record(ctx context.Context, c *tokenMetrics) {
	for i, n := range c.outcomes {
		if n > 0 && t.outcomeAttrs[i] != nil {
			t.tb.ConnectorTokenmetricsModelCalls.Add(ctx, n, t.outcomeAttrs[i])
		}
	}
	over := func(set string, n int64, warned *bool) {
		if n == 0 {
			return
		}
		t.tb.ConnectorTokenmetricsOverflowCalls.Add(ctx, n, t.setAttrs[set])
		c.overflowed(set, warned)
	}
	if tb := c.agentmeter; tb != nil {
		over(tb.name, tb.overflowCalls, &tb.warned)
	}
	if tb := c.semconv; tb != nil {
		over(tb.name, tb.overflowCalls, &tb.warned)
	}
	if tb := c.tokenUsage; tb != nil {
		over(tb.name, tb.overflowCalls, &tb.warned)
	}
}

func (t *telemetry) shutdown() error {
	t.tb.Shutdown()
	return nil
}
