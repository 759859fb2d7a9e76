package subagentmerge

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const scopeName = "github.com/agentmeter/agentmeter/processor/subagentmerge"

// Release reasons; reasons[r] is the value of the "reason" attribute of traces_released.
const (
	relComplete = iota
	relIdle
	relCapacity
	relShutdown
	relSettled
)

var reasons = [5]string{"complete", "idle", "capacity", "shutdown", "settled"}

// telemetry holds the processor's own metrics (metadata.yaml lists them). Counters are
// added once per batch or sweep, never per span, to keep them off the hot path.
type telemetry struct {
	released   metric.Int64Counter
	merged     metric.Int64Counter
	orphans    metric.Int64Counter
	late       metric.Int64Counter
	duplicates metric.Int64Counter
	reg        metric.Registration

	reasonAttrs [5]metric.AddOption
}

func newTelemetry(set component.TelemetrySettings, buffered func() (traces, spans int64)) (*telemetry, error) {
	m := set.MeterProvider.Meter(scopeName)
	t := &telemetry{}
	for i, r := range reasons {
		t.reasonAttrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
	}
	var err error
	mk := func(name, desc, unit string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter("otelcol_processor_subagentmerge_"+name, metric.WithDescription(desc), metric.WithUnit(unit))
		return c
	}
	t.released = mk("traces_released", "Traces released, by reason (complete, settled, idle, capacity, shutdown).", "{trace}")
	t.merged = mk("spans_merged", "execute_tool spans whose subtree usage was merged onto their dispatching chat span.", "{span}")
	t.orphans = mk("orphans", "execute_tool spans with model calls under them and no dispatching chat span in the trace.", "{span}")
	t.late = mk("late_spans", "Spans that arrived after their trace was released and were passed on unbuffered.", "{span}")
	t.duplicates = mk("duplicates_dropped", "Spans dropped because a span with the same trace id and span id was already accepted.", "{span}")
	if err != nil {
		return nil, fmt.Errorf("subagentmerge: create metrics: %w", err)
	}
	tracesG, err := m.Int64ObservableGauge("otelcol_processor_subagentmerge_traces_buffered",
		metric.WithDescription("Traces held in the buffer, waiting to be complete."), metric.WithUnit("{trace}"))
	if err != nil {
		return nil, fmt.Errorf("subagentmerge: create metrics: %w", err)
	}
	spansG, err := m.Int64ObservableGauge("otelcol_processor_subagentmerge_spans_buffered",
		metric.WithDescription("Spans held in the buffer."), metric.WithUnit("{span}"))
	if err != nil {
		return nil, fmt.Errorf("subagentmerge: create metrics: %w", err)
	}
	t.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		tr, sp := buffered()
		o.ObserveInt64(tracesG, tr)
		o.ObserveInt64(spansG, sp)
		return nil
	}, tracesG, spansG)
	if err != nil {
		return nil, fmt.Errorf("subagentmerge: register metrics callback: %w", err)
	}
	return t, nil
}

// counts is what one batch or sweep did, added to the counters in one go.
type counts struct {
	released         [5]int64 // by reason index
	merged, orphans  int64
	late, duplicates int64
}

func (t *telemetry) record(ctx context.Context, c *counts) {
	for i, n := range c.released {
		if n > 0 {
			t.released.Add(ctx, n, t.reasonAttrs[i])
		}
	}
	add := func(ctr metric.Int64Counter, n int64) {
		if n > 0 {
			ctr.Add(ctx, n)
		}
	}
	add(t.merged, c.merged)
	add(t.orphans, c.orphans)
	add(t.late, c.late)
	add(t.duplicates, c.duplicates)
}

func (t *telemetry) shutdown() error {
	if t.reg == nil {
		return nil
	}
	return t.reg.Unregister()
}
