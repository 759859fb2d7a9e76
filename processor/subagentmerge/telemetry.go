package subagentmerge

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentmeter/agentmeter/processor/subagentmerge/internal/metadata"
)

// Release reasons; reasons[r] is the value of the "reason" attribute of traces_released
// (metadata.yaml lists the values).
const (
	relComplete = iota
	relIdle
	relCapacity
	relShutdown
	relSettled
)

var reasons = [5]string{"complete", "idle", "capacity", "shutdown", "settled"}

// telemetry holds the processor's own metrics: the instruments are the ones mdatagen
// generates from metadata.yaml. Counters are added once per batch or sweep, never per
// span, to keep them off the hot path.
//
// Every series carries the processor attribute, the component id: a collector may run
// two instances (the shipped config does, one streaming and one holding for LangSmith),
// and without it their gauges would be one series that each overwrites.
type telemetry struct {
	tb          *metadata.TelemetryBuilder
	reasonAttrs [5]metric.AddOption
	idAttr      metric.MeasurementOption
}

func newTelemetry(id component.ID, set component.TelemetrySettings, buffered func() (traces, spans int64), ledgers func() (traces, bytes int64), unsent func() int64) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, fmt.Errorf("subagentmerge: create metrics: %w", err)
	}
	idKV := attribute.String("processor", id.String())
	t := &telemetry{tb: tb, idAttr: metric.WithAttributeSet(attribute.NewSet(idKV))}
	for i, r := range reasons {
		t.reasonAttrs[i] = metric.WithAttributeSet(attribute.NewSet(idKV, attribute.String("reason", r)))
	}
	// Each gauge reads both counts; they are two atomics, so reading twice per collection
	// costs nothing.
	err = tb.RegisterProcessorSubagentmergeTracesBufferedCallback(func(_ context.Context, o metric.Int64Observer) error {
		tr, _ := buffered()
		o.Observe(tr, t.idAttr)
		return nil
	})
	if err == nil {
		err = tb.RegisterProcessorSubagentmergeSpansBufferedCallback(func(_ context.Context, o metric.Int64Observer) error {
			_, sp := buffered()
			o.Observe(sp, t.idAttr)
			return nil
		})
	}
	if err == nil {
		err = tb.RegisterProcessorSubagentmergeLedgerTracesCallback(func(_ context.Context, o metric.Int64Observer) error {
			tr, _ := ledgers()
			o.Observe(tr, t.idAttr)
			return nil
		})
	}
	if err == nil {
		err = tb.RegisterProcessorSubagentmergeLedgerBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
			_, b := ledgers()
			o.Observe(b, t.idAttr)
			return nil
		})
	}
	if err == nil {
		err = tb.RegisterProcessorSubagentmergeUnsentSpansCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(unsent(), t.idAttr)
			return nil
		})
	}
	if err != nil {
		tb.Shutdown()
		return nil, fmt.Errorf("subagentmerge: register metrics callback: %w", err)
	}
	return t, nil
}

// counts is what one batch or sweep did, added to the counters in one go.
type counts struct {
	released         [5]int64 // by reason index
	merged, orphans  int64
	late, duplicates int64
	corrected        int64
}

func (t *telemetry) record(ctx context.Context, c *counts) {
	for i, n := range c.released {
		if n > 0 {
			t.tb.ProcessorSubagentmergeTracesReleased.Add(ctx, n, t.reasonAttrs[i])
		}
	}
	add := func(ctr metric.Int64Counter, n int64) {
		if n > 0 {
			ctr.Add(ctx, n, t.idAttr)
		}
	}
	add(t.tb.ProcessorSubagentmergeSpansMerged, c.merged)
	add(t.tb.ProcessorSubagentmergeOrphans, c.orphans)
	add(t.tb.ProcessorSubagentmergeLateSpans, c.late)
	add(t.tb.ProcessorSubagentmergeDuplicatesDropped, c.duplicates)
	add(t.tb.ProcessorSubagentmergeCorrections, c.corrected)
}

func (t *telemetry) shutdown() error {
	t.tb.Shutdown()
	return nil
}
