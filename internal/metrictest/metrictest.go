// Package metrictest reads a component's own telemetry in tests (metricdata from an
// in-memory reader). Each reader fails the test when the metric is not of the kind it
// reads, so a renamed or retyped metric cannot pass as a zero.
package metrictest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// SumInt64 adds up every data point of an int64 sum.
func SumInt64(t *testing.T, m metricdata.Metrics) int64 {
	t.Helper()
	return SumInt64Where(t, m, "", "")
}

// SumInt64Where adds up the data points of an int64 sum whose attribute key has value
// (every point when key is empty).
func SumInt64Where(t *testing.T, m metricdata.Metrics, key, value string) int64 {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, not an int64 sum", m.Name, m.Data)
	var total int64
	for _, dp := range s.DataPoints {
		if key == "" || hasAttr(dp.Attributes, key, value) {
			total += dp.Value
		}
	}
	return total
}

// GaugeInt64 is the value of an int64 gauge of one point.
func GaugeInt64(t *testing.T, m metricdata.Metrics) int64 {
	t.Helper()
	g, ok := m.Data.(metricdata.Gauge[int64])
	require.True(t, ok, "%s is a %T, not an int64 gauge", m.Name, m.Data)
	require.Len(t, g.DataPoints, 1, "%s", m.Name)
	return g.DataPoints[0].Value
}

// GaugeInt64Where is the value of the int64 gauge's point whose attribute key has value;
// there must be one.
func GaugeInt64Where(t *testing.T, m metricdata.Metrics, key, value string) int64 {
	t.Helper()
	g, ok := m.Data.(metricdata.Gauge[int64])
	require.True(t, ok, "%s is a %T, not an int64 gauge", m.Name, m.Data)
	for _, dp := range g.DataPoints {
		if hasAttr(dp.Attributes, key, value) {
			return dp.Value
		}
	}
	require.Failf(t, "no such point", "%s has no point with %s=%s", m.Name, key, value)
	return 0
}

func hasAttr(set attribute.Set, key, value string) bool {
	v, ok := set.Value(attribute.Key(key))
	return ok && v.AsString() == value
}
