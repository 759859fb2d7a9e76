package tokenmetrics

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// telemetry is the connector's own metrics (metadata.yaml lists them). Counters are
// added once per batch, never per span, to keep them off the hot path.
type telemetry struct {
	calls    metric.Int64Counter
	overflow metric.Int64Counter
	reg      metric.Registration

	outcomeAttrs [len(outcomes)]metric.AddOption
	setAttrs     map[string]metric.MeasurementOption
}

func newTelemetry(set component.TelemetrySettings, series func() map[string]int64) (*telemetry, error) {
	m := set.MeterProvider.Meter(scopeName)
	t := &telemetry{setAttrs: map[string]metric.MeasurementOption{}}
	for i, o := range outcomes {
		if o != "" {
			t.outcomeAttrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
		}
	}
	for _, s := range []string{setAgentmeter, setGenAIInference, setGenAITokenUsage} {
		t.setAttrs[s] = metric.WithAttributeSet(attribute.NewSet(attribute.String("metric_set", s)))
	}
	var err error
	t.calls, err = m.Int64Counter("otelcol_connector_tokenmetrics_model_calls",
		metric.WithDescription("Model-call spans seen, by outcome: counted, no_usage (no usage attribute), corrected (a re-emitted correction, counted when it first passed), invalid (a negative token count)."),
		metric.WithUnit("{call}"))
	if err != nil {
		return nil, fmt.Errorf("tokenmetrics: create metrics: %w", err)
	}
	t.overflow, err = m.Int64Counter("otelcol_connector_tokenmetrics_overflow_calls",
		metric.WithDescription("Model calls counted into a metric set's overflow series because the set held max_series label sets."),
		metric.WithUnit("{call}"))
	if err != nil {
		return nil, fmt.Errorf("tokenmetrics: create metrics: %w", err)
	}
	gauge, err := m.Int64ObservableGauge("otelcol_connector_tokenmetrics_series",
		metric.WithDescription("Label sets held per metric set (the overflow series included); at max_series new ones overflow."),
		metric.WithUnit("{series}"))
	if err != nil {
		return nil, fmt.Errorf("tokenmetrics: create metrics: %w", err)
	}
	t.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for s, n := range series() {
			o.ObserveInt64(gauge, n, t.setAttrs[s])
		}
		return nil
	}, gauge)
	if err != nil {
		return nil, fmt.Errorf("tokenmetrics: register metrics callback: %w", err)
	}
	return t, nil
}

// record adds one batch's outcomes and overflow counts, and logs a set's first overflow.
func (t *telemetry) record(ctx context.Context, c *tokenMetrics) {
	for i, n := range c.outcomes {
		if n > 0 && t.outcomeAttrs[i] != nil {
			t.calls.Add(ctx, n, t.outcomeAttrs[i])
		}
	}
	over := func(set string, n int64, warned *bool) {
		if n == 0 {
			return
		}
		t.overflow.Add(ctx, n, t.setAttrs[set])
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
	if t.reg == nil {
		return nil
	}
	return t.reg.Unregister()
}
