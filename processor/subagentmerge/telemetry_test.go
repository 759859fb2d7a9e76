package subagentmerge

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Two instances in one collector (the shipped config runs a streaming one and a holding
// one for LangSmith) report apart, each series under its component id: one instance's
// zero does not hide the other's count.
func TestTelemetryTwoInstancesApart(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	start := func(name string, mode string) *subagentMerge {
		set := processortest.NewNopSettings(Type)
		set.ID = component.NewIDWithName(Type, name)
		set.TelemetrySettings = tel.NewTelemetrySettings()
		cfg := createDefaultConfig()
		cfg.Mode = mode
		p, err := newProcessor(set, cfg, new(consumertest.TracesSink))
		require.NoError(t, err)
		require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
		t.Cleanup(func() { assert.NoError(t, p.Shutdown(context.Background())) })
		return p
	}
	stream := start("", ModeStream)
	hold := start("langsmith", ModeHold)
	// the nested trace without its root: the stream instance keeps a ledger of it, the
	// hold instance buffers it
	require.NoError(t, stream.ConsumeTraces(context.Background(), withoutRoot(buildNested())))
	require.NoError(t, hold.ConsumeTraces(context.Background(), withoutRoot(buildNested())))

	byID := func(name string) map[string]int64 {
		m, err := tel.GetMetric(name)
		require.NoError(t, err)
		g, ok := m.Data.(metricdata.Gauge[int64])
		require.True(t, ok, "%s is a %T", name, m.Data)
		out := map[string]int64{}
		for _, dp := range g.DataPoints {
			v, ok := dp.Attributes.Value(attribute.Key("processor"))
			require.True(t, ok, "%s: a data point without the processor attribute", name)
			out[v.AsString()] = dp.Value
		}
		return out
	}
	assert.Equal(t, map[string]int64{"subagentmerge": 1, "subagentmerge/langsmith": 0},
		byID("otelcol_processor_subagentmerge_ledger_traces"))
	assert.Equal(t, map[string]int64{"subagentmerge": 0, "subagentmerge/langsmith": 1},
		byID("otelcol_processor_subagentmerge_traces_buffered"))
}
