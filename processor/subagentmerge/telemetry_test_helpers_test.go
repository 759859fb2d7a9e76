package subagentmerge

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// sumInt64 adds up every data point of an int64 sum metric; any other kind fails.
func sumInt64(t *testing.T, m metricdata.Metrics) int64 {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, not an int64 sum", m.Name, m.Data)
	var total int64
	for _, dp := range s.DataPoints {
		total += dp.Value
	}
	return total
}

// sumInt64Where adds up the data points of an int64 sum whose attribute key equals value.
func sumInt64Where(t *testing.T, m metricdata.Metrics, key, value string) int64 {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, not an int64 sum", m.Name, m.Data)
	var total int64
	for _, dp := range s.DataPoints {
		if v, ok := dp.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
			total += dp.Value
		}
	}
	return total
}

// gaugeInt64 is the (single) value of an int64 gauge; anything else fails.
func gaugeInt64(t *testing.T, m metricdata.Metrics) int64 {
	t.Helper()
	g, ok := m.Data.(metricdata.Gauge[int64])
	require.True(t, ok, "%s is a %T, not an int64 gauge", m.Name, m.Data)
	require.Len(t, g.DataPoints, 1, "%s", m.Name)
	return g.DataPoints[0].Value
}
